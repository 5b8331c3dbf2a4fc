import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { TextDecoder } from 'node:util';
import type { EventBus, Logger, ProcessInfo, ProcessManagerService } from '@conch/core';
import { InvalidSpawnOptionError, ProcessManagerDisposedError } from './errors.js';
import { LocalExecutor, type Executor } from './executor.js';
import { trackForExit, untrackForExit } from './exit-hook.js';
import { COOKIE_VAR, killGroupSync, killProcessTree, sweepCookie } from './kill-tree.js';
import { OutputCapture, type CaptureSnapshot } from './output-capture.js';
import { SpillSink } from './spill-sink.js';
import { stripAnsi } from './strip-ansi.js';

export interface CaptureOptions {
  /** Bytes of each stream's start kept in memory. Default 64 KiB. */
  headBytes?: number;
  /** Bytes of each stream's end kept in memory. Default 64 KiB. */
  tailBytes?: number;
  /**
   * Where the full raw output goes once it outgrows memory: one file per stream ('separate',
   * default), one file with stdout and stderr interleaved in arrival order ('combined'), or
   * nowhere ('none': the middle of a huge output is dropped).
   */
  spill?: 'separate' | 'combined' | 'none';
}

export interface SpawnOptions {
  /** Working directory. Default: the manager's cwd. */
  cwd?: string;
  /** Variables added to (or, with `undefined`, removed from) the environment. */
  env?: Record<string, string | undefined>;
  /** Start from the host's environment (default true) or from `env` alone. */
  extendEnv?: boolean;
  /** Run `command` as a script: true for /bin/sh, or a shell path. `args` become $1.. */
  shell?: boolean | string;
  /** Kill the tree after this many ms (result.timedOut). */
  timeoutMs?: number;
  /** Kill the tree when aborted (result.aborted). */
  signal?: AbortSignal;
  /** Output capture; `false` sends stdout/stderr to /dev/null. */
  capture?: CaptureOptions | false;
  /** stdin: /dev/null (default) or a pipe (`proc.stdin`). */
  stdin?: 'ignore' | 'pipe';
  /** SIGTERM -> SIGKILL grace. Default: the manager's (2000 ms). */
  killGraceMs?: number;
  /** How long after exit to wait for stdout/stderr to close (grandchildren holding them). */
  drainMs?: number;
  /** How list() and events show the command (default: command + args). */
  label?: string;
  /** Runs this spawn with another executor (e.g. a BubblewrapExecutor) than the manager's. */
  executor?: Executor;
}

export type ExitReason = 'exit' | 'timeout' | 'aborted' | 'killed' | 'error';

export interface ProcessResult {
  id: string;
  pid: number | undefined;
  /** Exit code, or null when killed by a signal or never started. */
  exitCode: number | null;
  /** The signal that ended it (e.g. 'SIGTERM'), or null. */
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  /** Ended by kill()/killAll()/dispose(). */
  killed: boolean;
  reason: ExitReason;
  durationMs: number;
  stdout: CaptureSnapshot;
  stderr: CaptureSnapshot;
  /** With spill 'combined': the file holding stdout and stderr interleaved (once large). */
  outputFile?: string;
  /** The process could not be started (ENOENT: not found, EACCES: not executable, ...). */
  spawnError?: { code: string; message: string };
  /** stdout/stderr were still held open by a descendant when the drain time ended. */
  drainTimedOut: boolean;
}

export interface OutputEvent {
  stream: 'stdout' | 'stderr';
  /** The chunk decoded as UTF-8 (streaming: characters split across chunks stay whole). */
  text: string;
  chunk: Buffer;
}

export interface ProcessManagerOptions {
  /** Where spill files go (called lazily). Default: a private temp dir removed by dispose(). */
  tempDir?: () => string;
  /** Default cwd. Default: process.cwd(). */
  cwd?: string;
  events?: EventBus;
  logger?: Logger;
  executor?: Executor;
  /** Default SIGTERM -> SIGKILL grace. Default 2000 ms. */
  killGraceMs?: number;
  /** Default drain time after exit. Default 1000 ms. */
  drainMs?: number;
  /** Finished processes kept for list()/get(). Default 50. */
  historyLimit?: number;
}

