import { Writable } from 'node:stream';
import { TextDecoder } from 'node:util';
import type { EventBus, Logger } from '@conch/core';
import type { CaptureSnapshot, OutputEvent, ProcessResult, SandboxKind, SpawnOptions } from '@conch/process';
import { ConchError } from '@conch/core';
import { stripAnsi } from '@conch/process';
import { TransportLostError } from '../errors/transport-lost-error.js';
import type { OutputStore, ProcessHandle } from '../process-layer.js';
import type { ClientRequests, SpawnParams } from '../protocol.js';

/** Requests about one process (sent on the connection it runs on). */
type ProcMethod =
  | 'proc.kill'
  | 'proc.abort'
  | 'proc.setTimeout'
  | 'proc.stream'
  | 'proc.materialize'
  | 'proc.read'
  | 'proc.write'
  | 'proc.closeStdin'
  | 'proc.adopt'
  | 'leftovers.kill'
  | 'leftovers.read';
import type { ExecClient } from './exec-client.js';

/** A ProcessResult of a run in a target: where it ran. */
export type RemoteProcessResult = ProcessResult & {
  /** 'ssh:user@host:port', 'podman:name', 'kubernetes:ns/pod' — paths in the result are there. */
  target: string;
  /**
   * Set when the run could not finish normally for a reason of the link: 'TRANSPORT_LOST' (the
   * connection dropped and the server, without a grace period, killed it; or its spawn never
   * reached the target), 'SESSION_EXPIRED' (no re-attach within the grace period: killed there).
   */
  errorCode?: 'TRANSPORT_LOST' | 'SESSION_EXPIRED';
};

/** What a RemoteProcess reports to its manager. */
export interface RemoteProcessOwner {
  readonly client: ExecClient;
  readonly events: EventBus | undefined;
  readonly logger: Logger | undefined;
  started(proc: RemoteProcess): void;
  finished(proc: RemoteProcess, result: RemoteProcessResult): void;
}

const EMPTY_SNAPSHOT: CaptureSnapshot = {
  totalBytes: 0,
  lines: 0,
  binary: false,
  truncated: false,
  omittedBytes: 0,
  head: '',
  tail: '',
};

/** The combined output of a remote process: paged from the target's spill file. */
class RemoteOutput implements OutputStore {
  totalBytes = 0;
  path: string | undefined;
  private readonly proc: RemoteProcess;

  constructor(proc: RemoteProcess) {
    this.proc = proc;
  }

  async read(offset: number, length: number): Promise<Uint8Array> {
    const { data } = await this.proc.request('proc.read', { id: this.proc.id, offset, limit: length });
    return Buffer.from(data, 'base64');
  }
}

/** stdin of a remote process: each write is sent (and acknowledged) in order, so writes are paced by the link. */
class RemoteStdin extends Writable {
  private readonly proc: RemoteProcess;

  constructor(proc: RemoteProcess) {
    super({ highWaterMark: 256 * 1024 });
    this.proc = proc;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.proc.request('proc.write', { id: this.proc.id, data: Buffer.from(chunk).toString('base64') }).then(
      ({ written }) => callback(written ? null : Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })),
      (error: Error) => callback(error),
    );
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.proc.request('proc.closeStdin', { id: this.proc.id }).then(
      () => callback(),
      (error: Error) => callback(error),
    );
  }
}

/**
 * A process running in a target, through its exec server: the same surface as @conch/process's
 * ManagedProcess for a runner (result, kill, timeout, abort signal, stdin, streamed output,
 * combined output paged from the target's spill file, last line, leftovers). Capture, spill files,
 * process groups, cookies and the kill are the target's ProcessManager's; this object relays.
 *
 * Calls are bound to the server (session) the process was started on, never a newer one. When
 * the connection drops and the session is detachable, the process keeps running there and this
 * handle stays as it is: the client re-attaches (by itself while the result is awaited, else with
 * the next call), the state that changed meanwhile arrives, and output is read on by offset from
 * the target's spill file (`combined.read`; streamed listeners get what follows, `skippedBytes`
 * counts what was not streamed). Without a session the result resolves at once with
 * `errorCode: 'TRANSPORT_LOST'` (the server killed the process when its stream closed); past the
 * grace period with `errorCode: 'SESSION_EXPIRED'`. Nothing is killed from here: the pid is the
 * target's.
 */
