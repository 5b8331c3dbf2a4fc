import { createServer, connect, type Server, type Socket } from 'node:net';
import type { Logger } from '@conch/core';
import type { RequestVerdict } from './request-policy.js';

export interface AllowlistProxyOptions {
  /** Decides each connection by host and port (a SOCKS proxy sees no scheme and no path). */
  judge: (host: string, port: number) => RequestVerdict;
  onBlocked?: (endpoint: string, reason: string) => void;
  logger: Logger;
}

// RFC 1928 reply codes.
const SUCCEEDED = 0x00;
const GENERAL_FAILURE = 0x01;
const NOT_ALLOWED = 0x02;
const HOST_UNREACHABLE = 0x04;
const CONNECTION_REFUSED = 0x05;
const COMMAND_NOT_SUPPORTED = 0x07;
const ADDRESS_NOT_SUPPORTED = 0x08;

/** How long a client may take to send its greeting and request. */
const HANDSHAKE_TIMEOUT_MS = 30_000;
const FAILURES_KEPT = 100;

/** Chromium's name for what happened when the proxy could not connect (it only says ERR_SOCKS_CONNECTION_FAILED). */
const CHROME_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'ERR_CONNECTION_REFUSED',
  ENOTFOUND: 'ERR_NAME_NOT_RESOLVED',
  EAI_AGAIN: 'ERR_NAME_NOT_RESOLVED',
  ETIMEDOUT: 'ERR_CONNECTION_TIMED_OUT',
  EHOSTUNREACH: 'ERR_ADDRESS_UNREACHABLE',
  ENETUNREACH: 'ERR_ADDRESS_UNREACHABLE',
  ECONNRESET: 'ERR_CONNECTION_RESET',
};

/** `host:port` with the host as a URL spells it (lowercase, IPv6 in brackets). */
function endpointKey(host: string, port: number): string {
  const bare = host.replace(/^\[|\]$/g, '');
  try {
    return `${new URL(`http://${bare.includes(':') ? `[${bare}]` : bare}/`).hostname}:${port}`;
  } catch {
    return `${host}:${port}`;
  }
}

