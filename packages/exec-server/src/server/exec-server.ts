import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, type Server, type Socket } from 'node:net';
import { homedir, hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { makeTempDir, type Logger, removeSync, clearStaleStat, safeStatSync } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { resolveTargetPath } from '@conch/files';
import { RpcPeer } from '../json-rpc.js';
import {
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  type AttachParams,
  type AttachResult,
  type ClientRequests,
  type InitializeParams,
  type InitializeResult,
  type ServerHello,
  type SessionInfo,
} from '../protocol.js';
import { FileService } from './file-service.js';
import { VERSION } from '../version.js';
import { ProcessService } from './process-service.js';
import { ServerError } from './server-error.js';
import { TerminalHost } from './terminal-host.js';

export interface ExecServerOptions {
  input: Readable;
  output: Writable;
  logger: Logger;
  /** The content hash of the deployed bundle this server runs from, if any. */
  bundle?: string | null;
  /** Called once the server has shut down (everything it started is dead). */
  onShutdown?: (reason: string) => void;
  /**
   * The node-pty entry terminal sessions load (default: the `@lydell/node-pty` beside this code).
   * One that does not load makes the terminal unavailable, as in a target without node-pty.
   */
  ptyModule?: string;
}

type Req<M extends keyof ClientRequests> = ClientRequests[M][0];

/** How long the shutdown waits for the process layer to kill everything before giving up on it. */
const SHUTDOWN_BOUND_MS = 15_000;
/** A connection to the attach socket must prove the key within this long, or it is dropped. */
const ATTACH_HANDSHAKE_MS = 20_000;
/** Unix socket paths longer than this do not fit sockaddr_un on every platform (104 on macOS). */
const MAX_SOCKET_PATH = 100;

/**
 * Where the services send notifications: the attached stream, or nowhere while the server is
 * detached (what happens meanwhile is kept in the target and re-sent when a client re-attaches).
 */
export interface ClientLink {
  readonly attached: boolean;
  notify(method: string, params: unknown): void;
}

/** One stream the server speaks on: its stdio, or a connection to its attach socket. */
interface Stream {
  peer: RpcPeer;
  input: Readable;
  output: Writable;
}

function sameKey(given: string, expected: string): boolean {
  // Equal-length digests, compared in constant time: nothing about the key leaks through timing.
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

function username(): string {
  try {
    return userInfo().username;
  } catch {
    return String(process.getuid?.() ?? 'unknown');
  }
}

/** Whether a PTY module loads here, and why not. */
export interface PtyProbe {
  available: boolean;
  reason?: string;
}

/**
 * Whether node-pty loads here (terminal sessions need it), and why not. Imported, never
 * `require`d: on node 20 a CommonJS module whose first `require` threw, imported later as ESM
 * (by @conch/terminal), rejects that import *and* raises the same error again as an uncaught
 * exception — which ended the server, and every background task it ran, after the terminal call
 * had already answered TERMINAL_UNAVAILABLE. The answer is kept: when node-pty does not load, the
 * terminal is refused without loading it again.
 */
async function probePty(module: string | undefined): Promise<PtyProbe> {
  try {
    const path = module ?? createRequire(import.meta.url).resolve('@lydell/node-pty');
    clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
    const mod = (await import(pathToFileURL(path).href)) as {
      spawn?: unknown;
      default?: { spawn?: unknown };
    };
    if (typeof (mod.spawn ?? mod.default?.spawn) !== 'function')
      return { available: false, reason: `${path} exports no spawn(): it is not node-pty` };
    return { available: true };
  } catch (error) {
    return { available: false, reason: (error as Error).message.split('\n')[0] ?? String(error) };
  }
}

/**
 * conch-exec-server: one process layer, served first on its stdin/stdout. Speaks first (hello),
 * then serves `initialize`, `proc.*`, `leftovers.*`, `fs.*` and `terminal.*`.
 *
 * Without a session (`detachGraceMs` 0) it ends when the stream closes, the client says
 * `server.shutdown`, nothing is heard for the idle timeout, or a signal arrives — killing
 * everything it started (process groups, cookie sweep, PTY trees), removing its temp dir.
 *
 * With a session, the work belongs to the target, not the connection: a stream that closes or goes
 * silent *detaches* the server, which keeps running what it started for the grace period and
 * listens on a unix socket in its 0700 temp dir. A client that reaches that socket (through the
 * attach relay, `--attach`), hears the hello and proves the session's key with `session.attach`
 * becomes the server's stream; the newest proof wins, so a half-open stream the server has not
 * yet noticed is replaced. A wrong key is refused and dropped. When the grace period ends with no
 * client, it shuts down as above and removes the socket.
 *
 * It is itself a process layer: a supervisor started by its ProcessManager also kills everything
 * if this process is SIGKILLed.
 */
export class ExecServer implements ClientLink {
  private readonly options: ExecServerOptions;
  private stream: Stream | undefined;
  private readonly logger: Logger;
  private manager: ProcessManager | undefined;
  private processes: ProcessService | undefined;
  private files: FileService | undefined;
  private terminal: TerminalHost | undefined;
  private tempDir: string | undefined;
  private keepTempFiles = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private lastHeard = performance.now();
  private shuttingDown: Promise<void> | undefined;
  private initResult: InitializeResult | undefined;
  private session: SessionInfo | undefined;
  private attachServer: Server | undefined;
  private readonly candidates = new Set<Socket>();
  private detached: { at: number; reason: string; timer: NodeJS.Timeout } | undefined;

  constructor(options: ExecServerOptions) {
    this.options = options;
    this.logger = options.logger;
    this.stream = this.openStream(options.input, options.output, true);
  }

  /** Whether a client's stream is attached (notifications reach it). */
  get attached(): boolean {
    return this.stream !== undefined;
  }

  /** The session (when detachable) and whether the server is detached now, for diagnostics. */
  get sessionState(): { id: string; graceMs: number; detachedMs: number | undefined } | undefined {
    if (!this.session) return undefined;
    return {
      id: this.session.id,
      graceMs: this.session.graceMs,
      detachedMs: this.detached ? Math.round(performance.now() - this.detached.at) : undefined,
    };
  }

  notify(method: string, params: unknown): void {
    this.stream?.peer.notify(method, params);
  }

  /** Says hello (the client checks the protocol version before anything else). */
  start(): void {
    this.stream?.peer.notify('server.hello', this.hello());
  }

  /**
   * The stream this process was started with (stdin/stdout) hung up (SIGHUP): detach (or end,
   * without a session) — unless a re-attached client speaks on another stream by now.
   */
  stdioHangup(reason: string): void {
    if (this.stream && this.stream.input === this.options.input) this.streamLost(this.stream.peer, reason);
    else if (!this.session) void this.shutdown(reason);
  }

  private hello(): ServerHello {
    return {
      protocol: PROTOCOL_NAME,
      version: PROTOCOL_VERSION,
      serverVersion: VERSION,
      bundle: this.options.bundle ?? null,
      node: process.version,
      platform: process.platform,
      arch: process.arch,
      pid: process.pid,
      cwd: process.cwd(),
      home: homedir(),
      user: username(),
      hostname: hostname(),
      tmpdir: tmpdir(),
    };
  }

  /** Speaks JSON-RPC on a stream; `full`: every method (the stdio stream, an attached socket). */
  private openStream(input: Readable, output: Writable, full: boolean): Stream {
    const holder: { stream?: Stream } = {};
    const peer = new RpcPeer({
      input,
      output,
      onNoise: (line) =>
        this.logger.warn({ line: line.slice(0, 200) }, 'exec server: ignored a line that is not JSON-RPC'),
      onClose: (error) => {
        if (holder.stream) this.streamLost(holder.stream.peer, error.message);
      },
    });
    const stream: Stream = { peer, input, output };
    holder.stream = stream;
    input.on('data', () => {
      if (this.stream === stream) this.lastHeard = performance.now();
    });
    if (full) this.register(peer);
    return stream;
  }

  /**
   * A stream closed, failed or went silent. Only the attached one matters (a replaced stream or a
   * refused attach closing is expected): with a session the server detaches, else it ends.
   */
  private streamLost(peer: RpcPeer, reason: string): void {
    if (this.stream?.peer !== peer || this.shuttingDown) return;
    if (!this.session || !this.manager) {
      void this.shutdown(reason);
      return;
    }
    this.detach(reason);
  }

  /** Keeps the work, drops the stream, and waits the grace period for a client to re-attach. */
  private detach(reason: string): void {
    const session = this.session!;
    const stream = this.stream;
    this.stream = undefined;
    if (stream) this.release(stream, `detached: ${reason}`);
    const timer = setTimeout(() => {
      void this.shutdown(
        `no client re-attached within the grace period of ${session.graceMs} ms (detached: ${reason})`,
      );
    }, session.graceMs);
    this.detached = { at: performance.now(), reason, timer };
    this.logger.info({ reason, graceMs: session.graceMs }, 'exec server detached; its work keeps running');
  }

  /** Closes a stream the server no longer speaks on (its transport sees it closed). */
  private release(stream: Stream, reason: string): void {
    stream.peer.close(reason);
    // Stop reading too: the transport (sshd, the exec) sees both pipes closed and can end.
    try {
      stream.input.destroy();
    } catch {
      // already gone
    }
  }

  /** The unix socket a re-attaching client reaches the server on (a 0700 dir: only this user). */
  private async listen(tempDir: string, graceMs: number): Promise<SessionInfo | undefined> {
    const socket = join(tempDir, 'attach.sock');
    if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
      this.logger.warn(
        { socket },
        'exec server: the attach socket path is too long for a unix socket; this server cannot detach (set a shorter TMPDIR in the target)',
      );
      return undefined;
    }
    const server = createServer((sock) => this.candidate(sock));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(socket, () => {
          server.off('error', reject);
          resolve();
        });
      });
      chmodSync(socket, 0o600);
    } catch (error) {
      server.close();
      this.logger.warn(
        { err: error, socket },
        'exec server: cannot listen for re-attaching clients; it cannot detach',
      );
      return undefined;
    }
    server.on('error', (error) => this.logger.warn({ err: error }, 'exec server: attach socket error'));
    this.attachServer = server;
    return {
      id: randomBytes(8).toString('hex'),
      key: randomBytes(32).toString('hex'),
      socket,
      graceMs,
    };
  }

  /** A connection to the attach socket: hello, then nothing but a `session.attach` with the key. */
  private candidate(sock: Socket): void {
    sock.on('error', () => {});
    if (this.shuttingDown || !this.session) {
      sock.destroy();
      return;
    }
    this.candidates.add(sock);
    const stream = this.openStream(sock, sock, false);
    const timer = setTimeout(() => {
      if (this.stream !== stream) stream.peer.close('no session.attach in time');
    }, ATTACH_HANDSHAKE_MS);
    sock.once('close', () => {
      clearTimeout(timer);
      this.candidates.delete(sock);
    });
    stream.peer.handle('session.attach', (p: AttachParams) => this.attach(stream, p, timer));
    stream.peer.notify('server.hello', { ...this.hello(), session: this.session.id });
  }

  private attach(stream: Stream, params: AttachParams, timer: NodeJS.Timeout): AttachResult {
    const session = this.session;
    if (params?.version !== PROTOCOL_VERSION) {
      setImmediate(() => stream.peer.close('attach refused'));
      throw new ServerError(
        'PROTOCOL_MISMATCH',
        `conch exec protocol: this server speaks version ${PROTOCOL_VERSION}; the client speaks version ${String(params?.version)}`,
      );
    }
    if (
      !session ||
      params.session !== session.id ||
      typeof params.key !== 'string' ||
      !sameKey(params.key, session.key)
    ) {
      this.logger.warn(
        { session: params?.session },
        'exec server: refused an attach with a wrong session or key',
      );
      // Answered, then dropped: a wrong key gets one answer per connection.
      setImmediate(() => stream.peer.close('attach refused'));
      throw new ServerError(
        'ATTACH_REFUSED',
        `session.attach: expected the key of session ${session?.id ?? '(none)'}; the session or key given does not match`,
      );
    }
    if (this.shuttingDown) throw new ServerError('SHUTTING_DOWN', 'the exec server is shutting down');
    const processes = this.ready().processes;
    clearTimeout(timer);
    const detachedMs = this.detached ? Math.round(performance.now() - this.detached.at) : 0;
    if (this.detached) clearTimeout(this.detached.timer);
    this.detached = undefined;
    // The newest client wins: a stream the server has not seen drop (half-open) is replaced.
    const old = this.stream;
    this.stream = stream;
    this.lastHeard = performance.now();
    if (old && old !== stream) this.release(old, 'replaced by a re-attached client');
    this.register(stream.peer);
    processes.reattached(params.streamed && typeof params.streamed === 'object' ? params.streamed : {});
    // Sent before the answer: when the client has it, its processes are up to date.
    const unknown = processes.resend(Array.isArray(params.processes) ? params.processes : []);
    this.logger.info({ detachedMs }, 'exec server: a client re-attached');
    return { init: this.initResult!, unknown, detachedMs };
  }

  /** Kills everything this server started and closes the connection. Idempotent. */
  shutdown(reason: string): Promise<void> {
    this.shuttingDown ??= this.doShutdown(reason);
    return this.shuttingDown;
  }

  private register(peer: RpcPeer): void {
    peer.handle('initialize', (p: InitializeParams) => this.initialize(p));
    peer.handle('ping', () => ({ now: Date.now() }));
    peer.handle('server.shutdown', () => {
      // Answer first, then go: the client waits for the stream to end.
      setImmediate(() => void this.shutdown('the client asked'));
      return {};
    });
    peer.handle('server.status', async () => ({
      processes: await this.ready().manager.status(),
      running: this.ready().processes.running,
    }));
    const procs = () => this.ready().processes;
    peer.handle('proc.spawn', (p) => procs().spawn(p));
    peer.handle('proc.write', (p: { id: string; data: string }) => procs().write(p.id, p.data));
    peer.handle('proc.closeStdin', (p: { id: string }) => procs().closeStdin(p.id));
    peer.handle('proc.kill', (p: { id: string }) => procs().kill(p.id));
    peer.handle('proc.abort', (p: { id: string }) => procs().abort(p.id));
    peer.handle('proc.setTimeout', (p: { id: string; ms: number | null }) => procs().setTimeout(p.id, p.ms));
    peer.handle('proc.signal', (p: { id: string; attached: boolean }) => procs().signal(p.id, p.attached));
    peer.handle('proc.stream', (p: { id: string; on: boolean }) => procs().stream(p.id, p.on));
    peer.handle('proc.materialize', (p: { id: string }) => procs().materialize(p.id));
    peer.handle('proc.read', (p: { id: string; offset: number; limit: number }) =>
      procs().read(p.id, p.offset, p.limit),
    );
    peer.handle('proc.adopt', (p: { id: string }) => procs().adopt(p.id));
    peer.handle('proc.killAll', () => procs().killAll());
    peer.handle('leftovers.kill', (p: { id: string }) => procs().killLeftovers(p.id));
    peer.handle('leftovers.read', (p: { id: string; offset: number; limit: number }) =>
      procs().readLeftovers(p.id, p.offset, p.limit),
    );
    peer.onNotification('proc.ack', (p: { id: string; bytes: number }) => this.processes?.ack(p.id, p.bytes));
    const files = () => this.ready().files;
    peer.handle('fs.read', (p: Req<'fs.read'>) => files().read(p));
    peer.handle('fs.readBytes', (p: Req<'fs.readBytes'>) => files().readBytes(p));
    peer.handle('fs.resolve', (p: Req<'fs.resolve'>) => files().resolve(p));
    peer.handle('fs.write', (p: Req<'fs.write'>) => files().write(p));
    peer.handle('fs.edit', (p: Req<'fs.edit'>) => files().edit(p));
    peer.handle('fs.list', (p: Req<'fs.list'>) => files().list(p));
    peer.handle('fs.stat', (p: Req<'fs.stat'>) => files().stat(p));
    peer.handle('fs.glob', (p: Req<'fs.glob'>) => files().glob(p));
    const terminal = () => this.ready().terminal;
    peer.handle('terminal.open', (p: { config?: Record<string, unknown>; forwardOutput?: boolean }) =>
      terminal().open(p.config ?? {}, p.forwardOutput === true),
    );
    peer.handle('terminal.permission', (p: { callId: string; args: unknown }) =>
      terminal().permission(p.callId, p.args),
    );
    peer.handle('terminal.execute', (p) => terminal().execute(p.callId, p.args, p.decision, p.kernelPolicy));
    peer.handle('terminal.abort', (p: { callId: string }) => terminal().abort(p.callId));
    peer.handle('terminal.list', () => terminal().list());
    peer.handle('terminal.readLog', (p: Req<'terminal.readLog'>) =>
      terminal().readLog(p.id, p.clean, p.offset),
    );
    peer.handle('terminal.result', (p: Req<'terminal.result'>) => terminal().result(p.callId));
    peer.handle('terminal.kill', (p: { id: number }) => terminal().kill(p.id));
  }

  private ready(): {
    manager: ProcessManager;
    processes: ProcessService;
    files: FileService;
    terminal: TerminalHost;
  } {
    if (this.shuttingDown) throw new ServerError('SHUTTING_DOWN', 'the exec server is shutting down');
    if (!this.manager || !this.processes || !this.files || !this.terminal) {
      throw new ServerError(
        'NOT_INITIALIZED',
        "expected 'initialize' before any other request; it was not sent",
      );
    }
    return { manager: this.manager, processes: this.processes, files: this.files, terminal: this.terminal };
  }

  private async initialize(params: InitializeParams): Promise<InitializeResult> {
    if (params?.version !== PROTOCOL_VERSION) {
      throw new ServerError(
        'PROTOCOL_MISMATCH',
        `conch exec protocol: this server speaks version ${PROTOCOL_VERSION}; the client speaks version ${String(params?.version)}`,
      );
    }
    if (this.manager)
      throw new ServerError('INVALID_PARAMS', 'initialize: expected once per connection; it was sent again');
    const cwd = resolveTargetPath(params.cwd ?? '.', process.cwd());
    let isDir = false;
    try {
      isDir = safeStatSync(cwd).isDirectory();
    } catch {
      // reported below
    }
    if (!isDir) {
      throw new ServerError(
        'INVALID_PARAMS',
        `initialize 'cwd': expected an existing directory in the target; '${cwd}' is not one`,
      );
    }
    if (params.logLevel) this.logger.level = params.logLevel;
    this.keepTempFiles = params.keepTempFiles === true;
    // Its owner record lets a later server (or any conch host of this user) remove it if this one
    // died without cleaning up (SIGKILL); a kept one is never swept.
    const tempDir = makeTempDir('conch-exec-', { owned: !this.keepTempFiles });
    this.tempDir = tempDir;
    // Before the terminal exists: whether it can run at all (and node-pty is loaded once, here).
    const pty = await probePty(this.options.ptyModule);
    const graceMs = Number.isFinite(params.detachGraceMs) ? Math.max(0, params.detachGraceMs ?? 0) : 0;
    if (graceMs > 0) this.session = await this.listen(tempDir, graceMs);
    this.manager = new ProcessManager({ cwd, tempDir: () => tempDir, logger: this.logger });
    this.processes = new ProcessService(this.manager, this, this.logger);
    this.files = new FileService(cwd, tempDir);
    this.terminal = new TerminalHost({
      link: this,
      logger: this.logger,
      cwd,
      tempRoot: tempDir,
      manager: this.manager,
      pty,
    });
    if (params.idleTimeoutMs > 0) this.watchIdle(params.idleTimeoutMs);
    // The supervisor's start (a node boot) overlaps the client's first request instead of delaying it.
    this.manager.warmUp();
    this.logger.debug({ cwd, tempDir, detachable: this.session !== undefined }, 'exec server initialized');
    this.initResult = {
      cwd,
      tempDir,
      pty,
      ...(process.env.PATH ? { path: process.env.PATH } : {}),
      ...(this.session ? { session: this.session } : {}),
    };
    return this.initResult;
  }

  /**
   * A connection that stays open but silent (a dead network path the TCP stack has not noticed,
   * a client frozen by SIGSTOP) is a dropped one: the client pings every heartbeat, and silence
   * longer than the idle timeout detaches the server (with a session) or ends it, like a closed
   * stream. While detached there is no stream to watch; the grace period runs instead.
   */
  private watchIdle(idleTimeoutMs: number): void {
    this.idleTimer = setInterval(
      () => {
        const stream = this.stream;
        if (stream && performance.now() - this.lastHeard > idleTimeoutMs) {
          this.streamLost(
            stream.peer,
            `nothing heard from the client for ${Math.round(performance.now() - this.lastHeard)} ms`,
          );
        }
      },
      Math.max(50, Math.min(idleTimeoutMs / 4, 5000)),
    );
  }

  private async doShutdown(reason: string): Promise<void> {
    this.logger.debug({ reason }, 'exec server shutting down');
    if (this.idleTimer) clearInterval(this.idleTimer);
    if (this.detached) clearTimeout(this.detached.timer);
    // No client attaches to a server that is going: the socket goes first.
    this.attachServer?.close();
    for (const sock of this.candidates) sock.destroy();
    if (this.session) removeSync(this.session.socket, { force: true });
    this.processes?.close();
    const work = (async () => {
      await this.terminal
        ?.dispose()
        .catch((error: unknown) => this.logger.warn({ err: error }, 'terminal dispose failed'));
      await this.manager?.dispose();
    })();
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      work,
      new Promise<void>((resolve) => (bound = setTimeout(resolve, SHUTDOWN_BOUND_MS))),
    ]);
    clearTimeout(bound);
    if (this.tempDir && !this.keepTempFiles) removeSync(this.tempDir, { recursive: true, force: true });
    this.stream?.peer.close(`shut down: ${reason}`);
    this.options.onShutdown?.(reason);
  }
}