/**
 * A process the manager owns. `result` always resolves (never rejects): spawn failures, timeouts
 * and aborts are reported in it.
 */
export class ManagedProcess {
  readonly id: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly label: string;
  readonly cwd: string;
  readonly shell: boolean;
  readonly cookie: string;
  readonly startedAt: number;
  readonly stdout: OutputCapture;
  readonly stderr: OutputCapture;
  /** With spill 'combined': the sink holding both streams interleaved. */
  readonly combined: SpillSink | undefined;
  readonly result: Promise<ProcessResult>;
  /** The child's stdin when spawned with `stdin: 'pipe'`. */
  readonly stdin: Writable | null;

  private readonly child: ChildProcess;
  private readonly manager: ProcessManager;
  private readonly killGraceMs: number;
  private readonly drainMs: number;
  private readonly t0: number;
  private resolveResult!: (result: ProcessResult) => void;
  private exitCodeValue: number | null = null;
  private exitSignal: string | null = null;
  private exited = false;
  private finished = false;
  private reason: ExitReason | undefined;
  private spawnError: { code: string; message: string } | undefined;
  private drainTimedOut = false;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  private signal: AbortSignal | undefined;
  private readonly onAbort = () => void this.terminate('aborted');
  private listeners: Set<(event: OutputEvent) => void> | undefined;
  private decoders: { stdout?: TextDecoder; stderr?: TextDecoder } = {};
  private killing: Promise<void> | undefined;

