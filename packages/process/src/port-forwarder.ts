// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { endianness } from 'node:os';
import type { EventBus, Logger } from '@conch/core';
import { joinSockets } from './supervisor-bridge.js';

/**
 * Automatic port forwarding out of isolated sandboxes (like an editor's auto-forwarded ports).
 *
 * A sandbox has its own network namespace, so a server a command starts there (`npm run dev`,
 * `python3 -m http.server 8123`) listens on the sandbox's loopback, which the host — and a
 * browser the host runs — cannot reach. While a sandboxed supervisor has work, the host reads the
 * TCP sockets in LISTEN state of its namespace (`/proc/<supervisor pid>/net/tcp` and `tcp6`: two
 * small files, every `pollMs`) and, for each one on a loopback or wildcard address, listens on
 * the host's `127.0.0.1:<same port>` (and `[::1]:<port>` where the host has IPv6). Each
 * connection accepted there is piped to a socket the supervisor connects inside its namespace
 * and hands over its IPC channel (supervisor-ports.ts). When the port stops listening inside, or
 * the supervisor ends, the host listener closes. A host port that is already taken is left alone
 * (logged at debug): the forward is skipped until the port stops listening inside.
 *
 * Why this is safe — it opens the sandbox to the host, never the host to the sandbox:
 *
 * - Commands in the sandbox get nothing new: no socket, file, fd or address. The supervisor only
 *   connects when the host asks, only to `127.0.0.1` or `::1` of its own namespace (it checks),
 *   and hands the socket to the host; the sandbox's only way out stays the proxy bridge (whose
 *   port is never forwarded).
 * - The connection is made inside the namespace and passed as an fd, so no path the sandbox can
 *   write is ever connected to by the host (a unix socket in the sandbox's /tmp could be swapped
 *   for a symlink to a host socket, which the host would then follow).
 * - The host listeners are on loopback only (127.0.0.1, ::1): other machines cannot reach them.
 *   Local processes can, as they can reach any dev server on this machine.
 * - Only ports >= 1024 are forwarded and a port taken on the host is never taken over, so a
 *   sandbox cannot shadow a host service that is running. (It can take a free unprivileged
 *   loopback port while its server runs, as any program of the user can; `forwardPorts: false`
 *   turns forwarding off.)
 */

export type LoopbackHost = '127.0.0.1' | '::1';

/** What a forwarder needs of a supervisor (SupervisorClient). */
export interface ForwardSource {
  /** 'ready' when it can be asked for connections. */
  readonly status: string;
  /** A host pid in the sandbox's network namespace (the supervisor's), once ready. */
  readonly pid: number | undefined;
  /** A TCP connection to `host:port` inside the namespace. */
  connectPort(host: LoopbackHost, port: number): Promise<Socket>;
}

export interface ForwardedPort {
  port: number;
  /** The sandbox kind the server runs in. */
  sandbox: string;
  /** The address the server listens on inside (what the forward connects to). */
  target: LoopbackHost;
}

export interface PortForwarderOptions {
  logger?: Logger | undefined;
  events?: EventBus | undefined;
  /** How often busy sandboxes are scanned. Default 300 ms. */
  pollMs?: number;
}

/** Default PortForwarderOptions.pollMs. */
export const DEFAULT_FORWARD_POLL_MS = 300;

/** Ports below this are never forwarded (binding them on the host needs privileges anyway). */
const FIRST_FORWARDED_PORT = 1024;

/** A socket in LISTEN state from /proc/net/tcp or tcp6: its local address and port. */
export interface ListeningSocket {
  address: string;
  port: number;
}

function wordBytes(hex: string, littleEndian: boolean): number[] {
  const bytes: number[] = [];
  for (let i = 0; i < hex.length; i += 8) {
    const word = parseInt(hex.slice(i, i + 8), 16);
    const be = [word >>> 24, (word >>> 16) & 0xff, (word >>> 8) & 0xff, word & 0xff];
    bytes.push(...(littleEndian ? be.reverse() : be));
  }
  return bytes;
}

function formatAddress(bytes: number[]): string {
  if (bytes.length === 4) return bytes.join('.');
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return `::ffff:${bytes.slice(12).join('.')}`;
  }
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // The URL parser prints an IPv6 address in its canonical (compressed) form.
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/**
 * The sockets in LISTEN state (`st` 0A) of a /proc/<pid>/net/tcp or tcp6 table. The kernel prints
 * each address as 32-bit words in host byte order (`0100007F:1F90` is 127.0.0.1:8080 on a
 * little-endian machine).
 */