function reply(code: number): Buffer {
  return Buffer.from([0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
}

function ipv6(bytes: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/** The request (RFC 1928 §4) once it is all there: command, host, port and its length in bytes. */
function parseRequest(
  data: Buffer,
): { command: number; host: string; port: number; length: number } | 'incomplete' | 'bad-address' {
  if (data.length < 5) return 'incomplete';
  const command = data[1]!;
  const type = data[3]!;
  let host: string;
  let offset: number;
  if (type === 0x01) {
    if (data.length < 10) return 'incomplete';
    host = [...data.subarray(4, 8)].join('.');
    offset = 8;
  } else if (type === 0x03) {
    const n = data[4]!;
    if (data.length < 5 + n + 2) return 'incomplete';
    host = data.subarray(5, 5 + n).toString('latin1');
    offset = 5 + n;
  } else if (type === 0x04) {
    if (data.length < 22) return 'incomplete';
    host = ipv6(data.subarray(4, 20));
    offset = 20;
  } else return 'bad-address';
  return { command, host, port: data.readUInt16BE(offset), length: offset + 2 };
}

/**
 * A SOCKS5 proxy on 127.0.0.1 for the browser tools' browser context: every connection the
 * context opens — WebSockets included, which CDP's request interception never sees — goes through
 * it, and only connections to a host and port the allowlist names are made. A refused one gets
 * "connection not allowed by ruleset" and nothing reaches the destination. Chromium proxies
 * loopback too for such a context (Playwright adds `<-loopback>` to its bypass list).
 *
 * Written here rather than taken from a package: it only decides and pipes, and it must decide
 * before any byte is forwarded.
 */
export class AllowlistProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  /** Why the last connection to an endpoint failed, as Chromium would have named it. */
  private readonly failures = new Map<string, string>();
  private port = 0;

  private constructor(private readonly options: AllowlistProxyOptions) {
    this.server = createServer((socket) => this.accept(socket));
  }

  static async start(options: AllowlistProxyOptions): Promise<AllowlistProxy> {
    const proxy = new AllowlistProxy(options);
    await new Promise<void>((resolve, reject) => {
      proxy.server.once('error', reject);
      proxy.server.listen(0, '127.0.0.1', () => {
        proxy.server.off('error', reject);
        resolve();
      });
    });
    proxy.port = (proxy.server.address() as { port: number }).port;
    return proxy;
  }

  /** `socks5://127.0.0.1:<port>`, for the browser context's proxy setting. */
  get url(): string {
    return `socks5://127.0.0.1:${this.port}`;
  }

  /**
   * Chromium's error name for the last failed connection to `url`'s host and port (the browser
   * only reports ERR_SOCKS_CONNECTION_FAILED), or undefined.
   */
  connectionFailure(url: string): string | undefined {
    try {
      const parsed = new URL(url);
      const port = Number(
        parsed.port || (parsed.protocol === 'https:' || parsed.protocol === 'wss:' ? 443 : 80),
      );
      return this.failures.get(endpointKey(parsed.hostname, port));
    } catch {
      return undefined;
    }
  }

  /** Stops listening and cuts every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private own(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  private accept(client: Socket): void {
    this.own(client);
    client.setTimeout(HANDSHAKE_TIMEOUT_MS, () => client.destroy());
    let buffer = Buffer.alloc(0);
    let greeted = false;
    const onData = (chunk: Buffer): void => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!greeted) {
        if (buffer.length < 2) return;
        const methods = buffer[1]!;
        if (buffer.length < 2 + methods) return;
        if (buffer[0] !== 0x05 || !buffer.subarray(2, 2 + methods).includes(0x00)) {
          client.end(Buffer.from([0x05, 0xff])); // no acceptable method
          return;
        }
        greeted = true;
        buffer = buffer.subarray(2 + methods);
        client.write(Buffer.from([0x05, 0x00]));
      }
      const request = parseRequest(buffer);
      if (request === 'incomplete') return;
      client.off('data', onData);
      if (request === 'bad-address') {
        client.end(reply(ADDRESS_NOT_SUPPORTED));
        return;
      }
      if (request.command !== 0x01) {
        client.end(reply(COMMAND_NOT_SUPPORTED));
        return;
      }
      this.connectTo(client, request.host, request.port, buffer.subarray(request.length));
    };
    client.on('data', onData);
  }

  private connectTo(client: Socket, host: string, port: number, rest: Buffer): void {
    const verdict = this.options.judge(host, port);
    if (!verdict.allowed) {
      client.end(reply(NOT_ALLOWED));
      this.options.logger.debug({ port }, 'browser: the context proxy refused a connection');
      this.options.onBlocked?.(host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`, verdict.reason);
      return;
    }
    const upstream = connect({ host, port });
    this.own(upstream);
    let connected = false;
    const key = endpointKey(host, port);
    upstream.once('connect', () => {
      connected = true;
      this.failures.delete(key);
      client.setTimeout(0);
      client.write(reply(SUCCEEDED));
      if (rest.length > 0) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.once('error', (error: NodeJS.ErrnoException) => {
      if (connected || client.destroyed) return;
      this.failures.delete(key);
      this.failures.set(key, CHROME_ERRORS[error.code ?? ''] ?? 'ERR_CONNECTION_FAILED');
      if (this.failures.size > FAILURES_KEPT) this.failures.delete(this.failures.keys().next().value!);
      const code =
        error.code === 'ECONNREFUSED'
          ? CONNECTION_REFUSED
          : error.code === 'ENOTFOUND' || error.code === 'EHOSTUNREACH'
            ? HOST_UNREACHABLE
            : GENERAL_FAILURE;
      client.end(reply(code));
    });
    // Ends travel through the pipes; a failure on one side cuts the other.
    upstream.on('close', (hadError) => {
      if (hadError && connected) client.destroy();
    });
    client.on('close', (hadError) => {
      if (hadError || !connected) upstream.destroy();
    });
  }
}
