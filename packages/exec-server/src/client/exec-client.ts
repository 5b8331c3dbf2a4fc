import { StringDecoder } from 'node:string_decoder';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '@conch/core';
import { onHostExit } from '@conch/process';
import type { ResultPromise } from 'execa';
import { BOOT_SCRIPT } from '../bundle/boot-script.js';
import { bundleDir, bundleManifest, bundlePayload } from '../bundle/bundle.js';
import { ExecServerStartError, type ExecServerStartStage } from '../errors/exec-server-start-error.js';
import { ExecutorDisposedError } from '../errors/executor-disposed-error.js';
import { ProtocolVersionError } from '../errors/protocol-version-error.js';
import { RemoteCallError } from '../errors/remote-call-error.js';
import { SessionExpiredError } from '../errors/session-expired-error.js';
import { TransportLostError } from '../errors/transport-lost-error.js';
import { RpcError, RpcPeer } from '../json-rpc.js';
import {
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  type AttachResult,
  type ClientNotifications,
  type ClientRequests,
  type InitializeResult,
  type ServerHello,
  type ServerNotifications,
  type SessionInfo,
} from '../protocol.js';
import type { Transport } from '../transport/transport.js';
import { VERSION } from '../version.js';
import { clearStaleStat } from '@conch/core';

export interface ExecClientOptions {
  transport: Transport;
  logger?: Logger | undefined;
  /** The node binary in the target. Default 'node' (on the target's PATH). */
  node?: string | undefined;
  /** The workspace in the target (absolute, or relative to where the server starts; `~` expands). */
  cwd?: string | undefined;
  /** Where bundles are cached in the target. Default `~/.cache/conch/exec-server`. */
  cacheDir?: string | undefined;
  /** Start this command in the target instead of deploying the bundle (a server installed by hand). */
  serverCommand?: readonly string[] | undefined;
  /** Ping interval; the connection is declared lost after 3 intervals without a byte. Default 2 s. */
  heartbeatMs?: number | undefined;
  /**
   * The server treats this long without a message as a dropped stream: it detaches (with a
   * session) or ends, killing what it runs. Default 4 heartbeats with a session, else
   * max(60 s, 6 heartbeats) (silence then costs the work, so it is given longer).
   */
  idleTimeoutMs?: number | undefined;
  /**
   * How long the server keeps what it runs after its stream drops, for this client to re-attach.
   * 0: it kills everything at once. Default 60 s.
   */
  detachGraceMs?: number | undefined;
  /** Time for the transport, the deploy and the server's hello. Default 60 s. */
  connectTimeoutMs?: number | undefined;
  /** pino level of the server's stderr log (forwarded to this logger at debug). Default 'warn'. */
  serverLogLevel?: string | undefined;
  /** Keep the server's temp dir (spill files, session logs) in the target after it shuts down. */
  keepTempFiles?: boolean | undefined;
  /** Where the deployable bundle is (default: this package's dist/server-bundle). */
  bundleDir?: string | undefined;
}

/** One connection's facts. */
export interface ConnectionInfo {
  /** Increments with every (re)connection. */
  generation: number;
  /**
   * Increments with every new server: process handles and terminal sessions belong to one. A
   * re-attached connection keeps the session of the connection it replaces.
   */
  session: number;
  /** This connection re-attached to a detached server (its work kept) instead of starting one. */
  reattached: boolean;
  /** For a re-attach: how long the server had been detached (0: it had not yet seen the old stream drop). */
  detachedMs?: number;
  hello: ServerHello;
  init: InitializeResult;
  /** The bundle was copied into the target by this connection. */
  deployed: boolean;
  /** Milliseconds from starting the transport to an initialized (or re-attached) server. */
  connectMs: number;
}

/**
 * What an owner of work in a session (the process manager, the terminal) tells the client when it
 * re-attaches or the session expires.
 */
export interface SessionParticipant {
  /** Ids of processes still waited on in this session (their state is sent again on re-attach). */
  processes?(session: number): string[];
  /** Per streamed process of this session: output bytes accounted for (chunks plus skipped counts). */
  streamed?(session: number): Record<string, number>;
  /** A re-attach finished: the ids the server never saw are in `result.unknown`. */
  attached?(result: AttachResult, session: number): void;
  /** What would be lost with the session, for the expiry message ('process r3 (sleep 30)'). */
  describe?(session: number): string[];
}

/** The server this client owns: its session (when detachable) and since when it is detached. */
interface ServerSession {
  seq: number;
  info: SessionInfo | undefined;
  detachedAt: number | undefined;
}

/** The relay found no server behind the socket: the session's grace period is over. */
class SessionGone extends Error {}

