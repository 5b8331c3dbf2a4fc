import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { checkServerIdentity, TLSSocket, type PeerCertificate } from 'node:tls';
import type { Logger } from '@conch/core';
import { normalizeHost } from '../network-proxy.js';
import { scrubHeaderValue, substituteHeaderValue, type Substitution } from './header-rewrite.js';
import type { SessionCa } from './session-ca.js';

/** One intercepted CONNECT: where it was going, where to connect, and what to put on the wire there. */
export interface InterceptedTarget {
  /** The CONNECT's host, normalised: the name the leaf is made for and the upstream is verified as. */
  host: string;
  /** The CONNECT's port: what a request's Host must name (443 may be left out). */
  port: number;
  /** The address the proxy decided on (no second lookup). */
  address: string;
  /** The port to connect to (the CONNECT's, but for a test's stand-in). */
  upstreamPort: number;
  /** Lowercase header name → the substitutions configured for it on this destination. */
  substitutions: ReadonlyMap<string, readonly Substitution[]>;
  /** Every substitution of this destination (secrets scrubbed from response headers). */
  all: readonly Substitution[];
}

export interface TlsForwarderOptions {
  ca: SessionCa;
  /** CA certificates (PEM) upstream servers are verified against instead of Node's defaults. */
  upstreamCa?: readonly string[] | undefined;
  logger?: Logger | undefined;
  /** How long a client may take to finish the TLS handshake (default 30 s). */
  handshakeTimeoutMs?: number;
}

/** Headers of one connection, not of the request (RFC 9110 §7.6.1), and the proxy's own. */
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
  // node's server already answered `100 Continue` to the client; the body follows as it comes.
  'expect',
]);

/** Methods with no body unless they say so: the rest get `Content-Length: 0` when they give no length. */
const BODILESS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE']);

