import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { lookup } from 'node:dns/promises';
import { connect, isIP, isIPv4, type Socket } from 'node:net';
import { domainToASCII } from 'node:url';
import type { Logger } from '@conch/core';
import type { CredentialTunnel } from './credentials/credential-injector.js';

/** Where a sandboxed command wants to connect: the host as the proxy normalised it, and the port. */
export interface Destination {
  /** Lowercase, no trailing dot, IDN as punycode, IPv4 in dotted decimal, IPv6 without brackets. */
  host: string;
  port: number;
  /**
   * The addresses `host` resolves to (outside the sandbox), normalised like hosts; the proxy
   * connects to the first of them, the one that was decided on (no second lookup to rebind).
   */
  addresses?: readonly string[];
  /** Looks `host` up (once; later calls answer from the first): call it only for an allowed name. */
  resolve?: () => Promise<readonly string[]>;
}

export interface ConnectionVerdict {
  allowed: boolean;
  /** Why, for a refusal (said to the command in the 403 and reported in the result). */
  reason?: string;
}

/** A connection the proxy refused. */
export interface BlockedConnection extends Destination {
  /** performance.now() when it was refused. */
  at: number;
  reason: string;
}

export interface NetworkProxyOptions {
  /** The unix socket it listens on (bind-mounted into the sandboxes). */
  socketPath: string;
  /** Decides each connection (the permission gate's network rules; may ask a human). */
  decide: (destination: Destination) => Promise<ConnectionVerdict>;
  logger?: Logger | undefined;
  /**
   * Connections from the sandbox held at once (default {@link MAX_PROXY_CONNECTIONS}); past it a
   * new one is closed as soon as it is accepted, so a flood from inside costs the host at most this
   * many descriptors (twice, with each tunnel's upstream socket).
   */
  maxConnections?: number;
  /**
   * Called for each CONNECT the proxy allowed, before it connects: a tunnel to hand the client to
   * (after `200 Connection Established`) instead of piping it to the destination, or undefined for
   * the usual pipe. The credential injector's hook (credentials/credential-injector.ts interceptFor).
   */
  intercept?: (destination: { host: string; port: number }) => CredentialTunnel | undefined;
  /**
   * How an allowed name is looked up (default: the system resolver, `dns.lookup` with every
   * address). A host with its own resolver (a split-horizon VPN's) passes one; so do tests.
   */
  lookup?: (host: string) => Promise<readonly string[]>;
}

/**
 * Default of NetworkProxyOptions.maxConnections: far more than a package manager's parallel
 * downloads (npm: 16 sockets, pip: 10, cargo: a few dozen), far fewer than a host's descriptors.
 */
export const MAX_PROXY_CONNECTIONS = 256;

/**
 * Normalises a host the way the allow-list compares hosts: lowercase, trailing dot dropped,
 * international names as punycode, IPv4 in every spelling (`2130706433`, `0x7f.1`, `127.1`) as
 * dotted decimal, IPv6 compressed without brackets. Undefined for anything that is not a host
 * (userinfo, paths, spaces, an empty name): such a request is refused.
 */
