import { randomBytes } from 'node:crypto';
// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readFileSync } from 'node:fs';
import type {
  BackgroundLogs,
  BackgroundRun,
  BackgroundRunOutcome,
  BackgroundService,
  BackgroundTaskInfo,
  BackgroundTaskSpec,
  EventBus,
  Logger,
} from '@conch/core';
import { ConchError } from '@conch/core';
import {
  COOKIE_VAR,
  cleanForModel,
  completeUtf8Prefix,
  decodeUtf8,
  killTreeSync,
  utf8StartOffset,
} from '@conch/process';
import './events.js';
import { UnknownTaskError } from './unknown-task-error.js';

export interface BackgroundTasksOptions {
  /** Tasks running at once; the rest queue. Default 4. */
  maxWorkers?: number;
  /**
   * Finished tasks kept once their result was delivered (a check, wait or cancel returned it);
   * past it the ones delivered longest ago go first. Default 100.
   */
  historyLimit?: number;
  /**
   * Finished tasks kept whose result nobody has read yet: `historyLimit` never evicts them, only
   * this limit does (oldest first). Default 1000.
   */
  unreadLimit?: number;
  events?: EventBus;
  logger?: Logger;
}

interface Task {
  info: BackgroundTaskInfo;
  run: BackgroundRun | undefined;
  cancelRequested: boolean;
  adopted: boolean;
  settled: Promise<void>;
  settle: () => void;
  /** Output bytes a `waitForOutput` already matched past (the next one scans after them). */
  matchedUpTo: number;
  /** Starts a queued task (set while it waits for a worker). */
  start?: () => void;
  /** performance.now() at its start and end (elapsedMs; the info's epoch times are for display). */
  startedMono?: number;
  endedMono?: number;
  /** Whether its final result was returned to a caller (wait, waitForOutput or kill). */
  delivered: boolean;
  /** When it was delivered, in delivery order (the history evicts the lowest first). */
  deliveredSeq?: number;
}

/** What is remembered of a task evicted from the history: enough to say so instead of "unknown". */
export interface EvictedTaskInfo {
  id: string;
  command: string;
  status: BackgroundTaskInfo['status'];
  /** Whether its result had been delivered before it was evicted. */
  delivered: boolean;
  returncode?: unknown;
  /** The file with its full output, when it had one (kept until the registry's dispose). */
  outputFile?: string;
  evictedAt: number;
}

const DEFAULT_HISTORY_LIMIT = 100;
const DEFAULT_UNREAD_LIMIT = 1000;

/** Evicted tasks remembered (oldest forgotten first): a few hundred bytes each. */
const EVICTED_KEPT = 10_000;

/** What `waitForOutput` saw. */
export interface OutputWaitResult {
  info: BackgroundTaskInfo;
  /** Whether output matched before the wait ended (or the task finished). */
  matched: boolean;
  /** The line (cleaned, at most 200 characters) the match is on. */
  line?: string;
}

/** How often a running task's output is scanned for a `waitForOutput` pattern. */
const SCAN_EVERY_MS = 100;
/** Characters of scanned text kept so a match may span two reads. */
const SCAN_CARRY = 4096;
const SCAN_CHUNK = 256 * 1024;

const DEFAULT_LOG_LIMIT = 64 * 1024;

/**
 * The background task queue: at most `maxWorkers` tasks run at once, finished tasks are kept in a
 * bounded history, and every change is an event on the registry bus.
 *
 * One semaphore counts every running task: `submit` starts at once while a worker is free and
 * queues (FIFO) otherwise; `adopt` takes a slot without queueing (the process already runs, so it
 * counts at once, even past the limit), and each end starts the next queued task. Written here
 * rather than with p-limit because a limiter cannot count a task it did not start.
 */
