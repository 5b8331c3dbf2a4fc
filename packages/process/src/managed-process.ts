import './events.js';
import type { Readable, Writable } from 'node:stream';
import { TextDecoder } from 'node:util';
import type { EventBus, Logger } from '@conch/core';
import type { SandboxKind } from '@conch/sandbox';
import {
  findCookiePids,
  groupExists,
  killGroupSync,
  killProcessTree,
  pidAlive,
  processCommand,
  sweepCookieUntilGone,
  zombieExit,
} from './kill-tree.js';
import { InvalidSpawnOptionError } from './errors.js';
import { MAX_TIMEOUT_MS } from './spawn-options.js';
import { killGraceFromSeconds, seedExitCode, type ManagedProcessInfo } from './pai-api.js';
import { toProcessInfo } from './process-events.js';
import type { OutputCapture } from './output-capture.js';
import type { ExitReason, LeftoverProcess, OutputEvent, ProcessResult } from './process-result.js';
import type { SpawnedChild } from './spawned-child.js';
import type { SandboxActivity } from './sandbox-activity.js';
import type { ResourceLimitHit } from './sandbox-limits.js';
import type { SpillReport, SpillSink } from './spill-sink.js';
import { cleanForModel, stripAnsi } from './strip-ansi.js';
import { decodeUtf8 } from './utf8.js';

/**
 * Drain rounds (of drainMs each) a command whose processes are all gone may wait for its pipes to
 * close: a bound for a pipe held by a process conch cannot find (an `env -i setsid` escapee).
 */
const MAX_DRAIN_ROUNDS = 30;

/**
 * How long an aborted process's tree gets between SIGTERM and SIGKILL: enough for a program that
 * handles SIGTERM to clean up (git removes its index.lock), short enough that a cancel returns
 * within 100 ms with the tree gone.
 */
export const ABORT_GRACE_MS = 50;
/** What a ManagedProcess reports to whoever owns it (its ProcessManager). */
export interface ProcessOwner {
  readonly events: EventBus | undefined;
  readonly logger: Logger | undefined;
  /** The process started (pid known) or could not be started: once, before any output event. */
  started(proc: ManagedProcess): void;
  /** The final result, once, just before `proc.result` resolves. */
  finished(proc: ManagedProcess, result: ProcessResult): void;
}

export interface ManagedProcessInit {
  owner: ProcessOwner;
  id: string;
  command: string;
  args: readonly string[];
  label: string;
  cwd: string;
  shell: boolean;
  cookie: string;
  child: SpawnedChild;
  stdout: OutputCapture;
  stderr: OutputCapture;
  combined: SpillSink | undefined;
  killGraceMs: number;
  drainMs: number;
  keepLeftoverOutput: boolean;
  forceFile: boolean;
  /** Which sandbox really applied (known once the process started). */
  sandbox: () => SandboxKind;
  /** What the sandbox's guard saw this spawn do (asked once, when the result is made). */
  sandboxActivity?: () => Promise<SandboxActivity | undefined>;
  /**
   * Whether it ran into its sandbox's memory limit (sandbox-limits.ts), asked once when the result
   * is made, for a command that ended by itself.
   */
  resourceCheck?: (outcome: {
    exitCode: number | null;
    signal: string | null;
    text: string;
  }) => ResourceLimitHit | undefined;
}

/** Bytes of the latest output kept for lastLine() once the captures released their buffers. */
const RECENT_BYTES = 1024;

/**
 * A process the manager owns. `result` always resolves (never rejects): spawn failures, timeouts
 * and aborts are reported in it.
 */
export class ManagedProcess {
  readonly id: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly shell: boolean;
  readonly cookie: string;
  readonly startedAt: number;
  readonly stdout: OutputCapture;
  readonly stderr: OutputCapture;
  /** With spill 'combined': the sink holding both streams interleaved. */
  readonly combined: SpillSink | undefined;
  readonly result: Promise<ProcessResult>;
  /** Resolves with the pid once the process runs, or undefined if it could not be started. */
  readonly spawned: Promise<number | undefined>;
  /** The child's stdin when spawned with `stdin: 'pipe'` (writable at once, before the pid is known). */
  readonly stdin: Writable | null;

