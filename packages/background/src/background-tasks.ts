import { randomBytes } from 'node:crypto';
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
  /** Finished tasks kept (oldest evicted first). Default 100. */
  historyLimit?: number;
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
}

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
  /** The semaphore's count: tasks running, adopted ones included. */
  private running = 0;
  /** Queued tasks, oldest first. */
  private readonly queue: Task[] = [];
  private disposed = false;

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
    return this.snapshot(task);
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
              info: this.snapshot(task),
              matched: true,
              line: line.length > 200 ? `${line.slice(0, 199)}…` : line,
            };
          }
          carry = text.slice(-SCAN_CARRY);
        }
      }
      const left = deadline - performance.now();
      if (final || left <= 0 || signal?.aborted) return { info: this.snapshot(task), matched: false };
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

  async kill(id: string): Promise<void> {
    const task = this.require(id);
    await this.cancelTask(task);
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
    while (this.tasks.has(id));
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

  private evict(): void {
    const limit = this.options.historyLimit ?? 100;
    let finished = 0;
    for (const t of this.tasks.values()) if (isFinal(t.info.status)) finished++;
    for (const [id, t] of this.tasks) {
      if (finished <= limit) break;
      if (isFinal(t.info.status)) {
        this.tasks.delete(id);
        finished--;
      }
    }
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
    if (!task) throw new UnknownTaskError(id, this.ids());
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