export class BackgroundTasks implements BackgroundService {
  readonly maxWorkers: number;
  private readonly options: BackgroundTasksOptions;
  private readonly tasks = new Map<string, Task>();
  private readonly evicted = new Map<string, EvictedTaskInfo>();
  /** The semaphore's count: tasks running, adopted ones included. */
  private running = 0;
  /** Queued tasks, oldest first. */
  private readonly queue: Task[] = [];
  private disposed = false;
  private deliveries = 0;

  constructor(options: BackgroundTasksOptions = {}) {
    this.options = options;
    this.maxWorkers = options.maxWorkers ?? 4;
  }

  /** Tasks currently running (adopted ones included). */
  get runningCount(): number {
    return this.running;
  }

  submit(spec: BackgroundTaskSpec & { start: () => BackgroundRun }): BackgroundTaskInfo {
    this.assertAlive();
    const task = this.create(spec, 'queued', false);
    const startNow = () => {
      let run: BackgroundRun;
      try {
        run = spec.start();
      } catch (error) {
        this.finish(task, {
          status: 'failed',
          result: {
            stdout: '',
            stderr: '',
            returncode: null,
            error: `Could not start: ${(error as Error).message}`,
          },
        });
        return;
      }
      this.begin(task, run);
      this.emit('background.task.started', { task: this.snapshot(task) });
    };
    if (this.running < this.maxWorkers && this.queue.length === 0) {
      // A worker is free: start now, so the caller sees 'running'.
      startNow();
    } else {
      task.start = startNow;
      this.queue.push(task);
    }
    return this.snapshot(task);
  }

  adopt(spec: BackgroundTaskSpec & { run: BackgroundRun }): BackgroundTaskInfo {
    this.assertAlive();
    const task = this.create(spec, 'running', true);
    this.begin(task, spec.run);
    return this.snapshot(task);
  }

  whenFinished(id: string): Promise<BackgroundTaskInfo | undefined> {
    const task = this.tasks.get(id);
    if (!task) return Promise.resolve(undefined);
    return task.settled.then(() => this.snapshot(task));
  }

  get(id: string): BackgroundTaskInfo | undefined {
    const task = this.tasks.get(id);
    return task ? this.snapshot(task) : undefined;
  }

  list(): BackgroundTaskInfo[] {
    return [...this.tasks.values()].map((t) => this.snapshot(t));
  }

  /** Known task ids, oldest first. */
  ids(): string[] {
    return [...this.tasks.keys()];
  }

  /** What is left of a task evicted from the history (undefined if it is kept or never existed). */
  evictedInfo(id: string): EvictedTaskInfo | undefined {
    const e = this.evicted.get(id);
    return e ? { ...e } : undefined;
  }

  /**
   * Marks a finished task's result as delivered (the host showed it), so the history may evict it
   * under `historyLimit`; `wait`, `waitForOutput` and `kill` mark it themselves when they return it.
   */
  markDelivered(id: string): void {
    const task = this.tasks.get(id);
    if (task && isFinal(task.info.status)) this.markRead(task);
  }