export class RemoteProcess implements ProcessHandle {
  readonly id: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly label: string;
  readonly cwd: string;
  readonly shell: boolean;
  readonly startedAt = Date.now();
  readonly result: Promise<RemoteProcessResult>;
  readonly spawned: Promise<number | undefined>;
  readonly stdin: Writable | null;
  readonly combined: RemoteOutput | undefined;
  pid: number | undefined;
  cookie = '';
  /** The connection that accepted it. */
  generation: number | undefined;
  /** The server (session) it runs in, known once its spawn was sent. */
  session: number | undefined;

  private readonly owner: RemoteProcessOwner;
  private readonly t0 = performance.now();
  private sandboxKind: SandboxKind = 'none';
  private resolveResult!: (result: RemoteProcessResult) => void;
  private resolveSpawned!: (pid: number | undefined) => void;
  private final: RemoteProcessResult | undefined;
  private bytes = 0;
  private outputFile: string | undefined;
  private last: string | undefined;
  private listeners: Set<(event: OutputEvent) => void> | undefined;
  private decoders: { stdout?: TextDecoder; stderr?: TextDecoder } = {};
  private streaming = false;
  private signal: AbortSignal | undefined;
  private readonly onAbort = () => void this.request('proc.abort', { id: this.id }).catch(() => undefined);
  private accepted: Promise<number | undefined>;
  private releaseHold: () => void;
  private unacked = 0;
  private skipped = 0;
  private accounted = 0;

  /** @internal created by RemoteProcessManager.spawn */
  constructor(init: {
    owner: RemoteProcessOwner;
    id: string;
    command: string;
    args: readonly string[];
    cwd: string;
    options: SpawnOptions;
  }) {
    const { owner, id, command, args, options } = init;
    this.owner = owner;
    this.id = id;
    this.command = command;
    this.args = args;
    this.cwd = init.cwd;
    this.shell = options.shell !== undefined && options.shell !== false;
    this.label = options.label ?? (args.length ? `${command} ${args.join(' ')}` : command);
    this.result = new Promise((resolve) => (this.resolveResult = resolve));
    this.spawned = new Promise((resolve) => (this.resolveSpawned = resolve));
    this.stdin = options.stdin === 'pipe' ? new RemoteStdin(this) : null;
    this.stdin?.on('error', () => {
      // EPIPE after the process ended, or the link dropped: the result says what happened
    });
    const capture = options.capture;
    this.combined = capture && capture.spill === 'combined' ? new RemoteOutput(this) : undefined;
    // Held until the result: like a local child, a running remote process keeps the host alive.
    this.releaseHold = owner.client.hold();
    const wantsStream = (owner.events?.listenerCount('process.output') ?? 0) > 0;
    this.streaming = wantsStream;
    if (options.signal) this.attachSignal(options.signal);
    const params: SpawnParams = {
      id,
      command,
      args: [...args],
      ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
      ...(options.env
        ? { env: Object.fromEntries(Object.entries(options.env).map(([k, v]) => [k, v ?? null])) }
        : {}),
      ...(options.extendEnv !== undefined ? { extendEnv: options.extendEnv } : {}),
      ...(options.shell !== undefined ? { shell: options.shell } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.capture !== undefined ? { capture: options.capture } : {}),
      ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
      ...(options.killGraceMs !== undefined ? { killGraceMs: options.killGraceMs } : {}),
      ...(options.drainMs !== undefined ? { drainMs: options.drainMs } : {}),
      ...(options.keepLeftoverOutput !== undefined ? { keepLeftoverOutput: options.keepLeftoverOutput } : {}),
      ...(options.sandbox !== undefined ? { sandbox: options.sandbox } : {}),
      ...(options.label !== undefined ? { label: options.label } : {}),
      // Always abortable: a signal attached later (attachSignal) must reach the process too.
      abortable: true,
    };
    // Whether to stream is read when the request is written, not now: a listener added in the
    // same tick as spawn() (the usual `spawn(...).onOutput(...)`) then gets every byte from the
    // first, as a local process's would, instead of a proc.stream request racing the output.
    Object.defineProperty(params, 'stream', {
      enumerable: true,
      get: () => (this.streaming ? true : undefined),
    });
    this.accepted = owner.client
      .requestTracked('proc.spawn', params, (session) => {
        this.session = session;
      })
      .then(
        ({ generation, session }) => {
          this.generation = generation;
          this.session = session;
          return session;
        },
        (error: unknown) => {
          // Sent, and its answer lost with a stream whose session is kept: it may run there. The
          // re-attach says (the server names the ids it never saw); requests wait for it.
          if (error instanceof TransportLostError && error.keptMs > 0 && this.session !== undefined) {
            return this.session;
          }
          const code = (error as { code?: string }).code ?? 'ESPAWN';
          this.finish(this.failed(code, (error as Error).message ?? String(error)));
          return undefined;
        },
      );
  }