function connectionTokens(value: string | string[] | undefined): Set<string> {
  const text = Array.isArray(value) ? value.join(',') : (value ?? '');
  return new Set(
    text
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

/** Whether `authority` (`host`, `host:port`, `[v6]:port`) names exactly the target. */
function namesTarget(authority: string, target: InterceptedTarget): boolean {
  const m = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(authority.trim());
  if (!m) return false;
  const port = m[2] === undefined ? 443 : Number(m[2]);
  return normalizeHost(m[1]!) === target.host && port === target.port;
}

/**
 * Where a request goes upstream and whether it is for the target at all. The placeholders are
 * replaced only when it is: one Host header naming the CONNECT's host and port, and an absolute-form
 * target (if any) naming the same — otherwise a client could send `Host: other.site` down a tunnel
 * to a shared front end (a CDN) and have the secret routed to another site. Such a request is still
 * forwarded, untouched: what a plain tunnel would have carried.
 */
function route(req: IncomingMessage, target: InterceptedTarget): { path: string; forTarget: boolean } {
  let path = req.url ?? '/';
  let forTarget = true;
  if (!path.startsWith('/') && path !== '*') {
    try {
      const url = new URL(path);
      forTarget =
        url.protocol === 'https:' && !url.username && !url.password && namesTarget(url.host, target);
      path = `${url.pathname}${url.search}`;
    } catch {
      forTarget = false;
    }
  }
  const hosts: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.toLowerCase() === 'host') hosts.push(req.rawHeaders[i + 1]!);
  forTarget &&= hosts.length === 1 && namesTarget(hosts[0]!, target);
  return { path, forTarget };
}

/**
 * The HTTP/1.1 engine behind a credential tunnel: TLS from the sandbox's client terminated with a
 * leaf of the session CA (ALPN offers http/1.1 only), requests parsed by node's HTTP server (one
 * server for every tunnel, fed each decrypted socket: keep-alive, chunked and streamed bodies,
 * `100-continue`, request smuggling checks — llhttp's, not a parser written here), the configured
 * headers rewritten, and each request sent on over TLS to the real destination, its certificate
 * verified as usual, the answer streamed back. Upgrades (WebSocket) are forwarded the same way and
 * then piped.
 */
export class TlsForwarder {
  private readonly options: TlsForwarderOptions;
  private readonly server: Server;
  private readonly agent: Agent;
  private readonly targets = new WeakMap<object, InterceptedTarget>();
  private readonly sockets = new Set<Duplex>();
  private readonly warned = new Set<string>();
  private closed = false;

  constructor(options: TlsForwarderOptions) {
    this.options = options;
    // Upstream connections are reused across requests and tunnels (keyed by address, port and name).
    this.agent = new Agent({
      keepAlive: true,
      maxSockets: 64,
      ...(options.upstreamCa ? { ca: [...options.upstreamCa] } : {}),
    });
    this.server = createServer((req, res) => this.forward(req, res));
    // A git push of a large repository may stream for a long time; the proxy caps connections.
    this.server.requestTimeout = 0;
    this.server.headersTimeout = 60_000;
    this.server.keepAliveTimeout = 30_000;
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.upgrade(req, socket, head),
    );
    this.server.on('connect', (_req: IncomingMessage, socket: Duplex) =>
      socket.end('HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'),
    );
    this.server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
      if (socket.writable && error.code !== 'ECONNRESET')
        socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      else socket.destroy();
    });
  }

  /**
   * Takes over a client socket the proxy has answered `200` to: TLS with `target.host`'s leaf,
   * then HTTP. `head`: bytes the proxy read past the CONNECT request (put back first).
   */
  accept(client: Duplex, target: InterceptedTarget, head?: Buffer): void {
    if (this.closed) {
      client.destroy();
      return;
    }
    if (head?.length) client.unshift(head);
    let tls: TLSSocket;
    try {
      tls = new TLSSocket(client as Socket, {
        isServer: true,
        secureContext: this.options.ca.secureContext(target.host),
        ALPNProtocols: ['http/1.1'],
      });
    } catch (error) {
      this.options.logger?.warn({ err: error, host: target.host }, 'credential proxy: no TLS for a tunnel');
      client.destroy();
      return;
    }
    this.track(client);
    this.track(tls);
    this.targets.set(tls, target);
    const timer = setTimeout(() => tls.destroy(), this.options.handshakeTimeoutMs ?? 30_000);
    timer.unref();
    let secure = false;
    tls.once('secure', () => {
      secure = true;
      clearTimeout(timer);
      this.server.emit('connection', tls);
    });
    tls.on('error', (error: Error) => {
      clearTimeout(timer);
      // A client that refuses the session CA (it pins its certificates, or was not given the CA
      // bundle) ends the handshake with an alert: said once per host, since it explains a failure.
      if (!secure && /alert/i.test(error.message) && !this.warned.has(target.host)) {
        this.warned.add(target.host);
        this.options.logger?.warn(
          { host: target.host, port: target.port, reason: error.message },
          'credential proxy: a client refused the session CA (it pins certificates, or was not given the CA bundle)',
        );
      }
      tls.destroy();
    });
    tls.on('close', () => client.destroy());
  }

  /** Ends every tunnel and upstream connection. */
  close(): void {
    this.closed = true;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    this.agent.destroy();
    this.server.closeAllConnections();
    this.server.close(() => {});
  }

  private track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private upstreamOptions(target: InterceptedTarget): RequestOptions {
    return {
      host: target.address,
      port: target.upstreamPort,
      // SNI names the host; an IP literal is sent none (SNI carries names only).
      ...(isIP(target.host) ? {} : { servername: target.host }),
      // Verified as the host the client asked for, not the address connected to.
      checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(target.host, cert),
      // On the request as well as the agent: an upgrade goes without the agent.
      ...(this.options.upstreamCa ? { ca: [...this.options.upstreamCa] } : {}),
      agent: this.agent,
    };
  }

  /** The request's headers to send on: hop-by-hop ones dropped, placeholders replaced when it is for the target. */
  private requestHeaders(
    req: IncomingMessage,
    forTarget: boolean,
    target: InterceptedTarget,
    upgrade: boolean,
  ) {
    const dropped = connectionTokens(req.headers.connection);
    const out: string[] = [];
    let replaced = 0;
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      let value = req.rawHeaders[i + 1]!;
      const lower = name.toLowerCase();
      const kept = upgrade && (lower === 'connection' || lower === 'upgrade');
      if (!kept && (HOP_BY_HOP.has(lower) || dropped.has(lower))) continue;
      const subs = forTarget ? target.substitutions.get(lower) : undefined;
      if (subs) {
        const next = substituteHeaderValue(value, subs);
        if (next !== value) replaced++;
        value = next;
      }
      out.push(name, value);
    }
    if (!upgrade) {
      // The body's framing is node's to write again: chunked stays chunked, a length stays.
      if (req.headers['transfer-encoding'] !== undefined) out.push('Transfer-Encoding', 'chunked');
      else if (req.headers['content-length'] === undefined && !BODILESS.has(req.method ?? 'GET'))
        out.push('Content-Length', '0');
    }
    return { headers: out, replaced };
  }

  private responseHeaders(raw: readonly string[], target: InterceptedTarget, upgrade: boolean): string[] {
    const lowerPairs: string[] = [];
    for (let i = 0; i < raw.length; i += 2)
      if (raw[i]!.toLowerCase() === 'connection') lowerPairs.push(raw[i + 1]!);
    const dropped = connectionTokens(lowerPairs);
    const out: string[] = [];
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      const lower = name.toLowerCase();
      const kept = upgrade && (lower === 'connection' || lower === 'upgrade');
      if (!kept && (HOP_BY_HOP.has(lower) || dropped.has(lower))) continue;
      out.push(name, scrubHeaderValue(raw[i + 1]!, target.all));
    }
    return out;
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const target = this.targets.get(req.socket);
    if (!target) {
      res.writeHead(500, { 'Content-Type': 'text/plain' }).end('conch credential proxy: unknown tunnel\n');
      return;
    }
    const { path, forTarget } = route(req, target);
    const { headers, replaced } = this.requestHeaders(req, forTarget, target, false);
    if (!forTarget)
      this.options.logger?.debug(
        { host: target.host, port: target.port },
        'credential proxy: a request naming another host went on without the credential',
      );
    const upstream = httpsRequest({
      ...this.upstreamOptions(target),
      method: req.method,
      path,
      headers: headers as unknown as RequestOptions['headers'],
    });
    res.sendDate = false;
    upstream.on('response', (answer) => {
      res.writeHead(
        answer.statusCode ?? 502,
        answer.statusMessage,
        this.responseHeaders(answer.rawHeaders, target, false),
      );
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', (error) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      // The reason (an unverifiable certificate, a refused connection) is the tool's only clue.
      res
        .writeHead(502, { 'Content-Type': 'text/plain', Connection: 'close' })
        .end(`conch credential proxy: ${target.host}:${target.port}: ${error.message}\n`);
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.on('error', () => upstream.destroy());
    req.pipe(upstream);
    this.options.logger?.debug(
      { host: target.host, port: target.port, method: req.method, replaced },
      'credential proxy: request forwarded',
    );
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const target = this.targets.get(socket);
    if (!target) {
      socket.destroy();
      return;
    }
    this.track(socket);
    const { path, forTarget } = route(req, target);
    const { headers } = this.requestHeaders(req, forTarget, target, true);
    const upstream = httpsRequest({
      ...this.upstreamOptions(target),
      method: req.method,
      path,
      headers: headers as unknown as RequestOptions['headers'],
      agent: false,
    });
    const statusLine = (
      code: number | undefined,
      message: string | undefined,
      raw: readonly string[],
      upgraded: boolean,
    ) => {
      const pairs = this.responseHeaders(raw, target, upgraded);
      let text = `HTTP/1.1 ${code ?? 502} ${message ?? ''}\r\n`;
      for (let i = 0; i < pairs.length; i += 2) text += `${pairs[i]}: ${pairs[i + 1]}\r\n`;
      return `${text}${upgraded ? '' : 'Connection: close\r\n'}\r\n`;
    };
    upstream.on('upgrade', (answer, upSocket: Socket, upHead: Buffer) => {
      this.track(upSocket);
      socket.write(statusLine(answer.statusCode, answer.statusMessage, answer.rawHeaders, true));
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      upSocket.pipe(socket);
      socket.pipe(upSocket);
      const cut = () => {
        upSocket.destroy();
        socket.destroy();
      };
      upSocket.on('error', cut);
      socket.on('error', cut);
      upSocket.on('close', cut);
      socket.on('close', cut);
    });
    upstream.on('response', (answer) => {
      // Not upgraded: the answer as it is, then the connection ends (its length is the close).
      socket.write(statusLine(answer.statusCode, answer.statusMessage, answer.rawHeaders, false));
      answer.pipe(socket);
    });
    upstream.on('error', (error) => {
      socket.end(
        `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nconch credential proxy: ${error.message}\n`,
      );
    });
    socket.on('error', () => upstream.destroy());
    upstream.end();
  }
}