  /** Set once a caller changed the timeout: the spawn-time limit then no longer applies. */
  private timeoutChanged = false;
  private readonly child: SpawnedChild;
  private readonly owner: ProcessOwner;
  private labelText: string;
  private readonly killGraceMs: number;
  private readonly drainMs: number;
  private readonly keepLeftoverOutput: boolean;
  private readonly forceFile: boolean;
  private readonly sandboxOf: () => SandboxKind;
  private readonly sandboxActivity: (() => Promise<SandboxActivity | undefined>) | undefined;
  private readonly resourceCheck: ManagedProcessInit['resourceCheck'];
  private readonly t0: number;
  private resolveResult!: (result: ProcessResult) => void;
  private resolveSpawned!: (pid: number | undefined) => void;
  /** Resolves at the child's 'exit' (what a kill waits for: the result waits for the kill). */
  private readonly exitSeen: Promise<void>;
  private resolveExitSeen!: () => void;
  private exitCodeValue: number | null = null;
  private exitSignalValue: string | null = null;
  private exited = false;
  private finished = false;
  private reported = false;
  /** It started (a sandboxed child that ended at once may have no host pid). */
  private ran = false;
  private reason: ExitReason | undefined;
  private spawnError: { code: string; message: string } | undefined;
  private drainTimedOut = false;
  private timeoutTimer: NodeJS.Timeout | undefined;
  /** The call's limit counted from spawn(): asks the starter whether a child with no pid is a fault. */
  private startDeadline: NodeJS.Timeout | undefined;
  /** Stopped because its output reached a spill limit (capture.onFileLimit 'stop'). */
  private limitStopped = false;
  private drainTimer: NodeJS.Timeout | undefined;
  private signal: AbortSignal | undefined;
  /** An abort is the caller's cancel: SIGTERM, then SIGKILL after ABORT_GRACE_MS (not killGraceMs). */
  private readonly onAbort = () => void this.terminate('aborted', ABORT_GRACE_MS);
  private listeners: Set<(event: OutputEvent) => void> | undefined;
  private decoders: { stdout?: TextDecoder; stderr?: TextDecoder } = {};
  /** The kill under way (doKill, or the cookie sweep of a terminate() after the leader's exit). */
  private killing: Promise<void> | undefined;
  private readonly wired = new Set<Readable>();
  /** Output pipes not closed yet. */
  private readonly open = new Set<Readable>();
  /** Output pipes kept open after the result (keepLeftoverOutput): leftovers write into them. */
  private lingering: Set<Readable> | undefined;
  private lingerEnded: Promise<void> | undefined;
  private resolveLingerEnded: (() => void) | undefined;
  private recent: Buffer | undefined;