export function parseListening(text: string, littleEndian = endianness() === 'LE'): ListeningSocket[] {
  const found: ListeningSocket[] = [];
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 4 || fields[3] !== '0A') continue;
    const match = /^([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})$/.exec(fields[1]!);
    if (!match) continue;
    found.push({
      address: formatAddress(wordBytes(match[1]!, littleEndian)),
      port: parseInt(match[2]!, 16),
    });
  }
  return found;
}

/** Where a forward connects for a server listening on `address` inside, if it is forwarded at all. */
export function loopbackTarget(address: string): LoopbackHost | undefined {
  switch (address) {
    case '127.0.0.1':
    case '0.0.0.0':
    case '::ffff:127.0.0.1':
      return '127.0.0.1';
    case '::1':
    case '::':
      return '::1';
    default:
      return undefined;
  }
}

/**
 * The forwardable ports listening in the network namespace of `pid` (port -> where to connect;
 * IPv4 preferred when both listen), or undefined when its tables cannot be read (it is gone).
 */
export function listeningPorts(pid: number): Map<number, LoopbackHost> | undefined {
  const ports = new Map<number, LoopbackHost>();
  let read = false;
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
      read = true;
    } catch {
      continue; // no IPv6 in this kernel, or the process is gone
    }
    for (const { address, port } of parseListening(text)) {
      const target = loopbackTarget(address);
      if (target && ports.get(port) !== '127.0.0.1') ports.set(port, target);
    }
  }
  return read ? ports : undefined;
}

/**
 * The TCP sockets in use in the network namespace of `pid` ("TCP: inuse N" of /proc/<pid>/net/
 * sockstat, then "TCP6: inuse N" of sockstat6, as "N/N"), or undefined when they cannot be read.
 * A socket counts from its listen() or connect() to its close, so a server that starts or stops
 * changes it.
 *
 * Why not read the tables at every poll: the kernel prints a namespace's tcp and tcp6 tables by
 * walking every bucket of the host's whole established hash (262,144 buckets with 24 GiB), ~7 ms of
 * CPU for two files holding a few lines, every poll while a sandbox has work (2-3% of a core).
 * These two counters cost ~60 µs; the tables are read when they move.
 */
export function tcpSocketsInUse(pid: number): string | undefined {
  const counts: string[] = [];
  for (const [table, line] of [
    ['sockstat', /^TCP: inuse (\d+)/m],
    ['sockstat6', /^TCP6: inuse (\d+)/m],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      if (table === 'sockstat') return undefined; // gone
      continue; // no IPv6 in this kernel
    }
    const match = line.exec(text);
    if (!match) return undefined;
    counts.push(match[1]!);
  }
  return counts.join('/');
}

/**
 * How many polls in a row may skip the tables because the count of sockets did not move. A
 * server that starts as another socket closes leaves the count where it was: the tables are read
 * at least this often anyway (every 3 s at the default poll).
 */
const POLLS_PER_FULL_SCAN = 10;

interface Forward {
  port: number;
  target: LoopbackHost;
  state: 'binding' | 'open' | 'closed';
  servers: Server[];
  /** Accepted connections and their sockets inside. */
  sockets: Set<Socket>;
  /** Settles when the host listeners are bound (or the forward was skipped). */
  opening: Promise<void>;
}

interface Watched {
  source: ForwardSource;
  sandbox: string;
  excluded: ReadonlySet<number>;
  busy: boolean;
  forwards: Map<number, Forward>;
  /** Listening inside, but taken on the host: not retried until it stops listening inside. */
  skipped: Set<number>;
  /** tcpSocketsInUse as the last scan began, and the polls since that found it unchanged. */
  inUse: string | undefined;
  unchangedPolls: number;
}

type Bound = { server: Server } | { error: NodeJS.ErrnoException };