  /** @internal created by ProcessManager.spawn */
  constructor(init: {
    manager: ProcessManager;
    id: string;
    command: string;
    args: readonly string[];
    label: string;
    cwd: string;
    shell: boolean;
    cookie: string;
    child: ChildProcess;
    stdout: OutputCapture;
    stderr: OutputCapture;
    combined: SpillSink | undefined;
    killGraceMs: number;
    drainMs: number;
  }) {
    this.manager = init.manager;
    this.id = init.id;
    this.command = init.command;
    this.args = init.args;
    this.label = init.label;
    this.cwd = init.cwd;
    this.shell = init.shell;
    this.cookie = init.cookie;
    this.child = init.child;
    this.stdout = init.stdout;
    this.stderr = init.stderr;
    this.combined = init.combined;
    this.killGraceMs = init.killGraceMs;
    this.drainMs = init.drainMs;
    this.startedAt = Date.now();
    this.t0 = performance.now();
    this.stdin = init.child.stdin ?? null;
    this.result = new Promise<ProcessResult>((resolvePromise) => {
      this.resolveResult = resolvePromise;
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get isRunning(): boolean {
    return !this.exited && !this.finished;
  }

  get exitCode(): number | null {
    return this.exitCodeValue;
  }

  /** Subscribes to decoded output as it arrives. Returns the unsubscribe function. */
  onOutput(listener: (event: OutputEvent) => void): () => void {
    (this.listeners ??= new Set()).add(listener);
    return () => this.listeners?.delete(listener);
  }

  /** Changes (or with undefined, clears) the timeout, counted from now. */
  setTimeout(ms: number | undefined): void {
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    this.timeoutTimer = undefined;
    if (ms !== undefined && !this.finished) {
      this.timeoutTimer = setTimeout(() => void this.terminate('timeout'), ms);
    }
  }

  /** Stops the abort signal given at spawn from killing this process (e.g. after a handoff). */
  detachSignal(): void {
    this.signal?.removeEventListener('abort', this.onAbort);
    this.signal = undefined;
  }

  /** Attaches an abort signal that kills the process tree when it fires. */
  attachSignal(signal: AbortSignal): void {
    this.detachSignal();
    if (signal.aborted) {
      void this.terminate('aborted');
      return;
    }
    this.signal = signal;
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /**
   * Kills the whole tree: SIGTERM to the process group, SIGKILL after the grace period, then a
   * sweep for escapees carrying this process's cookie. Resolves once the result is final.
   */
  async kill(): Promise<ProcessResult> {
    await this.terminate('killed');
    return this.result;
  }

  /** @internal */
  terminate(reason: ExitReason): Promise<void> {
    if (this.exited) {
      // The leader is gone (its pid may be reused): only the cookie finds what it left behind.
      sweepCookie(this.cookie);
      return this.finished ? Promise.resolve() : this.result.then(() => undefined);
    }
    this.reason ??= reason;
    this.killing ??= this.doKill();
    return this.killing;
  }

  /** @internal SIGKILL the group now and sweep (host exit). */
  killSync(): void {
    const pid = this.child.pid;
    if (pid !== undefined && !this.exited) killGroupSync(pid);
  }

  private async doKill(): Promise<void> {
    const pid = this.child.pid;
    try {
      if (pid !== undefined) await killProcessTree(pid, { graceMs: this.killGraceMs });
      sweepCookie(this.cookie);
    } catch (error) {
      this.manager.logger?.warn({ err: error, id: this.id }, 'process kill failed');
    }
    if (!this.exited && this.child.pid !== undefined) {
      // The kernel reports the exit shortly; wait for it (bounded by the drain timer).
      await Promise.race([this.result, new Promise((r) => setTimeout(r, this.drainMs + 1000).unref())]);
    }
  }

  /** @internal wiring, called once by the manager */
  start(options: { timeoutMs?: number; signal?: AbortSignal }): void {
    const child = this.child;
    this.pipe(child.stdout, this.stdout, 'stdout');
    this.pipe(child.stderr, this.stderr, 'stderr');
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (child.pid === undefined) {
        this.spawnError = { code: error.code ?? 'ESPAWN', message: error.message };
        this.reason = 'error';
        this.exited = true;
        void this.finish();
      } else {
        this.manager.logger?.warn({ err: error, id: this.id }, 'child process error');
      }
    });
    child.once('exit', (code, signal) => {
      this.exited = true;
      this.exitCodeValue = code;
      this.exitSignal = signal;
      this.drainTimer = setTimeout(() => {
        this.drainTimedOut = true;
        child.stdout?.destroy();
        child.stderr?.destroy();
        void this.finish();
      }, this.drainMs);
    });
    child.once('close', () => void this.finish());
    if (options.timeoutMs !== undefined) this.setTimeout(options.timeoutMs);
    if (options.signal) this.attachSignal(options.signal);
  }

  private pipe(stream: Readable | null | undefined, capture: OutputCapture, name: 'stdout' | 'stderr'): void {
    if (!stream) return;
    const events = this.manager.events;
    stream.on('data', (chunk: Buffer) => {
      if (!capture.write(chunk)) {
        stream.pause();
        capture.onDrain(() => stream.resume());
      }
      if (this.listeners?.size || (events && events.listenerCount('process.output') > 0)) {
        this.deliver(name, chunk);
      }
    });
    stream.on('error', () => {
      // destroyed after the drain time, or EPIPE: the capture keeps what arrived
    });
  }

  private deliver(name: 'stdout' | 'stderr', chunk: Buffer): void {
    const decoder = (this.decoders[name] ??= new TextDecoder('utf-8', { fatal: false }));
    const text = decoder.decode(chunk, { stream: true });
    if (text.length === 0) return;
    const event: OutputEvent = { stream: name, text, chunk };
    if (this.listeners) {
      for (const listener of this.listeners) {
        try {
          listener(event);
        } catch (error) {
          this.manager.logger?.error({ err: error, id: this.id }, 'output listener threw; continuing');
        }
      }
    }
    const events = this.manager.events;
    if (events && events.listenerCount('process.output') > 0) {
      events.emit('process.output', { id: this.id, stream: name, text: stripAnsi(text) });
    }
  }

  private async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    this.detachSignal();
    const sinks = new Set([this.stdout.sink, this.stderr.sink, this.combined]);
    const stdout = this.stdout.snapshot();
    const stderr = this.stderr.snapshot();
    // The result holds the text now; free the buffers (finished processes stay listed).
    this.stdout.release();
    this.stderr.release();
    if (this.combined && (stdout.truncated || stderr.truncated)) this.combined.materialize();
    await Promise.all([...sinks].map((sink) => sink?.end()));
    const reason: ExitReason = this.reason ?? 'exit';
    const result: ProcessResult = {
      id: this.id,
      pid: this.child.pid,
      exitCode: this.exitCodeValue,
      signal: this.exitSignal,
      timedOut: reason === 'timeout',
      aborted: reason === 'aborted',
      killed: reason === 'killed',
      reason,
      durationMs: performance.now() - this.t0,
      stdout,
      stderr,
      ...(this.combined?.path ? { outputFile: this.combined.path } : {}),
      ...(this.spawnError ? { spawnError: this.spawnError } : {}),
      drainTimedOut: this.drainTimedOut,
    };
    this.manager.onFinished(this, result);
    this.resolveResult(result);
  }
}

/**
 * Owns every child process of one registry. Each child leads its own process group and carries
 * an environment cookie (`CONCH_PROC_COOKIE=<manager>-<id>`), so kill() reaches the whole tree,
 * escapees included; dispose() and host exit leave nothing running.
 */
export class ProcessManager implements ProcessManagerService {
  /** Random id; every cookie of this manager starts with it. */
  readonly id: string;
  readonly events: EventBus | undefined;
  readonly logger: Logger | undefined;
  readonly executor: Executor;
  private readonly options: ProcessManagerOptions;
  private readonly processes = new Map<string, ManagedProcess>();
  private readonly live = new Set<ManagedProcess>();
  private counter = 0;
  private finishedCount = 0;
  private ownTempDir: string | undefined;
  private disposing: Promise<void> | undefined;

