import { normalizeHost } from './network-proxy.js';

/**
 * Host patterns of the network allow-list and deny-list, matched on the destination the proxy
 * normalised (lowercase, no trailing dot, punycode, canonical IP literals), never on text a
 * command wrote:
 *
 * - `registry.npmjs.org`: that host only (`registry.npmjs.org.evil.net`, `evil.net/registry.npmjs.org`
 *   and `registry.npmjs.org@evil.net` are other hosts, or no host at all);
 * - `*.pythonhosted.org`: its subdomains at any depth, not the name itself;
 * - `127.0.0.2`, `[::1]`: an IP literal, in whatever spelling the command used (`2130706434`);
 * - `host:port`: that port only; `*`: every destination (the host's explicit choice).
 */
export interface HostPattern {
  readonly text: string;
  /** `*` or `*.domain`: a pattern that names no host itself (see internalRefusal). */
  readonly wildcard?: boolean;
  test(host: string, port: number): boolean;
}

/** A pattern, or a message saying what is wrong with it. */
export function compileHostPattern(text: string): HostPattern | string {
  const raw = text.trim();
  if (raw === '*') return { text, wildcard: true, test: () => true };
  const m = /^(\*\.)?(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(raw);
  if (!m) return `expected a host, *.domain or host:port; given ${JSON.stringify(text)}`;
  const [, wildcard, hostPart, portPart] = m;
  const host = normalizeHost(hostPart!);
  if (!host) return `expected a host name or IP address; given ${JSON.stringify(text)}`;
  const port = portPart === undefined ? undefined : Number(portPart);
  if (port !== undefined && (port < 1 || port > 65535))
    return `expected a port from 1 to 65535; given ${portPart}`;
  const portOk = (p: number) => port === undefined || p === port;
  if (wildcard) return { text, wildcard: true, test: (h, p) => portOk(p) && h.endsWith(`.${host}`) };
  return { text, test: (h, p) => portOk(p) && h === host };
}

/**
 * Package registries and code hosts a coding agent needs (npm, yarn, PyPI, crates.io, Go modules,
 * RubyGems, Maven Central, GitHub and GitLab): what conch-mcp and the demo allow by default. The
 * library default allows nothing.
 */
export const PACKAGE_REGISTRIES: readonly string[] = [
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'pypi.org',
  'files.pythonhosted.org',
  'crates.io',
  'index.crates.io',
  'static.crates.io',
  'proxy.golang.org',
  'sum.golang.org',
  'rubygems.org',
  'repo.maven.apache.org',
  'repo1.maven.org',
  'github.com',
  'codeload.github.com',
  'objects.githubusercontent.com',
  'gitlab.com',
];
