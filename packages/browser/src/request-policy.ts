import { isIP } from 'node:net';
import { compileUrlPattern, UrlAllowlist, type UrlPattern } from './url-allowlist.js';

export type RequestVerdict =
  | { allowed: true; /** The pattern (or built-in rule) that allowed it. */ rule: string }
  | { allowed: false; /** One sentence: what was refused and what would allow it. */ reason: string };

function shorten(text: string, max = 200): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * What the browser tools' pages may load: every request their pages, frames, workers and popups
 * make — not only the URL the model names — is judged here.
 *
 * - URLs matching the allowlist's patterns (`allowedUrls`), and the origin of the navigation a human
 *   approved last (`approve`), until the next navigation;
 * - `data:` URLs and `about:blank` / `about:srcdoc` (nothing is fetched);
 * - `blob:` URLs by the origin that created them (`blob:http://127.0.0.1:3000/…` as
 *   `http://127.0.0.1:3000`, whatever the pattern's path); `blob:null/…` from an opaque origin
 *   (a data: or sandboxed frame, itself loaded by an allowed page) is allowed;
 * - `ws:` / `wss:` URLs as their `http:` / `https:` counterparts (a page on an allowed dev server
 *   may open a WebSocket to it).
 *
 * Everything else is refused.
 */
export class RequestPolicy {
  private approved: { pattern: UrlPattern; url: string } | undefined;

  constructor(readonly allowlist: UrlAllowlist) {}

  /**
   * A human (or a host rule) approved opening `url` although the allowlist does not name it: its
   * origin (what the question offered to allow) is allowed until the next call. Undefined drops it.
   */
  approve(url: URL | undefined): void {
    this.approved = url
      ? { pattern: compileUrlPattern(UrlAllowlist.suggestionFor(url)), url: url.href }
      : undefined;
  }

  /** The origin approved for the current navigation, if any (as UrlAllowlist.suggestionFor names it). */
  get approvedOrigin(): string | undefined {
    return this.approved?.pattern.source;
  }

  /** Whether the tools' pages may request `raw` (a URL as CDP reports it). */
  judge(raw: string): RequestVerdict {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return { allowed: false, reason: `"${shorten(raw)}" is not a URL` };
    }
    switch (url.protocol) {
      case 'data:':
        return { allowed: true, rule: 'data: URLs' };
      case 'about:':
        if (url.href === 'about:blank' || url.href === 'about:srcdoc')
          return { allowed: true, rule: url.href };
        break;
      case 'blob:':
      case 'filesystem:': {
        if (url.origin === 'null') return { allowed: true, rule: 'a blob of an opaque origin' };
        const origin = new URL(url.origin);
        const pattern =
          this.allowlist.matchOrigin(origin) ??
          (this.approved?.pattern.matchesOrigin(origin) ? this.approved.pattern : undefined);
        return pattern ? { allowed: true, rule: pattern.source } : this.refusal(shorten(raw), origin);
      }
      case 'ws:':
      case 'wss:':
        url = new URL(url.href.replace(/^ws(s?):/i, 'http$1:'));
        break;
    }
    const pattern =
      this.allowlist.match(url) ?? (this.approved?.pattern.matches(url) ? this.approved.pattern : undefined);
    return pattern ? { allowed: true, rule: pattern.source } : this.refusal(shorten(raw), url);
  }

  /**
   * Whether the tools' browser context may connect to `host:port` (what its proxy sees of a
   * WebSocket or any other connection): some pattern naming that host and port, whatever its path.
   */
  judgeEndpoint(host: string, port: number): RequestVerdict {
    const where = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
    let normalized: string;
    try {
      normalized = new URL(`http://${where}/`).hostname;
    } catch {
      return { allowed: false, reason: `"${shorten(where)}" is not a host and port` };
    }
    const pattern =
      this.allowlist.matchEndpoint(normalized, port) ??
      (this.approved?.pattern.matchesEndpoint(normalized, port) ? this.approved.pattern : undefined);
    if (pattern) return { allowed: true, rule: pattern.source };
    return {
      allowed: false,
      reason: `${where} is not in the browser's allowedUrls ("http://${where}" or "https://${where}" would allow it)`,
    };
  }

  private refusal(what: string, url: URL): RequestVerdict {
    return {
      allowed: false,
      reason: `${what} is not in the browser's allowedUrls ("${UrlAllowlist.suggestionFor(url)}" would allow it)`,
    };
  }
}