type Params<M extends keyof ClientRequests> = ClientRequests[M][0];
type Result<M extends keyof ClientRequests> = ClientRequests[M][1];

/** Lines of stderr / stdout noise kept to explain a failure. */
const TAIL_CHARS = 4000;

class Connection {
  readonly generation: number;
  /** The session (server) it speaks to. */
  session = 0;
  readonly child: ResultPromise;
  readonly peer: RpcPeer;
  info!: ConnectionInfo;
  lostWith: TransportLostError | undefined;
  /** dispose() is ending it: its end is expected, not a loss worth a warning. */
  closing = false;
  lastHeard = performance.now();
  heartbeat: NodeJS.Timeout | undefined;

  constructor(generation: number, child: ResultPromise, peer: RpcPeer) {
    this.generation = generation;
    this.child = child;
    this.peer = peer;
  }
}

/**
 * The host's side of one target: starts the transport command, deploys the server bundle when
 * the target lacks it (by content hash, in the same connection), checks the protocol version,
 * and multiplexes every request of the process layer, files and terminal over that one stream.
 *
 * A dropped connection (transport exit, stream end, no answer to pings for three heartbeats)
 * fails the requests running on it with TransportLostError (`onLost`) and is forgotten. What
 * happens to the work depends on the session the server gave at initialize:
 *
 * - With a detachable session (`detachGraceMs` > 0) the server keeps its processes and terminal
 *   sessions for the grace period. The next request re-attaches: it runs the attach relay in the
 *   target through the transport, proves the session's key, and the owners get the state of their
 *   processes again; requests bound to the session (`requestIn`) wait for that. While something
 *   waits on the target (a running process holds the client) it re-attaches by itself, retrying
 *   until the grace period is over. A session past its grace period fails the call that finds it
 *   with SessionExpiredError naming what was lost (`onSessionEnded`); the next call starts anew.
 * - Without one, the server killed everything: the session ends with the connection
 *   (`onSessionEnded` with the TransportLostError) and the next request starts a new server.
 *
 * The transport process is detached (a Ctrl-C to the host's terminal does not cut the link) and
 * unref'd while nothing is in flight (an idle connection never keeps the host alive). When the
 * host goes away by any means, the transport's stdin closes and the server kills what it runs.
 */
export class ExecClient {
  readonly target: string;
  readonly transport: Transport;
  private readonly options: ExecClientOptions;
  private readonly logger: Logger | undefined;
  private conn: Connection | undefined;
  private connecting: Promise<Connection> | undefined;
  private generation = 0;
  private holds = 0;
  private readonly handlers = new Map<string, Set<(params: any, generation: number) => void>>();
  private readonly lostHandlers = new Set<(error: TransportLostError, generation: number) => void>();
  private readonly sessionEndHandlers = new Set<(error: Error, session: number) => void>();
  private readonly participants = new Set<SessionParticipant>();
  private session: ServerSession | undefined;
  private sessionSeq = 0;
  /** How sessions ended (bounded): requests bound to one fail with its error. */
  private readonly endedSessions = new Map<number, Error>();
  private reattachTimer: NodeJS.Timeout | undefined;
  private reattachDelay = 0;
  /** A session found expired while no call was waiting: the next call reports it. */
  private unreported: SessionExpiredError | undefined;
  private disposing: Promise<void> | undefined;
  private readonly removeExitHook: () => void;
  /** The latest successful connection. */
  lastConnection: ConnectionInfo | undefined;

  constructor(options: ExecClientOptions) {
    this.options = options;
    this.transport = options.transport;
    this.target = options.transport.target;
    this.logger = options.logger;
    // A host exiting without dispose(): the pipes close by themselves (the server then cleans
    // up); the ssh control master would linger for ControlPersist, so it is ended here.
    this.removeExitHook = onHostExit(() => {
      this.conn?.child.kill('SIGKILL');
      this.transport.disposeSync?.();
    });
  }

  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  /** The live connection's generation, or undefined when not connected. */
  get currentGeneration(): number | undefined {
    return this.conn && !this.conn.lostWith ? this.conn.generation : undefined;
  }

  /** The session (server) of the live or detached connection, or undefined when there is none. */
  get currentSession(): number | undefined {
    return this.session?.seq;
  }

  /** The session's id and grace period (when it can be re-attached), for diagnostics. */
  get sessionInfo(): { id: string; graceMs: number; detached: boolean } | undefined {
    const info = this.session?.info;
    return info
      ? { id: info.id, graceMs: info.graceMs, detached: this.session!.detachedAt !== undefined }
      : undefined;
  }

  /** The pid of the local transport process (ssh, podman, kubectl) of the live connection, for diagnostics. */
  get transportPid(): number | undefined {
    return this.conn && !this.conn.lostWith ? this.conn.child.pid : undefined;
  }