  /**
   * Output bytes the target did not stream because this host was more than a window behind
   * (they are in the result's counts and the target's spill file, not in onOutput / events).
   */
  get skippedBytes(): number {
    return this.skipped;
  }

  /** @internal output bytes accounted for by the stream (chunks received plus skipped counts). */
  get streamedBytes(): number {
    return this.accounted;
  }

  /** The result, once there is one. */
  get finalResult(): RemoteProcessResult | undefined {
    return this.final;
  }

  get isRunning(): boolean {
    return this.final === undefined;
  }

  get exitCode(): number | null {
    return this.final?.exitCode ?? null;
  }

  get sandbox(): SandboxKind {
    return this.sandboxKind;
  }

  get target(): string {
    return this.owner.client.target;
  }

  onOutput(listener: (event: OutputEvent) => void): () => void {
    (this.listeners ??= new Set()).add(listener);
    if (!this.streaming && this.isRunning) {
      this.streaming = true;
      // Not yet sent: the spawn request carries it. Sent: the server counts what came before
      // this as skipped, so streamed plus skippedBytes is still every byte.
      if (this.session !== undefined) {
        void this.request('proc.stream', { id: this.id, on: true }).catch(() => undefined);
      }
    }
    return () => this.listeners?.delete(listener);
  }

  async kill(): Promise<ProcessResult> {
    if (this.isRunning) await this.request('proc.kill', { id: this.id }).catch(() => undefined);
    return this.result;
  }

  setTimeout(ms: number | undefined): void {
    void this.request('proc.setTimeout', { id: this.id, ms: ms ?? null }).catch(() => undefined);
  }

  detachSignal(): void {
    this.signal?.removeEventListener('abort', this.onAbort);
    this.signal = undefined;
  }

