import { createWriteStream, openSync, type WriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { safeStatSync } from '@conch/core';

/**
 * A cap on the bytes spill files may take, shared by every sink charged to it: one per process
 * (all its streams), one per manager (every process of a registry). Bytes are charged when they
 * are handed to a file; the count never goes down (a registry's budget is for its whole life).
 */
export class SpillBudget {
  readonly scope: 'call' | 'registry';
  /** Bytes allowed in total. */
  limit: number;
  /** Bytes charged so far. */
  used = 0;

  constructor(scope: 'call' | 'registry', limit: number) {
    this.scope = scope;
    this.limit = limit;
  }

  get remaining(): number {
    return Math.max(0, this.limit - this.used);
  }
}

/** Why a spill file does not hold every byte (see {@link SpillReport}). */
export type SpillProblem =
  /** No directory could take the file (EACCES, ENOTDIR, EROFS, ENOSPC at creation…): there is none. */
  | 'not-saved'
  /** The file system filled up (ENOSPC, EDQUOT, EFBIG) while writing: the file holds a prefix. */
  | 'disk-full'
  /** Another write error (EIO…) while writing: the file holds a prefix. */
  | 'write-failed'
  /** A spill limit (per call or per registry) was reached: the file holds a prefix. */
  | 'limit';

/** What a spill file holds, said exactly: every result that names a file can say how much is in it. */
export interface SpillReport {
  /** The file, when one could be made (it may be in a fallback directory, see `relocated`). */
  path?: string;
  /** Bytes in the file (what was written to it successfully). */
  keptBytes: number;
  /** Bytes the streams produced (every byte given to the sink). */
  totalBytes: number;
  /** Whether the file holds every byte the streams produced. */
  complete: boolean;
  problem?: SpillProblem;
  /** The error behind `problem` (`ENOSPC: no space left on device, write`), or the limit's description. */
  reason?: string;
  /** With problem 'limit': which cap and its size in bytes. */
  limit?: { scope: 'call' | 'registry'; bytes: number };
  /** With problem 'limit' and `onLimit: 'stop'`: the process was stopped at the limit. */
  stopped?: boolean;
  /**
   * The requested directory could not be used, so the file is in a fallback one: which directory,
   * why, and whether the fallback is removed when its owner is disposed (the registry's temp dir).
   */
  relocated?: { from: string; reason: string; temporary: boolean };
  /** With problem 'not-saved': every directory tried, with why each failed. */
  tried?: { dir: string; reason: string }[];
}

/** A directory a spill file may go to. */
export interface SpillDir {
  /** Returns the directory (creating it); may throw (EACCES, ENOTDIR…): the next one is tried. */
  dir: () => string;
  /** What to call it when it could not be used (default: the path it returned or tried). */
  label?: string;
  /** Files there go when their owner is disposed (a registry's temp dir). */
  temporary?: boolean;
}

export interface SpillSinkOptions {
  /** Directory of the file (called lazily, on first materialisation). */
  dir: () => string;
  /** How the first directory is named in reports when it cannot be used (default: the error's path). */
  dirLabel?: string;
  /**
   * Directories tried in order when `dir` cannot be used (it cannot be created, the file cannot be
   * opened there): a registry's temp dir, then the system's. Without one, a failing `dir` leaves
   * the sink without a file (the report says so); it never throws.
   */
  fallbackDirs?: readonly SpillDir[];
  /**
   * File name inside `dir`, or a function that makes it when the file is opened (most commands
   * never spill: their name, a timestamp and random bytes, is not made for nothing).
   */
  name: string | (() => string);
  /** Bytes kept in memory before the file is created. Default 128 KiB. */
  pendingLimit?: number;
  /** Bytes buffered towards the file before `write()` asks the producer to pause. Default 1 MiB. */
  highWaterMark?: number;
  /** Caps the file's bytes are charged to (per call, per registry): past the smallest, the file stops growing. */
  budgets?: readonly SpillBudget[];
  /** Called once when a budget is reached (the report then has problem 'limit'). */
  onLimit?: (report: SpillReport) => void;
}

const DISK_FULL = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);

function describeError(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return e && typeof e.message === 'string' ? e.message : String(error);
}

const fmt = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * The full raw bytes of a stream (or of several, interleaved), in memory while small and in a
 * file once they exceed `pendingLimit`: the file is created lazily, so a short command never
 * touches the disk. Writes are asynchronous with backpressure (`write()` returns false when the
 * producer should pause until `onDrain`), so memory stays bounded whatever the volume.
 *
 * Nothing here throws at a producer: a directory that cannot be made or written falls back to the
 * next one (`fallbackDirs`), a full disk or a spill limit stops the file where it is, and
 * `report()` says exactly what the file holds (bytes kept of bytes produced, and why).
 */
