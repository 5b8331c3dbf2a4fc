import { StringDecoder } from 'node:string_decoder';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '@conch/core';
import { onHostExit } from '@conch/process';
import { execa, type ResultPromise } from 'execa';
import { BOOT_SCRIPT } from '../bundle/boot-script.js';
import { bundleDir, bundleManifest, bundlePayload } from '../bundle/bundle.js';
import { ExecServerStartError, type ExecServerStartStage } from '../errors/exec-server-start-error.js';
import { ExecutorDisposedError } from '../errors/executor-disposed-error.js';
import { ProtocolVersionError } from '../errors/protocol-version-error.js';
import { RemoteCallError } from '../errors/remote-call-error.js';
import { TransportLostError } from '../errors/transport-lost-error.js';
import { RpcError, RpcPeer } from '../json-rpc.js';
import {
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  type ClientNotifications,
  type ClientRequests,
  type InitializeResult,
  type ServerHello,
  type ServerNotifications,
} from '../protocol.js';
import type { Transport } from '../transport/transport.js';
import { VERSION } from '../version.js';

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
  /** Ping interval; the connection is declared lost after 3 intervals without a byte. Default 10 s. */
  heartbeatMs?: number | undefined;
  /** The server shuts down (killing what it runs) after this long without a message. Default 6 heartbeats. */
  idleTimeoutMs?: number | undefined;
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
  /** Increments with every (re)connection; process handles belong to one. */
  generation: number;
  hello: ServerHello;
  init: InitializeResult;
  /** The bundle was copied into the target by this connection. */
  deployed: boolean;
  /** Milliseconds from starting the transport to an initialized server. */
  connectMs: number;
}

type Params<M extends keyof ClientRequests> = ClientRequests[M][0];
type Result<M extends keyof ClientRequests> = ClientRequests[M][1];

/** Lines of stderr / stdout noise kept to explain a failure. */
const TAIL_CHARS = 4000;

class Connection {
  readonly generation: number;
  readonly child: ResultPromise;
  readonly peer: RpcPeer;
  info!: ConnectionInfo;
  lostWith: TransportLostError | undefined;
  /** dispose() is ending it: its end is expected, not a loss worth a warning. */
  closing = false;
  lastHeard = Date.now();
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
 * fails the requests running on it with TransportLostError, tells the owners of its processes
 * (`onLost`), and is forgotten: the next `request` reconnects. Requests bound to a connection
 * (`requestOn`, a process's kill) never reconnect: what they would address died with it.
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

  /** Like `request`, also saying which connection answered (the owner of what the request started). */
  async requestTracked<M extends keyof ClientRequests>(
    method: M,
    params: Params<M>,
  ): Promise<{ result: Result<M>; generation: number }> {
    const release = this.hold();
    try {
      const conn = await this.live();
      return { result: (await conn.peer.request(method, params)) as Result<M>, generation: conn.generation };
    } catch (error) {
      throw this.mapError(method, error);
    } finally {
      release();
    }
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

  private async live(): Promise<Connection> {
    if (this.disposing) throw new ExecutorDisposedError(this.target, 'connect');
    const conn = this.conn;
    if (conn && !conn.lostWith) return conn;
    this.connecting ??= this.start().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private launchArgv(): string[] {
    if (this.options.serverCommand) return [...this.options.serverCommand];
    const manifest = bundleManifest(this.options.bundleDir ?? bundleDir());
    return [
      this.options.node ?? 'node',
      '-e',
      BOOT_SCRIPT,
      manifest.hash,
      ...(this.options.cacheDir ? [this.options.cacheDir] : []),
    ];
  }

  private async start(): Promise<Connection> {
    const started = performance.now();
    const generation = ++this.generation;
    const { file, args } = this.transport.command(this.launchArgv());
    this.logger?.debug({ target: this.target, file, generation }, 'exec server: connecting');
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
      closeError: (reason) => new TransportLostError(this.target, reason),
      onClose: (error) => {
        if (holder.conn) this.lose(holder.conn, error as TransportLostError);
      },
    });
    const conn = new Connection(generation, child, peer);
    holder.conn = conn;
    stdout.on('data', () => {
      conn.lastHeard = Date.now();
    });
    for (const method of this.notificationMethods()) {
      peer.onNotification(method, (params: unknown) => this.dispatch(method, params, generation));
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
    try {
      init = await this.withTimeout(
        peer.request<InitializeResult>('initialize', {
          version: PROTOCOL_VERSION,
          client: `@conch/exec-server ${VERSION}`,
          ...(this.options.cwd !== undefined ? { cwd: this.options.cwd } : {}),
          idleTimeoutMs: this.idleTimeoutMs(),
          logLevel: this.options.serverLogLevel ?? 'warn',
          ...(this.options.keepTempFiles ? { keepTempFiles: true } : {}),
        }),
        'initialize',
      );
    } catch (error) {
      this.lose(conn, new TransportLostError(this.target, 'initialize failed'));
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
    conn.info = {
      generation,
      hello,
      init,
      deployed,
      connectMs: performance.now() - started,
    };
    this.lastConnection = conn.info;
    this.startHeartbeat(conn);
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
    return this.options.heartbeatMs ?? 10_000;
  }

  private idleTimeoutMs(): number {
    return this.options.idleTimeoutMs ?? Math.max(60_000, this.heartbeatMs() * 6);
  }

  private startHeartbeat(conn: Connection): void {
    const every = this.heartbeatMs();
    conn.heartbeat = setInterval(() => {
      if (conn.lostWith) return;
      const silent = Date.now() - conn.lastHeard;
      if (silent > every * 3) {
        this.lose(
          conn,
          new TransportLostError(this.target, `no answer from the exec server for ${silent} ms`),
        );
        return;
      }
      conn.peer.request('ping', {}).catch(() => undefined);
    }, every);
    conn.heartbeat.unref();
  }

  private lose(conn: Connection, error: TransportLostError): void {
    if (conn.lostWith) return;
    conn.lostWith = error;
    if (conn.heartbeat) clearInterval(conn.heartbeat);
    conn.peer.close(error.reason);
    if (conn.child.exitCode === null && conn.child.signalCode === null) {
      conn.child.kill('SIGTERM');
      const force = setTimeout(() => conn.child.kill('SIGKILL'), 2000);
      force.unref();
    }
    if (this.conn === conn) this.conn = undefined;
    if (!conn.info) return; // never connected: the starter reports the failure
    if (conn.closing)
      this.logger?.debug(
        { target: this.target, generation: conn.generation },
        'exec server: connection closed',
      );
    else
      this.logger?.warn(
        { target: this.target, reason: error.reason, generation: conn.generation },
        'exec server: connection lost',
      );
    for (const handler of [...this.lostHandlers]) {
      try {
        handler(error, conn.generation);
      } catch (e) {
        this.logger?.error({ err: e }, 'exec server: a connection-lost handler threw');
      }
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
    await this.connecting?.catch(() => undefined);
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
    await this.transport.dispose();
  }
}
