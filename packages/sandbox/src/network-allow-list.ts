import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { compileHostPattern, type HostPattern } from './host-patterns.js';
import type { ConnectionVerdict, Destination } from './network-proxy.js';

/**
 * Whether an address is this machine or its network: loopback, unspecified, link-local (cloud
 * metadata at 169.254.169.254), private ranges, carrier-grade NAT, IPv6 unique-local. A name that
 * resolves to one is reached only when the allow-list names that address itself (no DNS rebinding
 * onto them).
 */
export function internalAddress(address: string): boolean {
  if (isIP(address) === 4) {
    const [a, b] = address.split('.').map(Number) as [number, number];
    return (
      a === 127 ||
      a === 0 ||
      a === 10 ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 100 && b >= 64 && b <= 127)
    );
  }
  const v6 = address.toLowerCase();
  return v6 === '::1' || v6 === '::' || /^fe[89ab]/.test(v6) || /^f[cd]/.test(v6);
}

/**
 * Whether an address is one of this machine's own (any interface's): a service the host binds to
 * every address answers there as on its loopback.
 */
export function ownAddress(address: string): boolean {
  const wanted = address.toLowerCase();
  for (const list of Object.values(networkInterfaces()))
    for (const entry of list ?? []) if (entry.address.toLowerCase() === wanted) return true;
  return false;
}

const LOOPBACK = (address: string) => /^127\./.test(address) || address === '::1';

/**
 * Why a connection the allow-list let through may not go where it leads, or undefined: this machine
 * and its networks (internalAddress, the machine's own addresses) are reached only when an entry
 * names them — the address itself, `localhost` for the loopback, or the host name by an exact
 * pattern (`db.internal`, `localhost:5432`) — never through `*` or `*.domain`: an allow-all would
 * otherwise reach every service of the host (its loopback, its own public address), and a name
 * under an allowed domain could resolve onto them (DNS rebinding). `addresses`: what the name
 * resolved to (an IP literal is its own address).
 */
export function internalRefusal(
  host: string,
  port: number,
  addresses: readonly string[],
  allow: readonly HostPattern[],
): string | undefined {
  const literal = isIP(host) !== 0;
  const internal = (literal ? [host] : addresses).filter((a) => internalAddress(a) || ownAddress(a));
  if (internal.length === 0) return undefined;
  const named = (a: string) =>
    allow.some((p) => !p.wildcard && (p.test(a, port) || (LOOPBACK(a) && p.test('localhost', port))));
  if (!literal && allow.some((p) => !p.wildcard && p.test(host, port))) return undefined;
  const unnamed = internal.filter((a) => !named(a));
  if (unnamed.length === 0) return undefined;
  return literal
    ? `${host} is this machine or its network, which only an allow-list entry naming it reaches (not * or *.domain)`
    : `${host} resolves to an internal address (${addresses.join(', ')}), which only an allow-list entry naming it reaches (not * or *.domain)`;
}

/**
 * Ports of the host's loopback the allow-list names with an explicit port (`localhost:8080`,
 * `127.0.0.1:5432`, `[::1]:6379`): inside the sandbox a listener on each forwards to that service
 * on the host (bridge.ts `startLoopbackForwards`), through the proxy, which decides it again.
 */
export function loopbackPorts(allow: readonly string[]): number[] {
  const ports = new Set<number>();
  for (const entry of allow) {
    const m = /^(?:127\.0\.0\.1|localhost|\[::1\]):(\d{1,5})$/i.exec(entry.trim());
    const port = m ? Number(m[1]) : NaN;
    if (port >= 1 && port <= 65535) ports.add(port);
  }
  return [...ports].sort((a, b) => a - b);
}

/** Host patterns, each checked: a bad one throws, naming it. */
export function compileHostPatterns(field: string, patterns: readonly string[]): HostPattern[] {
  return patterns.map((text) => {
    const compiled = compileHostPattern(text);
    if (typeof compiled === 'string') throw new TypeError(`${field}: ${compiled}`);
    return compiled;
  });
}

/**
 * The proxy's decision for a library host without a permission gate: what the allow-list names
 * (and the deny-list does not), never asking anyone; a name is looked up only once allowed, and
 * one that resolves to an internal address is refused unless the allow-list names that address.
 * (@conch/permission's gate makes the same decisions and can ask a human.)
 */
export function allowListDecider(network: {
  allow?: readonly string[];
  deny?: readonly string[];
}): (destination: Destination) => Promise<ConnectionVerdict> {
  const allow = compileHostPatterns('network.allow', network.allow ?? []);
  const deny = compileHostPatterns('network.deny', network.deny ?? []);
  const hostPorts = loopbackPorts(network.allow ?? []);
  return async ({ host, port, addresses, resolve }) => {
    const denied = deny.find((p) => p.test(host, port));
    if (denied) return { allowed: false, reason: `the network deny-list names ${denied.text}` };
    // A loopback forward (the sandbox's 127.0.0.1 / ::1 at a port the list names as
    // `localhost:<port>`, `127.0.0.1:<port>` or `[::1]:<port>`): the host's service at that port.
    if ((host === '127.0.0.1' || host === '::1') && hostPorts.includes(port)) return { allowed: true };
    if (!allow.some((p) => p.test(host, port)))
      return { allowed: false, reason: `${host} is not on the network allow-list` };
    const resolved = resolve ? await resolve() : (addresses ?? []);
    const deniedAddress = deny.find((p) => resolved.some((a) => p.test(a, port)));
    if (deniedAddress)
      return {
        allowed: false,
        reason: `${host} resolves to an address the deny-list names (${deniedAddress.text})`,
      };
    const internal = internalRefusal(host, port, resolved, allow);
    if (internal) return { allowed: false, reason: internal };
    return { allowed: true };
  };
}
