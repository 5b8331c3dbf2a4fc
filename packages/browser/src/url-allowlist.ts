import { ConchError } from '@conch/core';

/**
 * URL patterns for the browser allowlist. A pattern is either
 *
 * - `scheme://host[:port][/path]` — `scheme` is exact (`http`, `https`, `file` …) or `*` for http
 *   and https; `host` is exact (case-insensitive), `*.example.com` (subdomains, not the apex) or
 *   `*` (any); `:port` is exact or `:*` (any port), and when left out means the scheme's default
 *   port (80 for http, 443 for https); `/path` is a prefix that matches on segment boundaries
 *   (`/docs` matches `/docs` and `/docs/x`, not `/docsx`); or
 * - an opaque URL compared exactly (`about:blank`).
 *
 * Defaults allow loopback on any port (a dev server the agent started) and `about:blank`.
 */
export const DEFAULT_ALLOWED_URLS: readonly string[] = Object.freeze([
  'http://localhost:*',
  'http://127.0.0.1:*',
  'http://[::1]:*',
  'about:blank',
]);

export interface UrlPattern {
  readonly source: string;
  matches(url: URL): boolean;
}

const HIERARCHICAL = /^([a-z][a-z0-9+.-]*|\*):\/\/(\[[0-9a-f:.]+\]|[^/:?#]*)(?::(\d{1,5}|\*))?(\/[^?#]*)?$/i;
const OPAQUE = /^[a-z][a-z0-9+.-]*:[^/].*$/i;
const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443' };

/** Compiles one pattern; throws a ConchError (`INVALID_URL_PATTERN`) saying what is wrong when it is not one. */
export function compileUrlPattern(source: string): UrlPattern {
  const compiled = compile(source);
  if (typeof compiled === 'string') throw new ConchError({ code: 'INVALID_URL_PATTERN', message: compiled });
  return compiled;
}

/** A pattern, or what is wrong with it (kept internal: callers get a throw). */
function compile(source: string): UrlPattern | string {
  const text = source.trim();
  const opaque = OPAQUE.exec(text);
  if (opaque && !text.includes('://')) {
    return { source, matches: (url) => url.href === text };
  }
  const m = HIERARCHICAL.exec(text);
  if (!m)
    return `"${source}" is not a URL pattern like "https://example.com", "http://localhost:*" or "https://*.example.com/docs"`;
  const scheme = m[1]!.toLowerCase();
  const host = m[2]!.toLowerCase();
  const port = m[3];
  const path = m[4] && m[4] !== '/' ? m[4].replace(/\/+$/, '') : undefined;
  if (host === '' && scheme !== 'file') return `"${source}" has no host`;
  if (host.includes('*') && host !== '*' && !/^\*\.[^*]+$/.test(host))
    return `"${source}": a host wildcard must be the whole host (*) or a leading *. (*.example.com)`;
  return {
    source,
    matches(url) {
      const protocol = url.protocol;
      if (scheme === '*' ? protocol !== 'http:' && protocol !== 'https:' : protocol !== `${scheme}:`)
        return false;
      const urlHost = url.hostname.toLowerCase();
      if (host === '*') {
        // any host
      } else if (host.startsWith('*.')) {
        if (!urlHost.endsWith(host.slice(1))) return false;
      } else if (urlHost !== host) return false;
      if (port !== '*') {
        const actual = url.port || DEFAULT_PORTS[protocol] || '';
        const wanted = port ?? DEFAULT_PORTS[protocol] ?? '';
        if (actual !== wanted) return false;
      }
      if (path && url.pathname !== path && !url.pathname.startsWith(`${path}/`)) return false;
      return true;
    },
  };
}

/** The host's allowlist of URLs the model may open without asking. */
export class UrlAllowlist {
  readonly patterns: readonly UrlPattern[];

  constructor(patterns: readonly string[]) {
    this.patterns = patterns.map((p) => compileUrlPattern(p));
  }

  /** The pattern that allows `url`, or undefined. */
  match(url: URL): UrlPattern | undefined {
    return this.patterns.find((p) => p.matches(url));
  }

  /** The pattern a host would add to allow this URL's origin (for the ask's wording). */
  static suggestionFor(url: URL): string {
    if (url.protocol === 'http:' || url.protocol === 'https:') return url.origin;
    return url.href;
  }
}