  /** Connects (deploying the server if needed) unless connected. */
  async connect(): Promise<ConnectionInfo> {
    return (await this.live()).info;
  }

  /** Sends a request on the live connection, connecting first if needed. */
  async request<M extends keyof ClientRequests>(method: M, params: Params<M>): Promise<Result<M>> {
    const release = this.hold();
    try {
      const conn = await this.live();
      return (await conn.peer.request(method, params)) as Result<M>;
    } catch (error) {
      throw this.mapError(method, error);
    } finally {
      release();
    }
  }

  /**
   * Like `request`, also saying which connection and session answered (the owner of what the
   * request started). `onSent` learns the session as soon as the request is written: a request
   * whose answer was lost with its stream may still have run there.
   */
  async requestTracked<M extends keyof ClientRequests>(
    method: M,
    params: Params<M>,
    onSent?: (session: number) => void,
  ): Promise<{ result: Result<M>; generation: number; session: number }> {
    const release = this.hold();
    try {
      const conn = await this.live();
      const pending = conn.peer.request(method, params);
      onSent?.(conn.session);
      return { result: (await pending) as Result<M>, generation: conn.generation, session: conn.session };
    } catch (error) {
      throw this.mapError(method, error);
    } finally {
      release();
    }
  }

  /**
   * Sends a request to the server of `session` only: re-attaching first when its connection
   * dropped and the session is detachable; failing with the error the session ended with
   * (TransportLostError without a session, SessionExpiredError past its grace period) instead of
   * reaching a new server that never knew what the request is about.
   */
  async requestIn<M extends keyof ClientRequests>(
    session: number,
    method: M,
    params: Params<M>,
  ): Promise<Result<M>> {
    const ended = this.endedSessions.get(session);
    if (ended) throw ended;
    if (this.disposing && !this.conn) throw new ExecutorDisposedError(this.target, method);
    const release = this.hold();
    try {
      const live = this.conn && !this.conn.lostWith ? this.conn : undefined;
      const conn = live?.session === session || this.session?.seq === session ? await this.live() : undefined;
      if (!conn || conn.session !== session) {
        throw (
          this.endedSessions.get(session) ??
          new TransportLostError(this.target, 'the server it ran on is gone')
        );
      }
      return (await conn.peer.request(method, params)) as Result<M>;
    } catch (error) {
      throw this.mapError(method, error);
    } finally {
      release();
    }
  }

  /** A notification to the server of `session`, if a connection to it is live (dropped otherwise). */
  notifyIn<M extends keyof ClientNotifications>(
    session: number,
    method: M,
    params: ClientNotifications[M],
  ): void {
    const conn = this.conn;
    if (conn && conn.session === session && !conn.lostWith) conn.peer.notify(method, params);
  }

  /** Called when a session ends: with the TransportLostError (no grace period) or the SessionExpiredError. */
  onSessionEnded(handler: (error: Error, session: number) => void): () => void {
    this.sessionEndHandlers.add(handler);
    return () => this.sessionEndHandlers.delete(handler);
  }

  /** Takes part in re-attaches and expiries (see SessionParticipant). */
  participate(participant: SessionParticipant): () => void {
    this.participants.add(participant);
    return () => this.participants.delete(participant);
  }

  /**
   * Sends a request on the connection of `generation` only: when that connection is gone, fails
   * with TransportLostError instead of reaching a new server that never knew the process.
   */
  async requestOn<M extends keyof ClientRequests>(
    generation: number,
    method: M,
    params: Params<M>,
  ): Promise<Result<M>> {
    const conn = this.conn;
    if (this.disposing && !conn) throw new ExecutorDisposedError(this.target, method);
    if (!conn || conn.generation !== generation || conn.lostWith) {
      throw conn?.generation === generation && conn.lostWith
        ? conn.lostWith
        : new TransportLostError(this.target, 'the connection it ran on is gone');
    }
    const release = this.hold();
    try {
      return (await conn.peer.request(method, params)) as Result<M>;
    } catch (error) {
      throw this.mapError(method, error);
    } finally {
      release();
    }
  }

  /** A notification on the connection of `generation` (dropped when it is gone). */
  notifyOn<M extends keyof ClientNotifications>(
    generation: number,
    method: M,
    params: ClientNotifications[M],
  ): void {
    const conn = this.conn;
    if (conn && conn.generation === generation && !conn.lostWith) conn.peer.notify(method, params);
  }

  /** Subscribes to a server notification (on every connection). */
  on<M extends keyof ServerNotifications>(
    method: M,
    handler: (params: ServerNotifications[M], generation: number) => void,
  ): () => void {
    let set = this.handlers.get(method);
    if (!set) {
      set = new Set();
      this.handlers.set(method, set);
    }
    set.add(handler);
    return () => set.delete(handler);
  }

