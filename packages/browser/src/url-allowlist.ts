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
  /** Whether the pattern allows `url`'s origin (scheme, host and port; the path is not compared). */
  matchesOrigin(url: URL): boolean;
  /**
   * Whether the pattern allows a connection to `host:port` whatever the scheme and path (a proxy
   * sees no more): hierarchical patterns of http, https, ws, wss or `*` only. `host` as a URL
   * spells it (lowercase, punycode, IPv6 in brackets).
   */
  matchesEndpoint(host: string, port: number): boolean;
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
    return {
      source,
      matches: (url) => url.href === text,
      matchesOrigin: (url) => url.href === text,
      matchesEndpoint: () => false,
    };
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
  const hostMatches = (urlHost: string): boolean => {
    if (host === '*') return true;
    if (host.startsWith('*.')) return urlHost.endsWith(host.slice(1));
    return urlHost === host;
  };
  const originMatches = (url: URL): boolean => {
    const protocol = url.protocol;
    if (scheme === '*' ? protocol !== 'http:' && protocol !== 'https:' : protocol !== `${scheme}:`)
      return false;
    if (!hostMatches(url.hostname.toLowerCase())) return false;
    if (port !== '*') {
      const actual = url.port || DEFAULT_PORTS[protocol] || '';
      const wanted = port ?? DEFAULT_PORTS[protocol] ?? '';
      if (actual !== wanted) return false;
    }
    return true;
  };
  const endpointSchemes = scheme === '*' ? ['http:', 'https:'] : [`${scheme}:`];
  return {
    source,
    matches(url) {
      if (!originMatches(url)) return false;
      if (path && url.pathname !== path && !url.pathname.startsWith(`${path}/`)) return false;
      return true;
    },
    matchesOrigin: originMatches,
    matchesEndpoint(endpointHost, endpointPort) {
      if (!endpointSchemes.every((s) => s in DEFAULT_PORTS)) return false;
      if (!hostMatches(endpointHost.toLowerCase())) return false;
      if (port === '*') return true;
      const wanted = port === undefined ? endpointSchemes.map((s) => DEFAULT_PORTS[s]) : [port];
      return wanted.includes(String(endpointPort));
    },
  };
}

/**
 * The host's allowlist: the URLs the model may open without asking, and — checked on every request
 * the tools' pages make (see RequestPolicy) — the only ones the browser may load.
 */
export class UrlAllowlist {
  readonly patterns: readonly UrlPattern[];

  constructor(patterns: readonly string[]) {
    this.patterns = patterns.map((p) => compileUrlPattern(p));
  }

  /** The pattern that allows `url`, or undefined. */
  match(url: URL): UrlPattern | undefined {
    return this.patterns.find((p) => p.matches(url));
  }

  /** The pattern that allows `url`'s origin whatever its path, or undefined. */
  matchOrigin(url: URL): UrlPattern | undefined {
    return this.patterns.find((p) => p.matchesOrigin(url));
  }

  /** The pattern that allows a connection to `host:port`, or undefined (see UrlPattern.matchesEndpoint). */
  matchEndpoint(host: string, port: number): UrlPattern | undefined {
    return this.patterns.find((p) => p.matchesEndpoint(host, port));
  }

  /** The pattern a host would add to allow this URL's origin (for the ask's wording). */
  static suggestionFor(url: URL): string {
    if (url.protocol === 'http:' || url.protocol === 'https:') return url.origin;
    return url.href;
  }
}
