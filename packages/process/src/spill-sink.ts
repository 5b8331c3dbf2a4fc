import { createWriteStream, type WriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';

export interface SpillSinkOptions {
  /** Directory of the file (called lazily, on first materialisation). */
  dir: () => string;
  /** File name inside `dir`. */
  name: string;
  /** Bytes kept in memory before the file is created. Default 128 KiB. */
  pendingLimit?: number;
  /** Bytes buffered towards the file before `write()` asks the producer to pause. Default 1 MiB. */
  highWaterMark?: number;
}

/**
 * The full raw bytes of a stream (or of several, interleaved), in memory while small and in a
 * file once they exceed `pendingLimit`: the file is created lazily, so a short command never
 * touches the disk. Writes are asynchronous with backpressure (`write()` returns false when the
 * producer should pause until `onDrain`), so memory stays bounded whatever the volume.
 */
export class SpillSink {
  private readonly options: SpillSinkOptions;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private stream: WriteStream | undefined;
  private filePath: string | undefined;
  private ended: Promise<void> | undefined;
  private drainWaiters: (() => void)[] = [];
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
    if (this.stream) return this.error ? true : this.stream.write(chunk);
    if (this.filePath !== undefined) return true; // ended or failed
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes > (this.options.pendingLimit ?? 128 * 1024)) {
      this.materialize();
      const stream = this.stream as WriteStream | undefined;
      return stream ? !stream.writableNeedDrain : true;
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
   * the file closed, and `end()` resolves once that is done.
   */
  materialize(): string {
    if (this.filePath !== undefined) return this.filePath;
    const path = join(this.options.dir(), this.options.name);
    this.filePath = path;
    const stream = createWriteStream(path, { highWaterMark: this.options.highWaterMark ?? 1024 * 1024 });
    stream.on('error', (error) => {
      this.error ??= error;
      this.flushWaiters();
    });
    this.stream = stream;
    for (const chunk of this.pending) stream.write(chunk);
    this.pending = [];
    this.pendingBytes = 0;
    if (this.ended) this.ended = this.finishStream();
    return path;
  }

  /** Flushes and closes the file (if any). Idempotent. */
  end(): Promise<void> {
    this.ended ??= this.finishStream();
    return this.ended;
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
    return new Promise<void>((resolve) => stream.write(Buffer.alloc(0), () => resolve()));
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