  /** Called when a connection is lost (with the error its calls failed with). */
  onLost(handler: (error: TransportLostError, generation: number) => void): () => void {
    this.lostHandlers.add(handler);
    return () => this.lostHandlers.delete(handler);
  }

  /**
   * Keeps the transport referenced (the host's event loop alive) until the returned function is
   * called: held while a request is in flight or a remote process or terminal call runs.
   */
  hold(): () => void {
    if (this.holds++ === 0) this.setRef(true);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds === 0) this.setRef(false);
    };
  }

  /**
   * Ends the connection: asks the server to shut down (it kills everything it started and removes
   * its temp dir), waits for the transport to exit, and releases the transport (ssh: `-O exit`).
   */
  dispose(): Promise<void> {
    this.disposing ??= this.doDispose();
    return this.disposing;
  }

  // ---- connection ----

  /**
   * The live connection: connecting, or re-attaching a detached session, first. `background`: the
   * re-attach loop asks, not a call — an expiry it finds is left for the next call to report.
   */
  private async live(background = false): Promise<Connection> {
    if (this.disposing) throw new ExecutorDisposedError(this.target, 'connect');
    const conn = this.conn;
    if (conn && !conn.lostWith) return conn;
    const session = this.session;
    if (!session && this.unreported && !this.connecting && !background) {
      // The call after an expiry nobody was told of says so; the one after starts anew.
      const error = this.unreported;
      this.unreported = undefined;
      throw error;
    }
    this.connecting ??= (session?.info ? this.reattach(session) : this.start()).finally(() => {
      this.connecting = undefined;
    });
    if (background) return this.connecting;
    return this.connecting.catch((error: unknown) => {
      if (error === this.unreported) this.unreported = undefined;
      throw error;
    });
  }

  /**
   * Re-attaches to the detached server of `session`. A server that is gone (no socket: its grace
   * period ended) expires the session; a target that cannot be reached leaves it detached for a
   * later try, until its grace period is over here too.
   */
  private async reattach(session: ServerSession): Promise<Connection> {
    try {
      const conn = await this.start(session);
      this.reattachDelay = 0;
      return conn;
    } catch (error) {
      if (error instanceof SessionGone) throw this.expire(session, error.message);
      const since = session.detachedAt ?? performance.now();
      const graceMs = session.info!.graceMs;
      if (performance.now() - since > graceMs) {
        throw this.expire(
          session,
          `the target could not be reached within the grace period: ${(error as Error).message}`,
        );
      }
      throw error;
    }
  }

  /** The session is gone with its work: its owners are told, and the error names what was lost. */
  private expire(session: ServerSession, why: string): SessionExpiredError {
    const lost: string[] = [];
    for (const p of this.participants) {
      try {
        lost.push(...(p.describe?.(session.seq) ?? []));
      } catch (e) {
        this.logger?.error({ err: e }, 'exec server: a session participant threw');
      }
    }
    const error = new SessionExpiredError(this.target, session.info!.id, session.info!.graceMs, lost, why);
    // Until a call has been told (see live()).
    this.unreported = error;
    this.logger?.warn(
      { target: this.target, session: session.info!.id, why },
      'exec server: session expired',
    );
    this.endSession(session.seq, error);
    return error;
  }

  private endSession(seq: number, error: Error): void {
    if (this.session?.seq === seq) this.session = undefined;
    if (this.endedSessions.has(seq)) return;
    this.endedSessions.set(seq, error);
    if (this.endedSessions.size > 64) this.endedSessions.delete(this.endedSessions.keys().next().value!);
    for (const handler of [...this.sessionEndHandlers]) {
      try {
        handler(error, seq);
      } catch (e) {
        this.logger?.error({ err: e }, 'exec server: a session-ended handler threw');
      }
    }
  }

  /**
   * While something waits on the target (a running process), a detached session is re-attached
   * without waiting for the next call: at once, then with backoff, until it is back or expired.
   */
  private scheduleReattach(): void {
    if (this.reattachTimer || this.disposing) return;
    const delay = this.reattachDelay;
    this.reattachDelay = Math.min(2000, Math.max(250, delay * 2));
    this.reattachTimer = setTimeout(() => {
      this.reattachTimer = undefined;
      const session = this.session;
      if (!session?.info || this.disposing || this.holds === 0) return;
      if (this.conn && !this.conn.lostWith) return;
      this.live(true).then(
        () => undefined,
        (error: unknown) => {
          this.logger?.debug({ target: this.target, err: error }, 'exec server: re-attach failed');
          if (!(error instanceof SessionExpiredError) && this.session === session) this.scheduleReattach();
        },
      );
    }, delay);
    // Like the held transport it replaces: a host waiting on a result stays alive meanwhile.
    if (this.holds === 0) this.reattachTimer.unref();
  }

  private launchArgv(attachTo?: SessionInfo): string[] {
    const attach = attachTo ? ['--attach', attachTo.socket] : [];
    if (this.options.serverCommand) return [...this.options.serverCommand, ...attach];
    const manifest = bundleManifest(this.options.bundleDir ?? bundleDir());
    return [
      this.options.node ?? 'node',
      '-e',
      BOOT_SCRIPT,
      manifest.hash,
      ...(this.options.cacheDir ? [this.options.cacheDir] : []),
      ...attach,
    ];
  }

  /** Starts a server (or, given a detached session, the attach relay to it) and speaks to it. */
  private async start(attachTo?: ServerSession): Promise<Connection> {
    // A transport with a step before its first connection (a SandboxClaim's: create the claim and
    // wait for its pod) takes it here, once per fresh server; a re-attach reaches the same target.
    // A failure fails this call as a start failure does; the next call tries again.
    if (!attachTo) await this.transport.prepare?.();
    // execa loaded on first use: importing this package (conch-mcp, any host of the executor
    // plugin) then costs nothing of it until a remote target connects.
    clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
    const { execa } = await import('execa');
    const started = performance.now();
    const generation = ++this.generation;
    const { file, args } = this.transport.command(this.launchArgv(attachTo?.info));
    this.logger?.debug(
      { target: this.target, file, generation, reattach: attachTo !== undefined },
      'exec server: connecting',
    );
    const child = execa(file, args, {
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
      // Its own process group: a Ctrl-C meant for the host does not cut the connection.
      detached: true,
      encoding: 'buffer',
    });
    let stderrTail = '';
    const stderr = child.stderr as Readable;
    stderr.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      stderrTail = (stderrTail + text).slice(-TAIL_CHARS);
      this.forwardServerLog(text);
    });
    stderr.on('error', () => {});
    const stdout = child.stdout as Readable;
    const stdin = child.stdin as Writable;
    stdin.on('error', () => {});
    stdout.on('error', () => {});

    let exit: { code: number | null; signal: string | null } | undefined;
    const exited = child.then((result) => {
      exit = { code: result.exitCode ?? null, signal: (result.signal as string | undefined) ?? null };
      return exit;
    });

    let hello: ServerHello;
    let rest: string;
    let deployed: boolean;
    try {
      ({ hello, rest, deployed } = await this.handshake(stdout, stdin, exited, () => stderrTail));
    } catch (error) {
      child.kill('SIGKILL');
      throw error;
    }
    if (hello.protocol !== PROTOCOL_NAME || hello.version !== PROTOCOL_VERSION) {
      stdin.end();
      child.kill('SIGTERM');
      throw new ProtocolVersionError(this.target, hello.version, PROTOCOL_VERSION, hello.serverVersion);
    }
    if (attachTo && hello.session !== attachTo.info!.id) {
      child.kill('SIGKILL');
      throw new SessionGone(
        `the attach socket answered for session ${String(hello.session)}, not ${attachTo.info!.id}`,
      );
    }

    // The connection is made after its peer; the peer's close handler finds it here.
    const holder: { conn?: Connection } = {};
    const peer = new RpcPeer({
      input: stdout,
      output: stdin,
      onNoise: (line) =>
        this.logger?.debug(
          { target: this.target, line: line.slice(0, 300) },
          'exec server: non-protocol output',
        ),
      closeError: (reason) =>
        new TransportLostError(this.target, reason, undefined, this.keptMs(holder.conn)),
      onClose: (error) => {
        if (holder.conn) this.lose(holder.conn, error as TransportLostError);
      },
    });
    const conn = new Connection(generation, child, peer);
    holder.conn = conn;
    stdout.on('data', () => {
      conn.lastHeard = performance.now();
    });
    // A re-attaching server resends what its processes did while the link was down before it
    // answers the attach. Those are held until the answer is recorded, so a result that came
    // through this connection is never seen while `lastConnection` still names the old one.
    let held: [string, unknown][] | undefined = attachTo ? [] : undefined;
    const release = (): void => {
      const queued = held ?? [];
      held = undefined;
      for (const [method, params] of queued) this.dispatch(method, params, generation);
    };
    for (const method of this.notificationMethods()) {
      peer.onNotification(method, (params: unknown) => {
        if (held) held.push([method, params]);
        else this.dispatch(method, params, generation);
      });
    }
    void exited.then((e) => {
      const tail = stderrTail.trim().split('\n').slice(-3).join(' | ');
      this.lose(
        conn,
        new TransportLostError(
          this.target,
          `the transport exited (${e.signal ?? `code ${e.code}`})${tail ? `: ${tail}` : ''}`,
        ),
      );
    });
    peer.feed(rest);
    this.conn = conn;
    if (this.holds === 0) this.setRef(false);

    let init: InitializeResult;
    let attached: AttachResult | undefined;
    try {
      if (attachTo) {
        conn.session = attachTo.seq;
        attached = await this.withTimeout(
          peer.request<AttachResult>('session.attach', {
            version: PROTOCOL_VERSION,
            client: `@conch/exec-server ${VERSION}`,
            session: attachTo.info!.id,
            key: attachTo.info!.key,
            processes: this.waitedOn(attachTo.seq),
            streamed: this.streamedIn(attachTo.seq),
          }),
          'session.attach',
        );
        init = attached.init;
      } else {
        init = await this.withTimeout(
          peer.request<InitializeResult>('initialize', {
            version: PROTOCOL_VERSION,
            client: `@conch/exec-server ${VERSION}`,
            ...(this.options.cwd !== undefined ? { cwd: this.options.cwd } : {}),
            idleTimeoutMs: this.idleTimeoutMs(),
            logLevel: this.options.serverLogLevel ?? 'warn',
            ...(this.options.keepTempFiles ? { keepTempFiles: true } : {}),
            detachGraceMs: this.detachGraceMs(),
          }),
          'initialize',
        );
      }
    } catch (error) {
      // What the server said before failing is still what its processes did.
      release();
      this.lose(
        conn,
        new TransportLostError(this.target, attachTo ? 'session.attach failed' : 'initialize failed'),
      );
      if (error instanceof RpcError && error.data.code === 'ATTACH_REFUSED') {
        throw new SessionGone(`the server refused the session's key: ${error.message}`);
      }
      if (error instanceof RpcError && error.data.code === 'PROTOCOL_MISMATCH') {
        throw new ProtocolVersionError(
          this.target,
          String(error.message),
          PROTOCOL_VERSION,
          hello.serverVersion,
        );
      }
      throw error instanceof ExecServerStartError
        ? error
        : new ExecServerStartError(this.target, 'initialize', (error as Error).message, error);
    }
    if (attachTo) {
      attachTo.detachedAt = undefined;
    } else {
      // A new server: a new session (detachable when the server gave one).
      const seq = ++this.sessionSeq;
      conn.session = seq;
      this.session = { seq, info: init.session, detachedAt: undefined };
    }
    conn.info = {
      generation,
      session: conn.session,
      reattached: attachTo !== undefined,
      ...(attached ? { detachedMs: attached.detachedMs } : {}),
      hello,
      init,
      deployed,
      connectMs: Math.round(performance.now() - started),
    };
    this.lastConnection = conn.info;
    // Before the participants hear of the attach: their processes are up to date when they do.
    release();
    this.startHeartbeat(conn);
    if (attached) {
      this.logger?.info(
        {
          target: this.target,
          generation,
          detachedMs: attached.detachedMs,
          unknown: attached.unknown.length,
        },
        'exec server: re-attached to its session',
      );
      for (const p of [...this.participants]) {
        try {
          p.attached?.(attached, conn.session);
        } catch (e) {
          this.logger?.error({ err: e }, 'exec server: a session participant threw');
        }
      }
    }
    this.logger?.debug(
      {
        target: this.target,
        generation,
        deployed,
        bundle: hello.bundle,
        ms: Math.round(conn.info.connectMs),
      },
      'exec server: connected',
    );
    return conn;
  }

  /**
   * Reads the transport's stdout until the server's hello: boot-script lines (`need-bundle` ->
   * send the bundle; `installed`; `error`) and anything else (rc-file noise, logged) before it.
   */
  private handshake(
    stdout: Readable,
    stdin: Writable,
    exited: Promise<{ code: number | null; signal: string | null }>,
    stderrTail: () => string,
  ): Promise<{ hello: ServerHello; rest: string; deployed: boolean }> {
    const decoder = new StringDecoder('utf8');
    const timeoutMs = this.options.connectTimeoutMs ?? 60_000;
    return new Promise((resolve, reject) => {
      let buffered = '';
      let noise = '';
      let deployed = false;
      let settled = false;
      const timer = setTimeout(() => {
        fail('timeout', `no hello from the server within ${timeoutMs} ms${explain()}`);
      }, timeoutMs);
      const explain = () => {
        const err = stderrTail().trim();
        const out = noise.trim();
        return `${err ? `; its stderr: ${err.split('\n').slice(-5).join(' | ')}` : ''}${out ? `; its stdout: ${out.split('\n').slice(-3).join(' | ')}` : ''}`;
      };
      const finish = () => {
        settled = true;
        clearTimeout(timer);
        stdout.off('data', onData);
        // Held until the protocol peer listens (it resumes the stream): no byte is dropped between.
        stdout.pause();
      };
      const fail = (stage: ExecServerStartStage, detail: string) => {
        if (settled) return;
        finish();
        reject(new ExecServerStartError(this.target, stage, detail));
      };
      const onLine = (line: string): boolean => {
        let message: Record<string, unknown> | undefined;
        try {
          const parsed: unknown = JSON.parse(line);
          if (parsed && typeof parsed === 'object') message = parsed as Record<string, unknown>;
        } catch {
          // noise
        }
        if (message && typeof message.conchBoot === 'string') {
          switch (message.conchBoot) {
            case 'need-bundle': {
              deployed = true;
              this.logger?.info(
                { target: this.target, dir: message.dir },
                'exec server: copying the server bundle to the target',
              );
              stdin.write(bundlePayload(this.options.bundleDir ?? bundleDir()));
              return false;
            }
            case 'installed':
              return false;
            case 'error': {
              const code = String(message.code);
              if (code === 'SESSION_GONE') {
                if (!settled) {
                  finish();
                  reject(new SessionGone(String(message.message)));
                }
                return true;
              }
              fail(
                code === 'NODE_TOO_OLD' ? 'node-too-old' : 'deploy',
                `${code}: ${String(message.message)}`,
              );
              return true;
            }
          }
        }
        if (message && message.jsonrpc === '2.0' && message.method === 'server.hello') {
          finish();
          resolve({ hello: message.params as ServerHello, rest: buffered, deployed });
          return true;
        }
        noise = (noise + line + '\n').slice(-TAIL_CHARS);
        this.logger?.debug(
          { target: this.target, line: line.slice(0, 300) },
          'exec server: output before the hello',
        );
        return false;
      };
      const onData = (chunk: Buffer) => {
        buffered += decoder.write(chunk);
        for (let nl = buffered.indexOf('\n'); nl !== -1 && !settled; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line.trim() && onLine(line.trim())) return;
        }
      };
      stdout.on('data', onData);
      void exited.then(({ code, signal }) => {
        const hint = this.transport.describeExit?.(code, stderrTail());
        // 127: the shell could not find the command it was to exec, which is node.
        const stage: ExecServerStartStage = code === 127 ? 'node-missing' : 'transport';
        fail(
          stage,
          `the transport command exited (${signal ?? `code ${code}`}) before the server spoke${hint ? `: ${hint}` : ''}${explain()}`,
        );
      });
    });
  }

  private withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
    const ms = this.options.connectTimeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(new ExecServerStartError(this.target, 'timeout', `no answer to ${what} within ${ms} ms`)),
          ms,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  private heartbeatMs(): number {
    return this.options.heartbeatMs ?? 2000;
  }

  private detachGraceMs(): number {
    return this.options.detachGraceMs ?? 60_000;
  }

  private idleTimeoutMs(): number {
    if (this.options.idleTimeoutMs !== undefined) return this.options.idleTimeoutMs;
    // With a session, silence only detaches (the work stays): declare it soon. Without one it
    // kills the work, so a longer silence is tolerated, as before sessions.
    return this.detachGraceMs() > 0 ? this.heartbeatMs() * 4 : Math.max(60_000, this.heartbeatMs() * 6);
  }

  /** How long the target keeps the work of a connection that drops now (0: it is killed). */
  private keptMs(conn: Connection | undefined): number {
    const session = this.session;
    if (!conn || !session?.info || conn.session !== session.seq || conn.closing || this.disposing) return 0;
    return session.info.graceMs;
  }

  /** Ids of the processes the owners still wait on in `session`. */
  private waitedOn(session: number): string[] {
    const ids: string[] = [];
    for (const p of this.participants) {
      try {
        ids.push(...(p.processes?.(session) ?? []));
      } catch (e) {
        this.logger?.error({ err: e }, 'exec server: a session participant threw');
      }
    }
    return ids;
  }

  private streamedIn(session: number): Record<string, number> {
    const streamed: Record<string, number> = {};
    for (const p of this.participants) {
      try {
        Object.assign(streamed, p.streamed?.(session) ?? {});
      } catch (e) {
        this.logger?.error({ err: e }, 'exec server: a session participant threw');
      }
    }
    return streamed;
  }

  private startHeartbeat(conn: Connection): void {
    const every = this.heartbeatMs();
    conn.heartbeat = setInterval(() => {
      if (conn.lostWith) return;
      const silent = Math.round(performance.now() - conn.lastHeard);
      if (silent > every * 3) {
        this.lose(
          conn,
          new TransportLostError(
            this.target,
            `no answer from the exec server for ${silent} ms`,
            undefined,
            this.keptMs(conn),
          ),
          true,
        );
        return;
      }
      conn.peer.request('ping', {}).catch(() => undefined);
    }, every);
    conn.heartbeat.unref();
  }

  /**
   * Forgets a connection that dropped. `silent`: it was declared lost for silence (half-open), so
   * the transport may be wedged too (an ssh master on a dead network path): it is reset.
   */
  private lose(conn: Connection, error: TransportLostError, silent = false): void {
    if (conn.lostWith) return;
    conn.lostWith = error;
    if (conn.heartbeat) clearInterval(conn.heartbeat);
    if (silent) this.transport.reset?.();
    conn.peer.close(error.reason);
    if (conn.child.exitCode === null && conn.child.signalCode === null) {
      conn.child.kill('SIGTERM');
      const force = setTimeout(() => conn.child.kill('SIGKILL'), 2000);
      force.unref();
    }
    if (this.conn === conn) this.conn = undefined;
    if (!conn.info) return; // never connected: the starter reports the failure
    const kept = this.keptMs(conn);
    if (conn.closing)
      this.logger?.debug(
        { target: this.target, generation: conn.generation },
        'exec server: connection closed',
      );
    else
      this.logger?.warn(
        { target: this.target, reason: error.reason, generation: conn.generation, keptMs: kept },
        kept > 0
          ? 'exec server: connection lost; its session is kept for a re-attach'
          : 'exec server: connection lost',
      );
    for (const handler of [...this.lostHandlers]) {
      try {
        handler(error, conn.generation);
      } catch (e) {
        this.logger?.error({ err: e }, 'exec server: a connection-lost handler threw');
      }
    }
    const session = this.session;
    if (kept > 0 && session) {
      session.detachedAt ??= performance.now();
      if (this.holds > 0) this.scheduleReattach();
    } else {
      this.endSession(conn.session, error);
    }
  }

  private dispatch(method: string, params: unknown, generation: number): void {
    for (const handler of [...(this.handlers.get(method) ?? [])]) {
      try {
        handler(params, generation);
      } catch (error) {
        this.logger?.error({ err: error, method }, 'exec server: a notification handler threw');
      }
    }
  }

  private notificationMethods(): (keyof ServerNotifications)[] {
    return [
      'proc.started',
      'proc.output',
      'proc.progress',
      'proc.exited',
      'leftovers.progress',
      'leftovers.done',
      'event',
    ];
  }

  private setRef(on: boolean): void {
    const conn = this.conn;
    if (!conn) return;
    const child = conn.child;
    const streams = [child.stdout, child.stdin, child.stderr] as unknown as ({
      ref?(): void;
      unref?(): void;
    } | null)[];
    if (on) {
      child.ref();
      for (const s of streams) s?.ref?.();
    } else {
      child.unref();
      for (const s of streams) s?.unref?.();
    }
  }

  /** The server's stderr (pino JSON lines) into this logger at debug, never its raw text at warn. */
  private forwardServerLog(text: string): void {
    if (!this.logger) return;
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      this.logger.debug({ target: this.target, server: line.slice(0, 1000) }, 'exec server log');
    }
  }

  private mapError(method: string, error: unknown): unknown {
    if (error instanceof RpcError) {
      return new RemoteCallError(this.target, method, error.data.code, error.message, error);
    }
    return error;
  }

  private async doDispose(): Promise<void> {
    this.removeExitHook();
    if (this.reattachTimer) clearTimeout(this.reattachTimer);
    await this.connecting?.catch(() => undefined);
    const detached = this.session;
    if (detached?.info && (!this.conn || this.conn.lostWith)) {
      // Nothing may be left in the target: a detached server is re-attached to be shut down
      // (else it would run its work until the grace period ends).
      await this.start(detached).catch((error: unknown) => {
        this.logger?.warn(
          { target: this.target, err: error },
          'exec server: could not re-attach to shut the detached session down; it ends by itself when its grace period does',
        );
      });
    }
    const conn = this.conn;
    if (conn && !conn.lostWith) {
      conn.closing = true;
      this.setRef(true);
      // Explicitly (kubectl may not pass on stdin's end), then by closing the stream.
      await Promise.race([
        conn.peer.request('server.shutdown', {}).catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, 3000).unref()),
      ]);
      (conn.child.stdin as Writable | null)?.end();
      // The server ends once everything it started is dead (bounded there at 15 s).
      const exited = await Promise.race([
        conn.child.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000).unref()),
      ]);
      if (!exited) conn.child.kill('SIGKILL');
      this.lose(conn, new TransportLostError(this.target, 'disposed'));
    }
    if (this.session)
      this.endSession(this.session.seq, new ExecutorDisposedError(this.target, 'the session'));
    await this.transport.dispose();
  }
}