/** The host side of port forwarding for every isolated supervisor of one ProcessManager. */
export class PortForwarder {
  private readonly watched = new Map<ForwardSource, Watched>();
  private readonly logger: Logger | undefined;
  private readonly events: EventBus | undefined;
  private readonly pollMs: number;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: PortForwarderOptions = {}) {
    this.logger = options.logger;
    this.events = options.events;
    this.pollMs = options.pollMs ?? DEFAULT_FORWARD_POLL_MS;
  }

  /** Starts watching a supervisor's namespace (scanned while it is busy, and on refresh()). */
  add(source: ForwardSource, options: { sandbox: string; excluded?: readonly number[] }): void {
    if (this.closed || this.watched.has(source)) return;
    this.watched.set(source, {
      source,
      sandbox: options.sandbox,
      excluded: new Set(options.excluded ?? []),
      busy: false,
      forwards: new Map(),
      skipped: new Set(),
      inUse: undefined,
      unchangedPolls: 0,
    });
  }

  /**
   * A supervisor started or stopped having work: polling runs while any has some. When one goes
   * idle its namespace is scanned once more, so a server that ended with the work is unforwarded.
   */
  setBusy(source: ForwardSource, busy: boolean): void {
    const w = this.watched.get(source);
    if (!w || w.busy === busy) return;
    w.busy = busy;
    // (Only forwards can need it: file operations toggle this often, on sandboxes serving nothing.)
    if (!busy && w.forwards.size > 0) void this.scan(w);
    this.updateTimer();
  }

  /** A supervisor ended (closed, lost, replaced): its forwards close. */
  remove(source: ForwardSource): Promise<void> {
    const w = this.watched.get(source);
    if (!w) return Promise.resolve();
    this.watched.delete(source);
    this.updateTimer();
    return Promise.all([...w.forwards.values()].map((f) => this.closeForward(w, f))).then(() => {});
  }

  /**
   * Scans every watched namespace now (busy or not) and resolves once the host listeners of what
   * listens inside are bound. The scan and the bind calls happen synchronously in this call (the
   * sockets are listening a tick later), so a caller that connects after awaiting it never races
   * the poll.
   */
  refresh(): Promise<void> {
    return Promise.all([...this.watched.values()].map((w) => this.scan(w))).then(() => {});
  }

  /** The ports forwarded now. */
  forwarded(): ForwardedPort[] {
    const out: ForwardedPort[] = [];
    for (const w of this.watched.values()) {
      for (const f of w.forwards.values()) {
        if (f.state === 'open') out.push({ port: f.port, sandbox: w.sandbox, target: f.target });
      }
    }
    return out.sort((a, b) => a.port - b.port);
  }

  /** Stops polling and closes every host listener and forwarded connection. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.watched.keys()].map((source) => this.remove(source)));
  }

  private updateTimer(): void {
    const busy = !this.closed && [...this.watched.values()].some((w) => w.busy);
    if (busy && !this.timer) {
      this.timer = setInterval(() => {
        for (const w of this.watched.values()) if (w.busy) this.poll(w);
      }, this.pollMs);
      this.timer.unref();
    } else if (!busy && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** A busy namespace's poll: scanned when its count of sockets moved (see tcpSocketsInUse). */
  private poll(w: Watched): void {
    const pid = w.source.pid;
    if (this.closed || w.source.status !== 'ready' || pid === undefined) return;
    if (w.inUse !== undefined && w.unchangedPolls + 1 < POLLS_PER_FULL_SCAN) {
      const now = tcpSocketsInUse(pid);
      if (now === w.inUse) {
        w.unchangedPolls++;
        return;
      }
    }
    void this.scan(w);
  }

  /** Compares what listens inside with what is forwarded; opens and closes forwards to match. */
  private scan(w: Watched): Promise<void> {
    const pid = w.source.pid;
    if (this.closed || w.source.status !== 'ready' || pid === undefined) return Promise.resolve();
    // Counted before the tables are read: a socket that comes or goes after this moves the count
    // the next poll compares.
    w.inUse = tcpSocketsInUse(pid);
    w.unchangedPolls = 0;
    const listening = listeningPorts(pid);
    if (!listening) return Promise.resolve();
    const pending: Promise<void>[] = [];
    for (const forward of [...w.forwards.values()]) {
      const target = listening.get(forward.port);
      if (target === undefined) void this.closeForward(w, forward);
      else {
        forward.target = target; // a server that moved from ::1 to 127.0.0.1
        pending.push(forward.opening);
      }
    }
    for (const port of [...w.skipped]) if (!listening.has(port)) w.skipped.delete(port);
    for (const [port, target] of listening) {
      if (port < FIRST_FORWARDED_PORT || w.excluded.has(port) || w.forwards.has(port) || w.skipped.has(port))
        continue;
      pending.push(this.open(w, port, target));
    }
    return Promise.all(pending).then(() => {});
  }

  private open(w: Watched, port: number, target: LoopbackHost): Promise<void> {
    const forward: Forward = {
      port,
      target,
      state: 'binding',
      servers: [],
      sockets: new Set(),
      opening: Promise.resolve(),
    };
    w.forwards.set(port, forward);
    // Both listeners are asked for now (bound a tick later), in this call.
    const v4 = this.listen(w, forward, '127.0.0.1');
    const v6 = this.listen(w, forward, '::1');
    forward.opening = Promise.all([v4, v6]).then(([four, six]) => {
      const servers = [four, six].flatMap((b) => ('server' in b ? [b.server] : []));
      forward.servers.push(...servers);
      // Taken on the host (either loopback): the host's service keeps it, whole. No IPv6 on the
      // host (EADDRNOTAVAIL, EAFNOSUPPORT): IPv4 alone.
      const taken =
        'error' in four
          ? four.error
          : 'error' in six && six.error.code === 'EADDRINUSE'
            ? six.error
            : undefined;
      if (taken || forward.state === 'closed') {
        for (const server of servers) server.close();
        if (w.forwards.get(port) === forward) w.forwards.delete(port);
        if (taken && forward.state !== 'closed') {
          forward.state = 'closed';
          w.skipped.add(port);
          this.logger?.debug(
            { port, sandbox: w.sandbox, code: taken.code },
            'port forwarding: a server listens on this port in the sandbox, but the port is taken on the host; not forwarded',
          );
        }
        return;
      }
      forward.state = 'open';
      this.logger?.debug(
        { port, sandbox: w.sandbox, target: forward.target },
        'port forwarding: a server in the sandbox is reachable from the host at 127.0.0.1:port',
      );
      this.events?.emit('process.port.forwarded', { port, sandbox: w.sandbox });
    });
    return forward.opening;
  }

  private listen(w: Watched, forward: Forward, host: LoopbackHost): Promise<Bound> {
    const server = createServer({ allowHalfOpen: true }, (client) => this.accept(w, forward, client));
    return new Promise((resolve) => {
      server.once('error', (error: NodeJS.ErrnoException) => resolve({ error }));
      server.listen({ port: forward.port, host }, () => {
        server.removeAllListeners('error');
        server.on('error', (error) =>
          this.logger?.debug({ err: error, port: forward.port }, 'port forwarding: listener error'),
        );
        server.unref();
        resolve({ server });
      });
    });
  }

  /** Pipes a host connection to a socket the supervisor connects to the same port inside. */
  private accept(w: Watched, forward: Forward, client: Socket): void {
    if (!forward.sockets.has(client)) {
      client.unref();
      forward.sockets.add(client);
      client.on('close', () => forward.sockets.delete(client));
      client.on('error', () => client.destroy());
    }
    // Accepted on one listener while the other is still binding: wait for the forward to open.
    if (forward.state === 'binding') {
      void forward.opening.then(() => this.accept(w, forward, client));
      return;
    }
    if (forward.state !== 'open' || client.destroyed) {
      client.destroy();
      return;
    }
    w.source.connectPort(forward.target, forward.port).then(
      (upstream) => {
        if (client.destroyed || forward.state === 'closed') {
          upstream.destroy();
          return;
        }
        upstream.unref();
        forward.sockets.add(upstream);
        upstream.on('close', () => forward.sockets.delete(upstream));
        joinSockets(client, upstream);
      },
      (error: NodeJS.ErrnoException) => {
        this.logger?.debug(
          { port: forward.port, code: error.code, err: error },
          'port forwarding: could not connect inside the sandbox',
        );
        // As if nothing listened: a reset, not an empty answer.
        if (!client.destroyed) client.resetAndDestroy();
        // The server probably went away: do not wait for the next poll to close the port.
        void this.scan(w);
      },
    );
  }

  private closeForward(w: Watched, forward: Forward): Promise<void> {
    if (w.forwards.get(forward.port) === forward) w.forwards.delete(forward.port);
    if (forward.state === 'closed') return Promise.resolve();
    const wasOpen = forward.state === 'open';
    forward.state = 'closed';
    for (const socket of forward.sockets) socket.destroy();
    forward.sockets.clear();
    const closing = forward.servers.map(
      (server) => new Promise<void>((resolve) => server.close(() => resolve())),
    );
    forward.servers = [];
    if (wasOpen) {
      this.logger?.debug({ port: forward.port, sandbox: w.sandbox }, 'port forwarding: closed');
      this.events?.emit('process.port.closed', { port: forward.port, sandbox: w.sandbox });
    }
    // A forward still binding closes its listeners once they are bound (see open()).
    return Promise.all([...closing, forward.opening]).then(() => {});
  }
}