  constructor(options: ProcessManagerOptions = {}) {
    this.options = options;
    this.id = randomBytes(4).toString('hex');
    this.events = options.events;
    this.logger = options.logger;
    this.executor = options.executor ?? new LocalExecutor();
    trackForExit(this);
  }

  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  /** The directory spill files go to. */
  tempDir(): string {
    if (this.options.tempDir) return this.options.tempDir();
    this.ownTempDir ??= mkdtempSync(join(tmpdir(), 'conch-proc-'));
    return this.ownTempDir;
  }

  /** The cookie prefix every process of this manager carries. */
  get cookiePrefix(): string {
    return `${this.id}-`;
  }

  spawn(command: string, args: readonly string[] = [], options: SpawnOptions = {}): ManagedProcess {
    if (this.disposing) throw new ProcessManagerDisposedError();
    if (typeof command !== 'string' || command.length === 0) {
      throw new InvalidSpawnOptionError('command', 'a non-empty string', command);
    }
    if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) {
      throw new InvalidSpawnOptionError('timeoutMs', 'a positive number of milliseconds', options.timeoutMs);
    }
    const id = `p${++this.counter}`;
    const cookie = `${this.id}-${id}`;
    const cwd = resolve(this.options.cwd ?? process.cwd(), options.cwd ?? '.');
    // Node's spawn enumerates the env with for...in, prototype included, and skips undefined
    // values: layering the additions over the live process.env avoids copying it on every spawn.
    const env: Record<string, string | undefined> =
      options.extendEnv === false ? {} : (Object.create(process.env) as Record<string, string | undefined>);
    if (options.env) {
      for (const key in options.env) env[key] = options.env[key];
    }
    env[COOKIE_VAR] = cookie;

