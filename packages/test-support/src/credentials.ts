// Stand-ins for the credential tests (@conch/sandbox's injector, the process manager's wiring): an HTTPS server playing github.com and friends (its own test CA,
// one leaf per SNI name, a git smart-HTTP endpoint through `git http-backend`), and a CONNECT proxy
// that does what network-proxy.ts's tunnel does, calling the injector's hook first.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { SecureContext, TLSSocket } from 'node:tls';
import { CHECKOUT } from './index.js';

/** The certificate authority the stand-in serves from (@conch/sandbox's SessionCa fits). */
export interface StandInCa {
  issue(host: string): { cert: string; key: string };
  secureContext(host: string): SecureContext;
}

/** The credential injector's hook, as the proxy calls it (@conch/sandbox's CredentialInjector fits). */
export interface InterceptingInjector {
  interceptFor(destination: {
    host: string;
    port: number;
  }): ((client: Socket, upstream: { address: string; port?: number; head?: Buffer }) => void) | undefined;
}

/** A host as a CONNECT or an SNI names it: brackets off, lowercase, no trailing dot. */
function normalizeHost(name: string): string | undefined {
  const host = name
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
  return host === '' || /[\s/@\\?#%]/.test(host) ? undefined : host;
}

/** What the stand-in saw of one request. */
export interface SeenRequest {
  /** The SNI name the client's TLS asked for. */
  sni: string | undefined;
  method: string;
  url: string;
  host: string | undefined;
  /** Every Authorization header value, as received. */
  authorization: string[];
  /** Every header, as received (name casing kept). */
  rawHeaders: string[];
  bodyBytes: number;
  bodySha256: string;
  /** Which TLS connection it came on (1, 2, …). */
  connection: number;
}

export interface StandIn {
  port: number;
  seen: SeenRequest[];
  close(): Promise<void>;
}

/** The password or token an Authorization header carries (Basic decoded), or undefined. */
export function presented(authorization: string): string[] {
  const m = /^(\S+)\s+(.*)$/.exec(authorization);
  if (!m) return [authorization];
  if (m[1]!.toLowerCase() === 'basic') return Buffer.from(m[2]!, 'base64').toString('latin1').split(':');
  return [m[2]!];
}

/**
 * The HTTPS stand-in. `/echo-header`: answers with the request's Authorization in `X-Echo` (a
 * server that reflects headers); `/<name>.git/…`: git smart HTTP for the bare repositories under
 * `gitRoot`, behind Basic/token/Bearer auth accepting `secret`; anything else: `ok <bytes>`. It
 * never puts a received credential in a body.
 */
export async function startStandIn(options: {
  ca: StandInCa;
  secret: string;
  gitRoot?: string;
}): Promise<StandIn> {
  const seen: SeenRequest[] = [];
  let connections = 0;
  const ids = new WeakMap<object, number>();
  const server: HttpsServer = createHttpsServer(
    {
      SNICallback: (name, done) => {
        try {
          done(null, options.ca.secureContext(normalizeHost(name) ?? name));
        } catch (error) {
          done(error as Error);
        }
      },
      ...options.ca.issue('127.0.0.1'),
    },
    (req, res) => {
      const hash = createHash('sha256');
      let bytes = 0;
      const socket = req.socket as TLSSocket;
      if (!ids.has(socket)) ids.set(socket, ++connections);
      const authorization: string[] = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        if (req.rawHeaders[i]!.toLowerCase() === 'authorization') authorization.push(req.rawHeaders[i + 1]!);
      const record: SeenRequest = {
        sni: (socket as TLSSocket & { servername?: string | false }).servername || undefined,
        method: req.method ?? '',
        url: req.url ?? '',
        host: req.headers.host,
        authorization,
        rawHeaders: req.rawHeaders,
        bodyBytes: 0,
        bodySha256: '',
        connection: ids.get(socket)!,
      };
      seen.push(record);
      const authorized = authorization.some((value) => presented(value).includes(options.secret));
      const path = (req.url ?? '/').split('?')[0]!;
      if (options.gitRoot && /\.git(\/|$)/.test(path)) {
        if (!authorized) {
          req.resume();
          res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="stand-in"', 'Content-Length': '0' }).end();
          return;
        }
        gitBackend(req, res, options.gitRoot, record);
        return;
      }
      req.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        hash.update(chunk);
      });
      req.on('end', () => {
        record.bodyBytes = bytes;
        record.bodySha256 = hash.digest('hex');
        const headers: Record<string, string> = { 'Content-Type': 'text/plain' };
        if (path === '/echo-header') headers['X-Echo'] = authorization.join(', ');
        res.writeHead(authorized ? 200 : 401, headers).end(`ok ${bytes}\n`);
      });
    },
  );
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    const authorization = String(req.headers.authorization ?? '');
    seen.push({
      sni: undefined,
      method: req.method ?? '',
      url: req.url ?? '',
      host: req.headers.host,
      authorization: [authorization],
      rawHeaders: req.rawHeaders,
      bodyBytes: 0,
      bodySha256: '',
      connection: 0,
    });
    if (!presented(authorization).includes(options.secret)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `git http-backend` as a CGI program behind the stand-in (receive-pack on: REMOTE_USER is set). */
function gitBackend(req: IncomingMessage, res: ServerResponse, root: string, record: SeenRequest): void {
  const [pathInfo, query = ''] = (req.url ?? '/').split('?') as [string, string?];
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: decodeURIComponent(pathInfo),
    QUERY_STRING: query,
    REQUEST_METHOD: req.method ?? 'GET',
    REMOTE_USER: 'stand-in',
    REMOTE_ADDR: '127.0.0.1',
    GIT_CONFIG_NOSYSTEM: '1',
    HOME: root,
  };
  if (req.headers['content-type']) env.CONTENT_TYPE = req.headers['content-type'];
  if (req.headers['content-length']) env.CONTENT_LENGTH = req.headers['content-length'];
  for (const [name, value] of Object.entries(req.headers))
    if (typeof value === 'string') env[`HTTP_${name.toUpperCase().replace(/-/g, '_')}`] = value;
  const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const hash = createHash('sha256');
  req.on('data', (chunk: Buffer) => {
    record.bodyBytes += chunk.length;
    hash.update(chunk);
  });
  req.on('end', () => (record.bodySha256 = hash.digest('hex')));
  req.pipe(cgi.stdin);
  cgi.stdin.on('error', () => {});
  let head = Buffer.alloc(0);
  let started = false;
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (started) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const at = head.indexOf('\r\n\r\n') >= 0 ? head.indexOf('\r\n\r\n') : head.indexOf('\n\n');
    if (at < 0) return;
    const gap = head[at] === 13 ? 4 : 2;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, at).toString('latin1').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = parseInt(value, 10);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    started = true;
    res.write(head.subarray(at + gap));
  });
  cgi.on('close', () => res.end());
}