  /** @internal created by ProcessManager.spawn */
  constructor(init: ManagedProcessInit) {
    this.owner = init.owner;
    this.id = init.id;
    this.command = init.command;
    this.args = init.args;
    this.labelText = init.label;
    this.cwd = init.cwd;
    this.shell = init.shell;
    this.cookie = init.cookie;
    this.child = init.child;
    this.stdout = init.stdout;
    this.stderr = init.stderr;
    this.combined = init.combined;
    this.killGraceMs = init.killGraceMs;
    this.drainMs = init.drainMs;
    this.keepLeftoverOutput = init.keepLeftoverOutput;
    this.forceFile = init.forceFile;
    this.sandboxOf = init.sandbox;
    this.sandboxActivity = init.sandboxActivity;
    this.resourceCheck = init.resourceCheck;
    this.startedAt = Date.now();
    this.t0 = performance.now();
    this.stdin = init.child.stdin ?? null;
    this.result = new Promise<ProcessResult>((resolvePromise) => {
      this.resolveResult = resolvePromise;
    });
    this.spawned = new Promise<number | undefined>((resolvePromise) => {
      this.resolveSpawned = resolvePromise;
    });
    this.exitSeen = new Promise<void>((resolvePromise) => {
      this.resolveExitSeen = resolvePromise;
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** How list() and events show the process (the spawn option `label`, or command + args). */
  get label(): string {
    return this.labelText;
  }

  /**
   * Changes how list() shows the process from now on, for a state known only after spawn (a
   * browser's CDP address once it answers). Events already emitted keep the old label.
   */
  setLabel(label: string): void {
    if (typeof label !== 'string' || label.trim().length === 0 || label.includes('\0')) {
      throw new InvalidSpawnOptionError('label', 'a non-empty string without NUL bytes', label);
    }
    this.labelText = label;
  }

  get isRunning(): boolean {
    return !this.exited && !this.finished;
  }

  get exitCode(): number | null {
    return this.exitCodeValue;
  }

  /** The signal that ended the process ('SIGTERM', 'SIGKILL', …), null while running or after a plain exit. */
  get exitSignal(): string | null {
    return this.exitSignalValue;
  }

  // ---- pai's ManagedProcess names (seed 002) ----

  /** pai's name of `id`. */
  get process_id(): string {
    return this.id;
  }

  /** pai's `started_at`: when spawn() was called, as a Date. */
  get started_at(): Date {
    return new Date(this.startedAt);
  }

  /** pai's name of `isRunning`. */
  get is_running(): boolean {
    return this.isRunning;
  }

  /**
   * pai's `exit_code` (asyncio's `returncode`): the exit status, `-N` when signal N ended the process
   * (a kill: -15 after SIGTERM, -9 after SIGKILL); null while running or when it never started.
   */
  get exit_code(): number | null {
    return seedExitCode(this.exitCodeValue, this.exitSignalValue);
  }

  /** pai's `to_info()`: this process as `list()` reports it. */
  to_info(): ManagedProcessInfo {
    return toProcessInfo(this);
  }

  /** Which sandbox the process runs in ('none' until it started, and where bwrap was unavailable). */
  get sandbox(): SandboxKind {
    return this.sandboxOf();
  }

  /** Subscribes to decoded output as it arrives. Returns the unsubscribe function. */
  onOutput(listener: (event: OutputEvent) => void): () => void {
    (this.listeners ??= new Set()).add(listener);
    return () => this.listeners?.delete(listener);
  }

  /**
   * Changes (or with undefined, clears) the timeout, counted from now. Throws
   * InvalidSpawnOptionError for a value that is not a positive number of ms up to MAX_TIMEOUT_MS
   * (node's timers cannot wait longer: a larger delay would fire at once).
   */
  setTimeout(ms: number | undefined): void {
    if (ms !== undefined && !(ms > 0 && ms <= MAX_TIMEOUT_MS)) {
      throw new InvalidSpawnOptionError(
        'timeoutMs',
        `a positive number of milliseconds, at most ${MAX_TIMEOUT_MS} (node's timer limit, ~24.8 days)`,
        ms,
      );
    }
    this.timeoutChanged = true;
    this.armTimeout(ms);
  }

  private armTimeout(ms: number | undefined): void {
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    this.timeoutTimer = undefined;
    if (ms !== undefined && !this.finished) {
      this.timeoutTimer = setTimeout(() => {
        // The limit passed after the command had ended on its own: a zombie whose exit is not
        // reported yet (its supervisor stopped before it could reap it). It did not time out; its
        // exit ends the call: its supervisor's report, or, from a stalled one, the health check's
        // (told now, as for a spawn past its limit, so the call still comes back about then).
        const pid = this.child.pid;
        if (!this.exited && pid !== undefined && zombieExit(pid)) {
          this.child.overdue?.();
          return;
        }
        void this.terminate('timeout');
      }, ms);
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
      void this.terminate('aborted', ABORT_GRACE_MS);
      return;
    }
    this.signal = signal;
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  /**
   * Kills the whole tree: SIGTERM to the process group, SIGKILL after the grace period, then a
   * sweep for escapees carrying this process's cookie. Resolves once the result is final. After
   * the process ended, kills what it left running (cookie sweep).
   *
   * `timeout`: seconds between SIGTERM and SIGKILL (pai's `kill(timeout)`); default the spawn's
   * `killGraceMs` (else the manager's, 2 s). A kill already under way keeps its own grace.
   */
  async kill(timeout?: number): Promise<ProcessResult> {
    const graceMs = killGraceFromSeconds('kill()', timeout);
    await this.terminate('killed', graceMs);
    return this.result;
  }

  /**
   * Writes the output to a file now, whatever its size (the combined stream with spill 'combined',
   * else stdout's), and resolves with its path once every byte so far is in it. Undefined when
   * nothing is kept (spill 'none', capture false).
   */
  async materializeOutput(): Promise<string | undefined> {
    const sink = this.combined ?? this.stdout.sink;
    if (!sink) return undefined;
    const path = sink.materialize();
    if (path === undefined) return undefined; // no directory could take it: see spillReport()
    await sink.flushed();
    return path;
  }

  /**
   * What the output file holds now (the combined stream's with spill 'combined', else stdout's):
   * bytes kept of bytes produced, and why they differ. Undefined when nothing is kept.
   */
  spillReport(): SpillReport | undefined {
    return (this.combined ?? this.stdout.sink)?.report();
  }

  /**
   * @internal A spill limit was reached and the spawn asked to stop there (capture.onFileLimit
   * 'stop'): kills the tree; the result's spill report says `stopped`.
   */
  stopAtSpillLimit(): void {
    if (this.limitStopped || this.finished) return;
    this.limitStopped = true;
    for (const sink of this.sinks()) sink.markStopped();
    void this.terminate('killed');
  }

  /** The last non-empty output line so far (ANSI stripped, at most 200 characters). */
  lastLine(): string | undefined {
    const buffers = this.recent
      ? [this.recent]
      : [this.stdout, this.stderr].filter((c) => c.totalBytes > 0).map((c) => recentOf(c));
    for (const buf of buffers) {
      const lines = cleanForModel(decodeUtf8(buf)).split('\n');
      for (let i = lines.length - 1; i >= 0; i--) {
        const line = lines[i]!;
        if (line.trim().length > 0) return line.length > 200 ? `${line.slice(0, 200)}…` : line;
      }
    }
    return undefined;
  }

  /** Resolves once output pipes kept open for leftovers are closed (at once when none are). */
  lingeringClosed(): Promise<void> {
    return this.lingerEnded ?? Promise.resolve();
  }

  /** Destroys output pipes kept open for leftovers. */
  closeLingering(): void {
    for (const stream of this.lingering ?? []) stream.destroy();
  }

  /** @internal `graceMs`: SIGTERM -> SIGKILL grace of this kill (default: the spawn's). */
  terminate(reason: ExitReason, graceMs?: number): Promise<void> {
    if (this.exited) {
      // The leader is gone (its pid may be reused): only the cookie finds what it left behind.
      const swept = sweepCookieUntilGone(this.cookie);
      if (!this.finished)
        this.killing ??= swept.then(
          () => undefined,
          () => undefined,
        );
      return this.finished
        ? swept.then(() => undefined)
        : Promise.all([swept, this.result]).then(() => undefined);
    }
    this.reason ??= reason;
    this.killing ??= this.doKill(graceMs ?? this.killGraceMs);
    return this.killing;
  }

  /** @internal SIGKILL the group now (host exit). */
  killSync(): void {
    const pid = this.child.pid;
    if (pid !== undefined && !this.exited) killGroupSync(pid);
  }

  private async doKill(graceMs: number): Promise<void> {
    // Through the supervisor the pid arrives a moment after spawn(): kill once it is known.
    const pid = this.child.pid ?? (await this.spawned);
    try {
      if (pid !== undefined && !this.exited) await killProcessTree(pid, { graceMs });
      await sweepCookieUntilGone(this.cookie);
    } catch (error) {
      this.owner.logger?.warn({ err: error, id: this.id }, 'process kill failed');
    }
    if (!this.exited && pid !== undefined) {
      // The kernel reports the exit shortly (through a supervisor, its message): wait for it,
      // bounded by the drain timer. Not for the result, which waits for this kill (finish()).
      await Promise.race([this.exitSeen, new Promise((r) => setTimeout(r, this.drainMs + 1000).unref())]);
      // Killed, and still not reported: a zombie means the one who must reap it is not doing so (a
      // stopped supervisor), which it is told now rather than at its own next check.
      if (!this.exited && zombieExit(pid)) this.child.overdue?.();
    }
  }

  /** @internal wiring, called once by the manager */
  start(options: { timeoutMs?: number; signal?: AbortSignal }): void {
    const child = this.child;
    const wire = () => {
      this.pipe(child.stdout, this.stdout, 'stdout');
      this.pipe(child.stderr, this.stderr, 'stderr');
    };
    wire(); // a ChildProcess has its pipes already; a supervised child gets them by 'spawn'
    // ... or later, when its supervisor held them (output read there comes as 'output' first).
    child.on('pipe', wire);
    child.on('output', (name, chunk) => this.take(name, chunk));
    child.once('spawn', () => {
      this.ran = true;
      if (this.startDeadline) clearTimeout(this.startDeadline);
      this.startDeadline = undefined;
      wire();
      this.resolveSpawned(child.pid);
      this.report();
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (child.pid === undefined) {
        this.spawnError = { code: error.code ?? 'ESPAWN', message: error.message };
        this.reason = 'error';
        this.exited = true;
        this.resolveSpawned(undefined);
        this.resolveExitSeen();
        this.report();
        void this.finish();
      } else {
        this.owner.logger?.warn({ err: error, id: this.id }, 'child process error');
      }
    });
    child.once('exit', (code, signal) => {
      this.exited = true;
      this.resolveExitSeen();
      this.exitCodeValue = code;
      this.exitSignalValue = signal;
      this.armDrain();
    });
    child.once('close', () => void this.finish());
    if (options.timeoutMs !== undefined) {
      // The limit counts from the moment the child runs, not from the call: a supervisor still
      // starting (the first spawn of a registry) must not eat into the command's time.
      const ms = options.timeoutMs;
      void this.spawned.then((pid) => {
        if (pid !== undefined && !this.timeoutChanged) this.armTimeout(ms);
      });
      // But a supervisor that does not answer must not hold the call past its limit: once the
      // limit has passed since the call, a child still without a pid asks its starter, who fails
      // it at once if its supervisor is stalled (SIGSTOP, a hang) and lets it wait while the
      // supervisor progresses (still starting, answering pings).
      if (child.overdue) {
        this.startDeadline = setTimeout(() => {
          this.startDeadline = undefined;
          if (!this.ran && !this.finished && !this.exited) child.overdue?.();
        }, ms);
      }
    }
    if (options.signal) this.attachSignal(options.signal);
  }

  /**
   * After the exit, the output pipes get `drainMs` to close. When they have not, the evidence
   * decides, not the clock: a process of this command still alive (by its cookie, or in its
   * process group) may hold them, and then the drain is over (`drainTimedOut`; the result lists the
   * leftovers). With none alive, nothing can write any more: the rest of the output and its end are
   * already in the kernel's buffers (or the pipes are still on their way from the supervisor), and
   * only this process's event loop is behind — under a burst of calls on a busy machine that is
   * seconds. Then the drain waits on, up to MAX_DRAIN_ROUNDS, rather than drop output.
   */
  private armDrain(round = 0): void {
    this.drainTimer = setTimeout(() => {
      if (this.finished) return;
      if (round < MAX_DRAIN_ROUNDS && !this.outputMayStillBeHeld()) {
        this.armDrain(round + 1);
        return;
      }
      this.drainTimedOut = true;
      if (!this.keepLeftoverOutput) {
        this.child.stdout?.destroy();
        this.child.stderr?.destroy();
      }
      void this.finish();
    }, this.drainMs);
  }

  /** Whether a process of this command may still hold its output pipes (see armDrain). */
  private outputMayStillBeHeld(): boolean {
    const pid = this.child.pid;
    if (pid !== undefined && groupExists(pid)) return true;
    return findCookiePids({ cookie: this.cookie }).some((p) => pidAlive(p));
  }

  private report(): void {
    if (this.reported) return;
    this.reported = true;
    this.owner.started(this);
  }

  private pipe(stream: Readable | null | undefined, capture: OutputCapture, name: 'stdout' | 'stderr'): void {
    if (!stream || this.wired.has(stream)) return;
    this.wired.add(stream);
    this.open.add(stream);
    stream.on('data', (chunk: Buffer) => {
      if (!this.take(name, chunk, capture)) {
        stream.pause();
        capture.onDrain(() => stream.resume());
      }
    });
    stream.on('error', () => {
      // destroyed after the drain time, or EPIPE: the capture keeps what arrived
    });
    stream.once('close', () => {
      this.open.delete(stream);
      const lingering = this.lingering;
      if (lingering?.delete(stream) && lingering.size === 0)
        void this.endSinks().then(this.resolveLingerEnded);
    });
  }

  /**
   * One chunk of a stream's output: captured, kept for lastLine(), delivered to listeners. False
   * when the capture asks the writer to wait (its sink is behind).
   */
  private take(
    name: 'stdout' | 'stderr',
    chunk: Buffer,
    capture = name === 'stdout' ? this.stdout : this.stderr,
  ): boolean {
    let more = true;
    // Nothing may throw here: an exception in a stream handler is uncaught and ends the host.
    // (The capture and its sink never throw; this is the last line of defence.)
    try {
      more = capture.write(chunk);
    } catch (error) {
      this.owner.logger?.error({ err: error, id: this.id }, 'output capture failed; output dropped');
    }
    if (this.recent) this.keepRecent(chunk);
    const events = this.owner.events;
    if (this.listeners?.size || (events && events.listenerCount('process.output') > 0)) {
      this.deliver(name, chunk);
    }
    return more;
  }

  private keepRecent(chunk: Buffer): void {
    const joined = Buffer.concat([this.recent!, chunk.subarray(Math.max(0, chunk.length - RECENT_BYTES))]);
    this.recent = joined.subarray(Math.max(0, joined.length - RECENT_BYTES));
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
          this.owner.logger?.error({ err: error, id: this.id }, 'output listener threw; continuing');
        }
      }
    }
    const events = this.owner.events;
    if (events && events.listenerCount('process.output') > 0) {
      events.emit('process.output', { id: this.id, stream: name, text: stripAnsi(text) });
    }
  }

  private sinks(): SpillSink[] {
    return [...new Set([this.stdout.sink, this.stderr.sink, this.combined])].filter(
      (sink): sink is SpillSink => sink !== undefined,
    );
  }

  private endSinks(): Promise<void> {
    return Promise.all(this.sinks().map((sink) => sink.end())).then(() => undefined);
  }

  /**
   * Processes of this cookie still alive. A full /proc scan costs ~25 µs per process on the
   * machine, too much for every command, so it runs only on evidence: the pipes were held open
   * past the drain time, or the process group still has a member (`kill(-pgid, 0)`, one syscall).
   * A `setsid` escapee that also closed its output is not seen here; kill(), dispose() and the
   * supervisor's sweeps still find it by its cookie.
   */
  private leftovers(): LeftoverProcess[] {
    const pid = this.child.pid;
    if (!this.ran || this.reason !== undefined) return [];
    // A sandboxed supervisor tells whether the group had members when it reaped the child (the
    // host may not know the pid of a child that ended at once in its own pid namespace).
    const groupAlive = this.child.groupAliveAtExit ?? (pid !== undefined && groupExists(pid));
    if (!this.drainTimedOut && !groupAlive) return [];
    const out: LeftoverProcess[] = [];
    for (const leftover of findCookiePids({ cookie: this.cookie })) {
      if (!pidAlive(leftover)) continue;
      out.push({ pid: leftover, command: processCommand(leftover) ?? '' });
    }
    return out;
  }

  private async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    if (this.startDeadline) clearTimeout(this.startDeadline);
    this.detachSignal();
    // A kill under way is finished before the result is given: the pipes close as soon as the
    // processes holding them have died, but a process with its output elsewhere (a child that
    // ignores SIGTERM, an escapee in its own session, one caught between closing its files and
    // becoming a zombie) lives on until the kill's SIGKILL and cookie sweep. Bounded: doKill ends
    // after the grace, a second of SIGKILLs and the sweep's second.
    await this.killing;
    if (this.forceFile) for (const sink of this.sinks()) sink.materialize();
    const stdout = this.stdout.snapshot();
    const stderr = this.stderr.snapshot();
    if (this.keepLeftoverOutput) {
      // Seed lastLine() before the buffers go: output after this point updates it chunk by chunk.
      const last = [this.stdout, this.stderr].filter((c) => c.totalBytes > 0).map((c) => recentOf(c));
      this.recent = last[0] ?? Buffer.alloc(0);
    }
    // The result holds the text now; free the buffers (finished processes stay listed).
    this.stdout.release();
    this.stderr.release();
    if (this.combined && (stdout.truncated || stderr.truncated)) this.combined.materialize();
    const leftRunning = this.leftovers();
    if (this.keepLeftoverOutput && this.drainTimedOut && this.open.size > 0) {
      // Leftovers hold the pipes: keep draining them into the same sinks; end those once closed.
      this.lingering = new Set(this.open);
      this.lingerEnded = new Promise<void>((resolve) => (this.resolveLingerEnded = resolve));
    } else {
      await this.endSinks();
    }
    // What each file really holds, once written (exact after endSinks): said only when it is not
    // every byte where it was asked for.
    const spillOf = (sink: SpillSink | undefined) => {
      const report = sink?.report();
      return report && (report.problem !== undefined || report.relocated) ? report : undefined;
    };
    const stdoutSpill = spillOf(this.stdout.sink);
    const stderrSpill = spillOf(this.stderr.sink);
    if (stdoutSpill) stdout.spill = stdoutSpill;
    if (stderrSpill) stderr.spill = stderrSpill;
    const combinedSpill = spillOf(this.combined);
    const reason: ExitReason = this.reason ?? 'exit';
    // The guard's events come on their own channel; the ones this command caused were sent before
    // the calls they answer returned, so they are here by the time its pipes have closed.
    const activity = await this.sandboxActivity?.().catch(() => undefined);
    // A limit it ran into: the process-limit watch's report, else (only for a command that ended
    // by itself: a kill of conch's own is no memory limit) the memory evidence.
    const resourceLimit =
      this.child.limitHit ??
      (reason === 'exit' && this.ran
        ? this.resourceCheck?.({
            exitCode: this.exitCodeValue,
            signal: this.exitSignalValue,
            // The end of each stream: where a program reports the failure that ended it.
            text: `${(stderr.tail || stderr.head).slice(-2000)}\n${(stdout.tail || stdout.head).slice(-1000)}`,
          })
        : undefined);
    const result: ProcessResult = {
      id: this.id,
      pid: this.child.pid,
      exitCode: this.exitCodeValue,
      signal: this.exitSignalValue,
      timedOut: reason === 'timeout',
      aborted: reason === 'aborted',
      killed: reason === 'killed',
      reason,
      durationMs: performance.now() - this.t0,
      stdout,
      stderr,
      ...(this.combined?.path ? { outputFile: this.combined.path } : {}),
      ...(combinedSpill ? { spill: combinedSpill } : {}),
      ...(this.spawnError ? { spawnError: this.spawnError } : {}),
      drainTimedOut: this.drainTimedOut,
      leftRunning,
      sandbox: this.sandboxOf(),
      ...(this.child.lostReason ? { supervisorLost: this.child.lostReason } : {}),
      ...(this.child.lostReason && this.child.lostUnresponsive
        ? { supervisorUnresponsive: true as const }
        : {}),
      // Not when conch had begun to end it (a timeout, an abort, a kill): that may be what it died of.
      ...(this.child.lostReason && this.child.endedBeforeLoss && reason === 'exit'
        ? { endedBeforeLoss: true as const }
        : {}),
      ...(activity?.refusals.length ? { sandboxRefusals: activity.refusals } : {}),
      ...(activity?.plants.length ? { plants: activity.plants } : {}),
      ...(resourceLimit ? { resourceLimit } : {}),
    };
    this.owner.finished(this, result);
    this.resolveResult(result);
  }
}

/** The last RECENT_BYTES of a capture's memory (tail when it has one, else head). */
function recentOf(capture: OutputCapture): Buffer {
  const buf =
    capture.truncated || capture.tailBuffer().length > 0 ? capture.tailBuffer() : capture.headBuffer();
  return Buffer.from(buf.subarray(Math.max(0, buf.length - RECENT_BYTES)));
}