  attachSignal(signal: AbortSignal): void {
    this.detachSignal();
    if (signal.aborted) {
      this.onAbort();
      return;
    }
    this.signal = signal;
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  async materializeOutput(): Promise<string | undefined> {
    const { path } = await this.request('proc.materialize', { id: this.id });
    if (path && this.combined) this.combined.path = path;
    return path ?? undefined;
  }

  lastLine(): string | undefined {
    return this.last;
  }

  /**
   * A request about this process, on the connection it runs on (waiting for the spawn to be
   * accepted first). Fails with TransportLostError when that connection is gone.
   */
  async request<M extends ProcMethod>(
    method: M,
    params: ClientRequests[M][0],
  ): Promise<ClientRequests[M][1]> {
    const session = this.generation !== undefined ? this.session : await this.accepted;
    if (session === undefined) throw new TransportLostError(this.target, 'the process never started');
    return this.owner.client.requestIn(session, method, params);
  }

  // ---- from the manager (notifications of its connection) ----

  /** @internal */
  onStarted(pid: number, cookie: string, sandbox: string): void {
    if (this.pid !== undefined) return;
    this.pid = pid;
    this.cookie = cookie;
    this.sandboxKind = sandbox as SandboxKind;
    this.resolveSpawned(pid);
    this.owner.started(this);
  }

  /** @internal */
  onChunk(stream: 'stdout' | 'stderr', data: string, skipped: number | undefined): void {
    if (skipped) {
      this.skipped += skipped;
      this.owner.logger?.debug(
        { id: this.id, skipped },
        'exec server: output not streamed (slow link); it is in the spill file',
      );
    }
    const chunk = Buffer.from(data, 'base64');
    this.accounted += chunk.length + (skipped ?? 0);
    // Credit back what was taken, in batches (one ack per 256 KiB, and at the end of a burst).
    this.unacked += chunk.length;
    if (this.unacked >= 256 * 1024) this.ack();
    else if (this.unacked === chunk.length) setImmediate(() => this.ack());
    const decoder = (this.decoders[stream] ??= new TextDecoder('utf-8', { fatal: false }));
    const text = decoder.decode(chunk, { stream: true });
    if (text.length === 0) return;
    const event: OutputEvent = { stream, text, chunk };
    for (const listener of this.listeners ?? []) {
      try {
        listener(event);
      } catch (error) {
        this.owner.logger?.error({ err: error, id: this.id }, 'output listener threw; continuing');
      }
    }
    const events = this.owner.events;
    if (events && events.listenerCount('process.output') > 0) {
      events.emit('process.output', { id: this.id, stream, text: stripAnsi(text) });
    }
  }

  /** @internal */
  onProgress(bytes: number, outputFile: string | undefined, lastLine: string | undefined): void {
    this.bytes = bytes;
    if (outputFile) this.outputFile = outputFile;
    if (lastLine !== undefined) this.last = lastLine;
    if (this.combined) {
      this.combined.totalBytes = bytes;
      if (outputFile) this.combined.path = outputFile;
    }
  }

  /** @internal */
  onExited(result: ProcessResult): void {
    if (result.pid !== undefined && this.pid === undefined && result.spawnError === undefined) {
      this.onStarted(result.pid, this.cookie, result.sandbox);
    }
    this.sandboxKind = result.sandbox;
    this.finish({ ...result, id: this.id, target: this.target });
  }

  /**
   * @internal the server it ran in is gone: killed at once without a grace period
   * (TRANSPORT_LOST), or when the grace period ended with no re-attach (SESSION_EXPIRED).
   */
  onSessionEnded(error: Error): void {
    if (!this.isRunning) return;
    const code =
      ConchError.isInstance(error) && error.code === 'SESSION_EXPIRED' ? 'SESSION_EXPIRED' : 'TRANSPORT_LOST';
    this.finish(this.failed(code, error.message));
  }

  /** @internal a re-attached server never saw its spawn: it was lost with the old stream. */
  onNeverArrived(): void {
    if (!this.isRunning) return;
    this.finish(
      this.failed(
        'TRANSPORT_LOST',
        `the connection to ${this.target} was lost before the target received this command; it never ran there. Run it again`,
      ),
    );
  }

  private ack(): void {
    if (this.unacked === 0 || this.session === undefined) return;
    this.owner.client.notifyIn(this.session, 'proc.ack', { id: this.id, bytes: this.unacked });
    this.unacked = 0;
  }

  private failed(code: string, message: string): RemoteProcessResult {
    return {
      id: this.id,
      pid: this.pid,
      exitCode: null,
      signal: null,
      timedOut: false,
      aborted: false,
      killed: false,
      reason: 'error',
      durationMs: performance.now() - this.t0,
      stdout: { ...EMPTY_SNAPSHOT, totalBytes: this.bytes },
      stderr: EMPTY_SNAPSHOT,
      ...(this.outputFile ? { outputFile: this.outputFile } : {}),
      spawnError: { code, message },
      drainTimedOut: false,
      leftRunning: [],
      sandbox: this.sandboxKind,
      target: this.target,
      ...(code === 'TRANSPORT_LOST' || code === 'SESSION_EXPIRED' ? { errorCode: code } : {}),
    };
  }

  private finish(result: RemoteProcessResult): void {
    if (this.final) return;
    this.final = result;
    this.detachSignal();
    if (this.pid === undefined) this.resolveSpawned(undefined);
    this.ack();
    this.releaseHold();
    this.owner.finished(this, result);
    this.resolveResult(result);
  }
}