/** What the test proxy saw: each CONNECT and whether the injector took it. */
export interface SeenConnect {
  host: string;
  port: number;
  intercepted: boolean;
}

export interface TestProxy {
  /** A TCP port (listen: 0), or undefined when it listens on a unix socket. */
  port: number | undefined;
  connects: SeenConnect[];
  close(): Promise<void>;
}

/**
 * A CONNECT proxy doing what NetworkProxy.tunnel does once a destination is allowed — with the
 * injector's hook where the wiring puts it: `interceptFor(destination)` before connecting; a tunnel
 * returned gets the client socket after `200`, with the decided address; otherwise a plain pipe.
 * Every destination is routed to the stand-in (`127.0.0.1:<standInPort>`): the names are never
 * looked up.
 */
export async function startTestProxy(options: {
  injector: InterceptingInjector;
  standInPort: number;
  /** A unix socket path (the sandbox's bridge connects there); default: TCP on 127.0.0.1. */
  socketPath?: string;
}): Promise<TestProxy> {
  const connects: SeenConnect[] = [];
  const sockets = new Set<Socket>();
  const server: HttpServer = createHttpServer((_req, res) => res.writeHead(405).end());
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    client.on('error', () => client.destroy());
    const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(req.url ?? '');
    const host = m ? normalizeHost(m[1]!) : undefined;
    if (!m || !host) {
      client.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const port = Number(m[2]);
    const tunnel = options.injector.interceptFor({ host, port });
    connects.push({ host, port, intercepted: tunnel !== undefined });
    if (tunnel) {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      tunnel(client, { address: '127.0.0.1', port: options.standInPort, head });
      return;
    }
    const upstream = connect(options.standInPort, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.once('connect', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) =>
    options.socketPath ? server.listen(options.socketPath, resolve) : server.listen(0, '127.0.0.1', resolve),
  );
  return {
    port: options.socketPath ? undefined : (server.address() as AddressInfo).port,
    connects,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * A shell pipeline's first half: the regular files a sandboxed shell can read under `dirs` (a
 * shell word list), NUL-separated for `xargs -0`, leaving out conch's own checkout. The sandbox
 * shows that checkout read-only (it runs conch's code from it); under /tmp when the repository was
 * cloned there, where its test sources hold these tests' secrets and node_modules its keys' test
 * fixtures: what a scan for secrets written *for the sandbox* must not count. `options`: find's
 * options after the paths (`-xdev`).
 */
export function readableFiles(dirs: string, options = ''): string {
  return `find ${dirs} ${options} -path '${CHECKOUT}' -prune -o -type f -readable -print0 2>/dev/null`;
}