export function normalizeHost(raw: string): string | undefined {
  let host = raw.trim();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  if (host === '' || /[\s/@\\?#%]/.test(host)) return undefined;
  // isIP only where a ':' says IPv6: node compiles its large IPv6 pattern on first use (~4 ms, at
  // every conch-mcp start, where the allow-list's names are normalised).
  if (host.includes(':') && isIP(host) === 6) {
    let v6: string;
    try {
      v6 = new URL(`http://[${host}]/`).hostname.slice(1, -1);
    } catch {
      return undefined;
    }
    // An IPv4-mapped address is that IPv4 address (`::ffff:127.0.0.3` connects to 127.0.0.3).
    const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
    if (mapped) {
      const hi = parseInt(mapped[1]!, 16);
      const lo = parseInt(mapped[2]!, 16);
      return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
    }
    return v6;
  }
  if (host.includes(':')) return undefined;
  let parsed: string;
  try {
    // The WHATWG parser: IPv4 shorthands, hex and decimal forms, case, IDN.
    parsed = new URL(`http://${host}/`).hostname;
  } catch {
    return undefined;
  }
  parsed = parsed.replace(/\.$/, '');
  const ascii = isIPv4(parsed) ? parsed : domainToASCII(parsed);
  return ascii === '' ? undefined : ascii.toLowerCase();
}

/** `host:port` of a CONNECT request (`[v6]:port` too); undefined when it is not exactly that. */
function parseAuthority(authority: string): Destination | undefined {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority);
  if (!m) return undefined;
  const host = normalizeHost(m[1]!);
  const port = Number(m[2]);
  if (!host || port < 1 || port > 65535) return undefined;
  return { host, port };
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * The one way out of a sandbox: an HTTP proxy (CONNECT for TLS, absolute-form requests for plain
 * HTTP) on a unix socket outside the sandbox, which the sandbox's supervisor bridges to
 * `127.0.0.1:<port>` inside the sandbox's network namespace. Every connection is decided by
 * `decide` (the permission gate's allow-list, or a human); a refused one gets a 403 that names the
 * host, and is kept for the command's result (`NETWORK_BLOCKED`). Names are resolved here, outside
 * the sandbox, so the sandbox needs no DNS: a DNS query from inside goes nowhere.
 *
 * Written here rather than taken from a proxy package: it must decide per destination before any
 * byte is forwarded and answer through a unix socket, and the forwarding itself is a few pipes.
 */
export class NetworkProxy {
  private readonly options: NetworkProxyOptions;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly blocked: BlockedConnection[] = [];
  private listening: Promise<void> | undefined;
  private dropped = 0;
  private warnedFlood = false;

  constructor(options: NetworkProxyOptions) {
    this.options = options;
    this.server = createServer((req, res) => void this.forward(req, res));
    // node closes a connection past the cap right after accept(), before any socket object exists.
    this.server.maxConnections = options.maxConnections ?? MAX_PROXY_CONNECTIONS;
    this.server.on('drop', () => {
      this.dropped++;
      if (this.warnedFlood) return;
      this.warnedFlood = true;
      this.options.logger?.warn(
        { maxConnections: this.server.maxConnections },
        'network proxy: a sandbox opened more connections than the cap; the excess ones are closed',
      );
    });
    this.server.on(
      'connect',
      (req: IncomingMessage, socket: Socket, head: Buffer) => void this.tunnel(req, socket, head),
    );
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    // A request node's parser rejects (a `#` or a NUL in a CONNECT target, a bad request line):
    // refused with a 400 and recorded like any malformed request, not closed without a word.
    this.server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
      if (socket.writable && error.code !== 'ECONNRESET') {
        const body = this.refuse(
          undefined,
          `a request the proxy could not read (${error.code ?? error.message})`,
        );
        socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      } else socket.destroy();
    });
  }

  /** Starts listening (once). */
  start(): Promise<void> {
    this.listening ??= new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.socketPath, () => {
        this.server.off('error', reject);
        resolve();
      });
      this.server.unref();
    });
    return this.listening;
  }

  /** Connections closed at once because the cap was reached, since the proxy started. */
  get droppedConnections(): number {
    return this.dropped;
  }

  /** Connections refused since `since` (performance.now()), oldest first. */
  blockedSince(since: number): BlockedConnection[] {
    return this.blocked.filter((b) => b.at >= since);
  }

  close(): void {
    this.server.close();
    for (const socket of this.sockets) socket.destroy();
  }

  /**
   * Decides a destination: `decide` judges the name first and resolves it (here: the sandbox has no
   * DNS) only once the name is allowed, through `resolve`; the unspecified addresses (`0.0.0.0`,
   * `::` connect to this machine) are refused; on an allow the address to connect to is the first
   * one decided on (no second lookup to rebind). A name that does not resolve is no refusal: the
   * client gets a 502 (`unreachable`).
   */
  private async admit(
    destination: Destination,
  ): Promise<ConnectionVerdict & { address?: string; unreachable?: string }> {
    let resolved: string[] | undefined;
    let lookupError: string | undefined;
    const resolve = async (): Promise<string[]> => {
      if (resolved) return resolved;
      if (isIP(destination.host)) return (resolved = [destination.host]);
      try {
        const found = this.options.lookup
          ? await this.options.lookup(destination.host)
          : (await lookup(destination.host, { all: true, verbatim: true })).map((a) => a.address);
        resolved = found.map((a) => normalizeHost(a)).filter((a): a is string => a !== undefined);
      } catch (error) {
        lookupError = (error as NodeJS.ErrnoException).code ?? 'lookup failed';
        resolved = [];
      }
      return resolved;
    };
    let verdict: ConnectionVerdict;
    try {
      verdict = await this.options.decide({ ...destination, resolve });
    } catch (error) {
      this.options.logger?.warn(
        { err: error, host: destination.host },
        'network decision failed: the connection is refused',
      );
      return { allowed: false, reason: 'the permission check failed' };
    }
    if (!verdict.allowed) return verdict;
    const addresses = await resolve();
    if (lookupError)
      return { allowed: true, unreachable: `${destination.host} does not resolve (${lookupError})` };
    if (addresses.length === 0 || addresses.some((a) => a === '0.0.0.0' || a === '::')) {
      return { allowed: false, reason: 'the unspecified address (0.0.0.0, ::) is not a destination' };
    }
    return { ...verdict, address: addresses[0]! };
  }

  private refuse(destination: Destination | undefined, reason: string, shown?: string): string {
    // Kept for the command's result even when the request named no usable destination (userinfo,
    // a malformed target): the command was refused all the same.
    const host = destination?.host ?? shown ?? '(malformed request)';
    this.blocked.push({ host, port: destination?.port ?? 0, at: performance.now(), reason });
    if (this.blocked.length > 200) this.blocked.splice(0, this.blocked.length - 200);
    const what = destination ? `${destination.host}:${destination.port}` : 'that destination';
    return `conch: the sandbox's network does not reach ${what}: ${reason}.\n`;
  }

  private async tunnel(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    client.on('error', () => client.destroy());
    const destination = parseAuthority(req.url ?? '');
    if (!destination) {
      // Recorded as a malformed request, not under its text: `127.0.0.1:1@example.com:443` is no host.
      const body = this.refuse(undefined, `a malformed CONNECT target (${JSON.stringify(req.url ?? '')})`);
      client.end(`HTTP/1.1 400 Bad Request\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      return;
    }
    const verdict = await this.admit(destination);
    if (verdict.unreachable) {
      client.end(
        `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n\r\nconch proxy: ${verdict.unreachable}\n`,
      );
      return;
    }
    if (!verdict.allowed || !verdict.address) {
      const body = this.refuse(destination, verdict.reason ?? 'not on the allow-list');
      client.end(
        `HTTP/1.1 403 Forbidden\r\nX-Conch-Blocked: ${destination.host}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      return;
    }
    // A destination with a credential: its TLS is ended here and its requests carry the real value.
    const intercepted = this.options.intercept?.(destination);
    if (intercepted) {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      intercepted(client, {
        address: verdict.address,
        port: destination.port,
        ...(head.length ? { head } : {}),
      });
      return;
    }
    const upstream = connect(destination.port, verdict.address);
    this.sockets.add(upstream);
    upstream.on('close', () => this.sockets.delete(upstream));
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', (error) => {
      if (!client.writableEnded && !upstream.readable) {
        client.end(
          `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n\r\nconch proxy: ${error.message}\n`,
        );
      } else client.destroy();
    });
    client.on('close', () => upstream.destroy());
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res
        .writeHead(400, { 'Content-Type': 'text/plain' })
        .end('conch proxy: expected an absolute http:// URL\n');
      return;
    }
    const host =
      url.protocol === 'http:' && !url.username && !url.password ? normalizeHost(url.hostname) : undefined;
    const destination = host ? { host, port: Number(url.port || 80) } : undefined;
    if (!destination) {
      const body = this.refuse(
        undefined,
        `only plain http:// URLs without credentials go through (${url.protocol})`,
        url.hostname || url.protocol,
      );
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end(body);
      return;
    }
    const verdict = await this.admit(destination);
    if (verdict.unreachable) {
      res.writeHead(502, { 'Content-Type': 'text/plain' }).end(`conch proxy: ${verdict.unreachable}\n`);
      return;
    }
    if (!verdict.allowed || !verdict.address) {
      const body = this.refuse(destination, verdict.reason ?? 'not on the allow-list');
      res.writeHead(403, { 'Content-Type': 'text/plain', 'X-Conch-Blocked': destination.host }).end(body);
      return;
    }
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    headers.host = url.host;
    const upstream = httpRequest(
      {
        host: verdict.address,
        port: destination.port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers,
      },
      (answer) => {
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
        }
        res.writeHead(answer.statusCode ?? 502, out);
        answer.pipe(res);
      },
    );
    upstream.on('error', (error) => {
      if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain' });
      res.end(`conch proxy: ${error.message}\n`);
    });
    req.pipe(upstream);
  }
}