export class SpillSink {
  private readonly options: SpillSinkOptions;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private stream: WriteStream | undefined;
  private filePath: string | undefined;
  private ended: Promise<void> | undefined;
  private drainWaiters: (() => void)[] = [];
  /** Bytes handed to the file stream. */
  private queuedBytes = 0;
  /** No file could be made (every directory failed): bytes are counted, not kept. */
  private unsaved: { dir: string; reason: string }[] | undefined;
  private relocated: SpillReport['relocated'];
  private limitHit: SpillBudget | undefined;
  private stoppedFlag = false;
  /** Total bytes written to the sink. */
  totalBytes = 0;
  /** Set when the file could not be written (disk full, temp dir gone); bytes after it are lost. */
  error: Error | undefined;

  constructor(options: SpillSinkOptions) {
    this.options = options;
  }

  /** The file path, once the sink has spilled to disk. */
  get path(): string | undefined {
    return this.filePath;
  }

  /** Appends bytes. Returns false when the producer should pause until `onDrain()` fires. */
  write(chunk: Buffer): boolean {
    this.totalBytes += chunk.length;
    if (this.stream) return this.toFile(chunk);
    if (this.filePath !== undefined || this.unsaved) return true; // ended, or no file can be made
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes > (this.options.pendingLimit ?? 128 * 1024)) {
      this.materialize();
      const stream = this.stream as WriteStream | undefined;
      return stream && !this.error ? !stream.writableNeedDrain : true;
    }
    return true;
  }

  /** Calls `fn` once the buffered bytes have been flushed (immediately if nothing is buffered). */
  onDrain(fn: () => void): void {
    if (!this.stream || !this.stream.writableNeedDrain || this.error) {
      fn();
      return;
    }
    this.drainWaiters.push(fn);
    if (this.drainWaiters.length === 1) {
      this.stream.once('drain', () => this.flushWaiters());
    }
  }

  /**
   * Creates the file now (if not yet) and returns its path; every byte so far goes into it. Works
   * after `end()` too (a small output that never needed a file): the bytes are then written and
   * the file closed, and `end()` resolves once that is done. Undefined when no directory could
   * take the file (see `report()`); never throws.
   */
  materialize(): string | undefined {
    if (this.filePath !== undefined) return this.filePath;
    if (this.unsaved) return undefined;
    const opened = this.openFile();
    if (!opened) {
      // The bytes held for the file are lost to it; memory is freed (the captures keep head + tail).
      this.pending = [];
      this.pendingBytes = 0;
      return undefined;
    }
    const { path, fd } = opened;
    this.filePath = path;
    const stream = createWriteStream(path, { fd, highWaterMark: this.options.highWaterMark ?? 1024 * 1024 });
    stream.on('error', (error) => {
      this.error ??= error;
      this.flushWaiters();
    });
    this.stream = stream;
    const pending = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    for (const chunk of pending) this.toFile(chunk);
    if (this.ended) this.ended = this.finishStream();
    return path;
  }

  /** Flushes and closes the file (if any). Idempotent. */
  end(): Promise<void> {
    this.ended ??= this.finishStream();
    return this.ended;
  }

  /** Marks the report: the process was stopped at the spill limit. */
  markStopped(): void {
    this.stoppedFlag = true;
  }

  /**
   * What the file holds: its path (when there is one), bytes kept of bytes produced, and why the
   * two differ when they do. Exact once `end()` resolved; before, `keptBytes` counts the bytes
   * handed to the file so far.
   */
  report(): SpillReport {
    this.noteStreamError();
    const totalBytes = this.totalBytes;
    if (this.unsaved) {
      const tried = this.unsaved;
      return {
        keptBytes: 0,
        totalBytes,
        complete: totalBytes === 0,
        problem: 'not-saved',
        reason: tried.map((t) => `${t.dir}: ${t.reason}`).join('; '),
        tried,
      };
    }
    if (this.filePath === undefined) {
      // Still in memory (nothing needed a file).
      return { keptBytes: 0, totalBytes, complete: totalBytes === 0 };
    }
    let keptBytes = this.queuedBytes;
    if (this.error) {
      keptBytes = this.stream?.bytesWritten ?? 0;
      try {
        keptBytes = safeStatSync(this.filePath).size;
      } catch {
        // gone: keep the stream's count
      }
    }
    const base: SpillReport = {
      path: this.filePath,
      keptBytes,
      totalBytes,
      complete: keptBytes >= totalBytes,
      ...(this.relocated ? { relocated: this.relocated } : {}),
    };
    if (this.error) {
      const code = (this.error as NodeJS.ErrnoException).code ?? '';
      return {
        ...base,
        complete: false,
        problem: DISK_FULL.has(code) ? 'disk-full' : 'write-failed',
        reason: describeError(this.error),
      };
    }
    if (this.limitHit) {
      const budget = this.limitHit;
      return {
        ...base,
        complete: false,
        problem: 'limit',
        reason: `the ${budget.scope === 'call' ? 'per-call' : 'per-registry'} spill limit of ${fmt(budget.limit)} bytes was reached`,
        limit: { scope: budget.scope, bytes: budget.limit },
        ...(this.stoppedFlag ? { stopped: true } : {}),
      };
    }
    return base;
  }

  /**
   * Reads `length` bytes at `offset` of everything written so far (bytes still in flight to the
   * file are read once flushed; after `end()` everything is readable).
   */
  async read(offset: number, length: number): Promise<Buffer> {
    if (this.filePath === undefined) {
      const all = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
      return all.subarray(offset, offset + length);
    }
    const handle = await open(this.filePath, 'r');
    try {
      const buffer = Buffer.alloc(Math.max(0, length));
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  /**
   * Resolves once every byte written so far is in the file (at once when there is no file, or
   * it failed). Lets a caller read a materialized file of a process that is still running.
   */
  flushed(): Promise<void> {
    const stream = this.stream;
    if (!stream || this.error || stream.writableEnded || stream.destroyed)
      return this.ended ?? Promise.resolve();
    // The write's callback runs before the stream's 'error' event (emitted on a later tick): the
    // error is taken from the stream here, so a report made right after this resolves says the
    // disk is full instead of naming a file that kept nothing.
    return new Promise<void>((resolve) =>
      stream.write(Buffer.alloc(0), () => {
        this.noteStreamError();
        resolve();
      }),
    );
  }

  /** The error the file stream failed with, as soon as it failed (before its 'error' event). */
  private noteStreamError(): void {
    const failed = this.stream?.errored;
    if (failed && !this.error) {
      this.error = failed;
      this.flushWaiters();
    }
  }

  /** Hands a chunk to the file, within the budgets; past them the file stops growing. */
  private toFile(chunk: Buffer): boolean {
    const stream = this.stream!;
    if (this.error || this.limitHit) return true;
    let part = chunk;
    const budgets = this.options.budgets;
    if (budgets && budgets.length > 0) {
      let allowed = chunk.length;
      let smallest: SpillBudget | undefined;
      for (const budget of budgets) {
        if (budget.remaining < allowed) {
          allowed = budget.remaining;
          smallest = budget;
        }
      }
      for (const budget of budgets) budget.used += allowed;
      if (smallest) {
        part = chunk.subarray(0, allowed);
        this.limitHit = smallest;
      }
    }
    let ok = true;
    if (part.length > 0) {
      this.queuedBytes += part.length;
      ok = stream.write(part);
    }
    if (this.limitHit) {
      const onLimit = this.options.onLimit;
      // After the write above: the report's count includes the bytes that fit.
      if (onLimit) queueMicrotask(() => onLimit(this.report()));
      return true;
    }
    return ok;
  }

  /** Opens the file in the first directory that takes it. */
  private openFile(): { path: string; fd: number } | undefined {
    const name = typeof this.options.name === 'function' ? this.options.name() : this.options.name;
    const candidates: SpillDir[] = [
      { dir: this.options.dir, ...(this.options.dirLabel ? { label: this.options.dirLabel } : {}) },
      ...(this.options.fallbackDirs ?? []),
    ];
    const tried: { dir: string; reason: string }[] = [];
    for (const candidate of candidates) {
      let dir: string | undefined;
      try {
        dir = candidate.dir();
        const path = join(dir, name);
        const fd = openSync(path, 'w', 0o600);
        if (tried.length > 0) {
          const first = tried[0]!;
          this.relocated = { from: first.dir, reason: first.reason, temporary: candidate.temporary === true };
        }
        return { path, fd };
      } catch (error) {
        const label =
          candidate.label ?? dir ?? (error as NodeJS.ErrnoException).path ?? 'the output directory';
        tried.push({ dir: label, reason: describeError(error) });
      }
    }
    this.unsaved = tried;
    return undefined;
  }

  private finishStream(): Promise<void> {
    const stream = this.stream;
    if (!stream) return Promise.resolve();
    return new Promise<void>((resolve) => {
      if (stream.closed || stream.destroyed) {
        resolve();
        return;
      }
      stream.once('close', () => resolve());
      stream.end();
    }).finally(() => this.flushWaiters());
  }

  private flushWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const fn of waiters) fn();
  }
}
