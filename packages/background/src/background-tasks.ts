import { randomBytes } from 'node:crypto';
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
import { cleanForModel, completeUtf8Prefix, decodeUtf8, utf8StartOffset } from '@conch/process';
import pLimit, { type LimitFunction } from 'p-limit';
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
}

const DEFAULT_LOG_LIMIT = 64 * 1024;

/**
 * The background task queue: at most `maxWorkers` tasks run at once (p-limit for queued tasks,
 * plus a slot gate that counts adopted ones), finished tasks are kept in a bounded history, and
 * every change is an event on the registry bus.
 */
export class BackgroundTasks implements BackgroundService {
  readonly maxWorkers: number;
  private readonly options: BackgroundTasksOptions;
  private readonly limit: LimitFunction;
  private readonly tasks = new Map<string, Task>();
  private running = 0;
  private slotWaiters: (() => void)[] = [];
  private disposed = false;

  constructor(options: BackgroundTasksOptions = {}) {
    this.options = options;
    this.maxWorkers = options.maxWorkers ?? 4;
    this.limit = pLimit(this.maxWorkers);
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
    const free =
      this.limit.activeCount < this.maxWorkers &&
      this.limit.pendingCount === 0 &&
      this.running < this.maxWorkers;
    if (free) {
      // A worker is free: start now (so the caller sees 'running') and hold the p-limit slot
      // (taken synchronously, as the limiter is under its concurrency) until the task ends.
      startNow();
      void this.limit(() => task.settled);
    } else {
      void this.limit(async () => {
        while (this.running >= this.maxWorkers && !task.cancelRequested) {
          await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
        }
        if (task.cancelRequested) return;
        startNow();
        await task.settled;
      });
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
    this.limit.clearQueue();
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
    };
    this.tasks.set(id, task);
    this.emit('background.task.created', { task: this.snapshot(task), adopted });
    return task;
  }

  private begin(task: Task, run: BackgroundRun): void {
    task.run = run;
    task.info.status = 'running';
    task.info.startedAt = Date.now();
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
    if (task.run) {
      this.running--;
      const waiter = this.slotWaiters.shift();
      waiter?.();
    }
    task.info.status = task.cancelRequested ? 'cancelled' : outcome.status;
    task.info.endedAt = Date.now();
    task.info.result = outcome.result;
    task.settle();
    this.emit('background.task.finished', { task: this.snapshot(task) });
    this.evict();
  }

  private async cancelTask(task: Task): Promise<void> {
    if (isFinal(task.info.status)) return;
    task.cancelRequested = true;
    if (!task.run) {
      // Still queued: it never starts. Wake its gate so its p-limit slot frees.
      this.finish(task, {
        status: 'cancelled',
        result: { stdout: '', stderr: '', returncode: null, error: 'Cancelled before it started.' },
      });
      for (const waiter of this.slotWaiters.splice(0)) waiter();
      return;
    }
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

export function isFinal(status: BackgroundTaskInfo['status']): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}