  /** Resolves when the task ends or after `ms` (or when `signal` aborts), with its state then. */
  async wait(id: string, ms: number, signal?: AbortSignal): Promise<BackgroundTaskInfo> {
    const task = this.require(id);
    if (ms > 0 && !isFinal(task.info.status) && !signal?.aborted) {
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      await Promise.race([
        task.settled,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, ms);
          onAbort = () => resolve();
          signal?.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
      if (timer) clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
    return this.deliver(task);
  }

  /**
   * Resolves as soon as the task's output matches `pattern` (ANSI stripped, `\r` rewrites applied),
   * or when the task ends or `ms` pass (or `signal` aborts) without a match. The first wait scans the
   * output from its start (so a line printed before the call counts); each later one scans what
   * came after the previous match.
   */
  async waitForOutput(
    id: string,
    pattern: RegExp,
    ms: number,
    signal?: AbortSignal,
  ): Promise<OutputWaitResult> {
    const task = this.require(id);
    const deadline = performance.now() + ms;
    let offset = task.matchedUpTo;
    let carry = '';
    for (;;) {
      const final = isFinal(task.info.status);
      const run = task.run;
      if (run) {
        // Read what is there now; after the end, everything (a finished task's output is complete).
        for (let total = run.outputBytes(); offset < total; total = run.outputBytes()) {
          const bytes = await run.readOutput(offset, Math.min(SCAN_CHUNK, total - offset));
          if (bytes.length === 0) break;
          const usable = final ? bytes.length : completeUtf8Prefix(bytes);
          if (usable === 0) break;
          const text = carry + cleanForModel(decodeUtf8(bytes.subarray(0, usable)));
          offset += usable;
          const m = pattern.exec(text);
          if (m) {
            task.matchedUpTo = offset;
            const start = text.lastIndexOf('\n', m.index) + 1;
            const end = text.indexOf('\n', m.index + m[0].length);
            const line = text.slice(start, end < 0 ? undefined : end).trim();
            return {
              info: final ? this.deliver(task) : this.snapshot(task),
              matched: true,
              line: line.length > 200 ? `${line.slice(0, 199)}…` : line,
            };
          }
          carry = text.slice(-SCAN_CARRY);
        }
      }
      const left = deadline - performance.now();
      if (final || left <= 0 || signal?.aborted)
        return { info: final ? this.deliver(task) : this.snapshot(task), matched: false };
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      await Promise.race([
        task.settled,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, Math.min(SCAN_EVERY_MS, left));
          onAbort = () => resolve();
          signal?.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
      if (timer) clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Cancels a task (its result, returned by `get` after this, counts as delivered). */
  async kill(id: string): Promise<void> {
    const task = this.require(id);
    await this.cancelTask(task);
    this.markRead(task);
  }

  async killAll(): Promise<void> {
    await Promise.all([...this.tasks.values()].map((t) => this.cancelTask(t)));
  }

  async logs(id: string, options: { offset?: number; limit?: number } = {}): Promise<BackgroundLogs> {
    const task = this.require(id);
    const total = task.run?.outputBytes() ?? 0;
    const complete = isFinal(task.info.status);
    let offset = Math.max(0, Math.floor(options.offset ?? 0));
    const limit = Math.max(1, Math.floor(options.limit ?? DEFAULT_LOG_LIMIT));
    const outputFile = task.run?.outputFile?.();
    const base = { totalBytes: total, complete, ...(outputFile ? { outputFile } : {}) };
    if (!task.run || offset >= total) {
      return { text: '', offset, nextOffset: Math.min(offset, total), ...base };
    }
    let bytes = await task.run.readOutput(offset, limit);
    if (bytes.length === 0) {
      // Counted but not kept: what the file should hold from here was never written (a full disk).
      return { text: '', offset, nextOffset: offset, ...base, complete: false, unavailable: true };
    }
    const skip = offset > 0 ? utf8StartOffset(bytes) : 0;
    offset += skip;
    bytes = bytes.subarray(skip);
    const atEnd = offset + bytes.length >= total && complete;
    const usable = atEnd ? bytes.length : completeUtf8Prefix(bytes) || bytes.length;
    return {
      text: cleanForModel(decodeUtf8(bytes.subarray(0, usable))),
      offset,
      nextOffset: offset + usable,
      ...base,
      complete: complete && offset + usable >= total,
    };
  }

  /** Cancels queued and running tasks and waits for them to end. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.killAll();
  }

  private create(spec: BackgroundTaskSpec, status: 'queued' | 'running', adopted: boolean): Task {
    const prefix = spec.idPrefix ?? 'task';
    let id: string;
    do id = `${prefix}_${randomBytes(3).toString('hex')}`;
    while (this.tasks.has(id) || this.evicted.has(id));
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const task: Task = {
      info: { id, command: spec.command, tool: spec.tool, status, createdAt: Date.now() },
      run: undefined,
      cancelRequested: false,
      adopted,
      settled,
      settle,
      matchedUpTo: 0,
      delivered: false,
    };
    this.tasks.set(id, task);
    this.emit('background.task.created', { task: this.snapshot(task), adopted });
    return task;
  }

  private begin(task: Task, run: BackgroundRun): void {
    task.run = run;
    task.info.status = 'running';
    task.info.startedAt = Date.now();
    task.startedMono = performance.now();
    if (run.pid !== undefined) task.info.pid = run.pid;
    this.running++;
    void run.done.then(
      (outcome) => this.finish(task, outcome),
      (error: unknown) =>
        this.finish(task, {
          status: 'failed',
          result: { stdout: '', stderr: '', returncode: null, error: String(error) },
        }),
    );
  }

  private finish(task: Task, outcome: BackgroundRunOutcome): void {
    if (isFinal(task.info.status)) return;
    task.info.status = task.cancelRequested ? 'cancelled' : outcome.status;
    task.info.endedAt = Date.now();
    task.endedMono = performance.now();
    task.info.result = outcome.result;
    task.settle();
    this.emit('background.task.finished', { task: this.snapshot(task) });
    this.evict();
    if (task.run) {
      this.running--;
      this.startQueued();
    }
  }

  /** Starts queued tasks while workers are free (a start that fails frees its slot at once). */
  private startQueued(): void {
    while (!this.disposed && this.running < this.maxWorkers) {
      const next = this.queue.shift();
      if (!next) return;
      const start = next.start;
      delete next.start;
      start?.();
    }
  }

  private async cancelTask(task: Task): Promise<void> {
    if (isFinal(task.info.status)) return;
    task.cancelRequested = true;
    if (!task.run) {
      // Still queued: it never starts.
      const at = this.queue.indexOf(task);
      if (at >= 0) this.queue.splice(at, 1);
      delete task.start;
      this.finish(task, {
        status: 'cancelled',
        result: { stdout: '', stderr: '', returncode: null, error: 'Cancelled before it started.' },
      });
      return;
    }
    // A cancel asks for no grace: SIGKILL the task's tree at once, so the run's own (polite,
    // SIGTERM-first) cancel below finds it gone and only confirms and sweeps escapees.
    void killWhenPidKnown(task.run, task.settled);
    try {
      await task.run.cancel();
    } catch (error) {
      this.options.logger?.warn({ err: error, task: task.info.id }, 'cancel failed');
    }
    await task.settled;
  }

  /** The snapshot of a task, marking a final result as delivered (the caller returns it). */
  private deliver(task: Task): BackgroundTaskInfo {
    const info = this.snapshot(task);
    if (isFinal(task.info.status)) this.markRead(task);
    return info;
  }

  /** Counts a result as delivered now (again: a result read twice is the most recent one). */
  private markRead(task: Task): void {
    task.delivered = true;
    task.deliveredSeq = ++this.deliveries;
    this.evict();
  }

  /**
   * Bounds the history. A result nobody has read is what a model comes back for after a long
   * burst (a hundred quick calls handed to the background on a loaded machine), so read and
   * unread results have limits of their own: the `historyLimit` most recently delivered are kept
   * (a task just checked stays for the read_background_output that follows), and unread ones
   * are evicted only past `unreadLimit`, oldest first. Each evicted task leaves a small record,
   * so a late check hears that it was evicted (and where its output file is), not that it never
   * existed.
   */
  private evict(): void {
    const limit = this.options.historyLimit ?? DEFAULT_HISTORY_LIMIT;
    const unreadLimit = this.options.unreadLimit ?? DEFAULT_UNREAD_LIMIT;
    const delivered: Task[] = [];
    const unread: Task[] = [];
    for (const t of this.tasks.values()) {
      if (isFinal(t.info.status)) (t.delivered ? delivered : unread).push(t);
    }
    if (delivered.length > limit) {
      delivered.sort((a, b) => a.deliveredSeq! - b.deliveredSeq!);
      for (const t of delivered.slice(0, delivered.length - limit)) this.drop(t);
    }
    // In creation order already (the map's order).
    for (const t of unread.slice(0, Math.max(0, unread.length - unreadLimit))) this.drop(t);
  }

  private drop(task: Task): void {
    const { id, command, status, result } = task.info;
    this.tasks.delete(id);
    const outputFile = task.run?.outputFile?.();
    this.evicted.set(id, {
      id,
      command: command.length > 200 ? `${command.slice(0, 199)}…` : command,
      status,
      delivered: task.delivered,
      ...(result && 'returncode' in result ? { returncode: result.returncode } : {}),
      ...(outputFile ? { outputFile } : {}),
      evictedAt: Date.now(),
    });
    if (this.evicted.size > EVICTED_KEPT) this.evicted.delete(this.evicted.keys().next().value!);
    if (!task.delivered)
      this.options.logger?.warn(
        { task: id, unreadLimit: this.options.unreadLimit ?? DEFAULT_UNREAD_LIMIT },
        'evicted a finished background task whose result was never read',
      );
  }

  private snapshot(task: Task): BackgroundTaskInfo {
    const info: BackgroundTaskInfo = { ...task.info };
    if (task.startedMono !== undefined)
      info.elapsedMs = Math.round((task.endedMono ?? performance.now()) - task.startedMono);
    const run = task.run;
    if (run) {
      // A supervised process learns its pid a moment after the spawn call: read it now.
      if (run.pid !== undefined) info.pid = run.pid;
      info.outputBytes = run.outputBytes();
      const last = run.lastLine?.();
      if (last) info.lastLine = last;
      const file = run.outputFile?.();
      if (file) info.outputFile = file;
    }
    return info;
  }

  private require(id: string): Task {
    const task = this.tasks.get(id);
    if (!task) throw new UnknownTaskError(id, this.ids(), this.evictedInfo(id));
    return task;
  }

  private assertAlive(): void {
    if (this.disposed) {
      throw new ConchError({
        code: 'BACKGROUND_DISPOSED',
        message: 'Cannot start a background task: the background service was disposed with its registry.',
      });
    }
  }

  private emit<K extends 'background.task.created' | 'background.task.started' | 'background.task.finished'>(
    event: K,
    payload: K extends 'background.task.created'
      ? { task: BackgroundTaskInfo; adopted: boolean }
      : { task: BackgroundTaskInfo },
  ): void {
    const events = this.options.events;
    if (events && events.listenerCount(event) > 0) events.emit(event, payload as never);
  }
}

/** How often a cancel looks for the pid of a run that has not reported it yet. */
const PID_POLL_MS = 5;

/**
 * SIGKILLs a cancelled run's process tree (by parent links) as soon as its pid is known: a
 * supervised process learns its pid a moment after it started, so a run cancelled in that moment
 * is polled for it until the run settles.
 */
async function killWhenPidKnown(run: BackgroundRun, settled: Promise<void>): Promise<void> {
  let done = false;
  void settled.then(() => (done = true));
  while (!done) {
    const pid = run.pid;
    if (pid !== undefined) {
      if (pid > 1 && pid !== process.pid && isConchProcess(pid)) killTreeSync(pid);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, PID_POLL_MS));
  }
}

/**
 * Whether `pid` still is a process the process layer started (its environment carries the
 * process cookie): a task whose process exited while its output drains may name a pid the
 * system gave to another program since. Where there is no /proc, the pid is trusted.
 */
function isConchProcess(pid: number): boolean {
  let env: Buffer;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' && process.platform !== 'linux';
  }
  const at = env.indexOf(`${COOKIE_VAR}=`);
  return at === 0 || (at > 0 && env[at - 1] === 0);
}

export function isFinal(status: BackgroundTaskInfo['status']): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}