    const shellPath = options.shell === true ? '/bin/sh' : options.shell || undefined;
    const file = shellPath ?? command;
    const argv = shellPath ? ['-c', command, shellPath, ...args] : [...args];
    const captureOpt = options.capture;
    const capture = captureOpt !== false;
    const headBytes = (captureOpt && captureOpt.headBytes) || 64 * 1024;
    const tailBytes = (captureOpt && captureOpt.tailBytes) || 64 * 1024;
    const spill = (captureOpt && captureOpt.spill) || 'separate';
    const dir = () => this.tempDir();
    const pendingLimit = headBytes + tailBytes;
    const combined =
      spill === 'combined' ? new SpillSink({ dir, name: `${cookie}.out`, pendingLimit }) : undefined;
    const sinkFor = (name: string) =>
      spill === 'combined'
        ? combined
        : spill === 'separate'
          ? new SpillSink({ dir, name: `${cookie}.${name}`, pendingLimit })
          : undefined;
    const stdoutCapture = new OutputCapture({
      headBytes,
      tailBytes,
      sink: capture ? sinkFor('stdout') : undefined,
    });
    const stderrCapture = new OutputCapture({
      headBytes,
      tailBytes,
      sink: capture ? sinkFor('stderr') : undefined,
    });

    const child = (options.executor ?? this.executor).spawn({
      file,
      args: argv,
      cwd,
      env,
      stdin: options.stdin ?? 'ignore',
      capture,
    });
    const label = options.label ?? (args.length ? `${command} ${args.join(' ')}` : command);
    const proc = new ManagedProcess({
      manager: this,
      id,
      command,
      args,
      label,
      cwd,
      shell: shellPath !== undefined,
      cookie,
      child,
      stdout: stdoutCapture,
      stderr: stderrCapture,
      combined,
      killGraceMs: options.killGraceMs ?? this.options.killGraceMs ?? 2000,
      drainMs: options.drainMs ?? this.options.drainMs ?? 1000,
    });
    this.processes.set(id, proc);
    this.live.add(proc);
    proc.start({
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (this.events && this.events.listenerCount('process.started') > 0) {
      this.events.emit('process.started', {
        id,
        pid: child.pid,
        command: label,
        args,
        cwd,
        shell: shellPath !== undefined,
        startedAt: proc.startedAt,
      });
    }
    return proc;
  }

  get(id: string): ManagedProcess | undefined {
    return this.processes.get(id);
  }

  list(): ProcessInfo[] {
    return [...this.processes.values()].map((p) => ({
      id: p.id,
      command: p.label,
      args: p.args,
      pid: p.pid,
      startedAt: p.startedAt,
      isRunning: p.isRunning,
      exitCode: p.exitCode,
    }));
  }

  /** Processes still running. */
  running(): ManagedProcess[] {
    return [...this.live];
  }

  async kill(id: string): Promise<void> {
    const proc = this.processes.get(id);
    if (!proc) return;
    await proc.kill();
  }

  async killAll(): Promise<void> {
    await Promise.all([...this.processes.values()].map((p) => p.kill()));
    sweepCookie({ prefix: this.cookiePrefix });
  }

  /** Kills every process (and escapee) this manager started; removes its own temp dir. */
  dispose(): Promise<void> {
    this.disposing ??= this.doDispose();
    return this.disposing;
  }

  /** @internal host exit: SIGKILL everything synchronously. */
  killAllSync(): void {
    for (const proc of this.live) proc.killSync();
    sweepCookie({ prefix: this.cookiePrefix });
  }

  /** @internal */
  onFinished(proc: ManagedProcess, result: ProcessResult): void {
    this.live.delete(proc);
    this.finishedCount++;
    if (this.events && this.events.listenerCount('process.exited') > 0) {
      this.events.emit('process.exited', {
        id: proc.id,
        exitCode: result.exitCode,
        signal: result.signal,
        durationMs: result.durationMs,
        reason: result.reason,
      });
    }
    const limit = this.options.historyLimit ?? 50;
    if (this.processes.size > limit) {
      for (const [id, p] of this.processes) {
        if (this.processes.size <= limit) break;
        if (!p.isRunning) this.processes.delete(id);
      }
    }
  }

  private async doDispose(): Promise<void> {
    try {
      await Promise.all([...this.live].map((p) => p.terminate('killed')));
      sweepCookie({ prefix: this.cookiePrefix });
      await Promise.all([...this.live].map((p) => p.result));
    } finally {
      untrackForExit(this);
      if (this.ownTempDir) rmSync(this.ownTempDir, { recursive: true, force: true });
    }
  }
}
