import type { SpillReport, SpillSink } from './spill-sink.js';
import { cleanForModel } from './strip-ansi.js';
import { completeUtf8Prefix, decodeUtf8, looksBinary, utf8StartOffset } from './utf8.js';

export interface OutputCaptureOptions {
  /** Bytes kept from the start of the stream. Default 64 KiB. */
  headBytes?: number;
  /** Bytes kept from the end of the stream. Default 64 KiB. */
  tailBytes?: number;
  /** Where every raw byte goes (a file once large); may be shared by stdout and stderr. */
  sink?: SpillSink;
}

/** What a capture holds, decoded and cleaned for a model. */
export interface CaptureSnapshot {
  /** True byte count of the whole stream. */
  totalBytes: number;
  /** True line count (a last line without newline counts). */
  lines: number;
  /** NUL bytes or mostly invalid UTF-8 at the start: the text fields then hold a notice only. */
  binary: boolean;
  /** Whether bytes between head and tail were dropped from memory (they are in `spillPath`). */
  truncated: boolean;
  /** Bytes between head and tail that are only in the spill file. */
  omittedBytes: number;
  /** The whole text when not truncated; else the head. ANSI stripped, UTF-8 decoded. */
  head: string;
  /** The tail when truncated, else ''. */
  tail: string;
  /** The spill file holding the raw bytes, when the output was large enough to need one. */
  spillPath?: string;
  /**
   * What the spill file holds when it does not hold every byte, or is not where it was asked to
   * be (a full disk, a spill limit, a directory that could not be used): see SpillReport. Set on
   * a process's final result; absent when the file (if any) is complete where it was asked for.
   */
  spill?: SpillReport;
}

const EMPTY: Buffer = Buffer.alloc(0);

/**
 * Bounded capture of one output stream: the first `headBytes` and the last `tailBytes` stay in
 * memory, byte and line counts are exact, and every byte is forwarded to a spill sink. Memory is
 * O(head + tail + one chunk) whatever the volume; chunks are kept by reference, never copied.
 */
export class OutputCapture {
  readonly headLimit: number;
  readonly tailLimit: number;
  readonly sink: SpillSink | undefined;
  private head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  private newlines = 0;
  private lastByte = -1;
  private released = false;
  totalBytes = 0;

  constructor(options: OutputCaptureOptions = {}) {
    this.headLimit = options.headBytes ?? 64 * 1024;
    this.tailLimit = options.tailBytes ?? 64 * 1024;
    this.sink = options.sink;
  }

  /** Adds a chunk. Returns false when the producer should pause until `onDrain`. */
  write(chunk: Buffer): boolean {
    const len = chunk.length;
    if (len === 0) return true;
    this.totalBytes += len;
    let i = chunk.indexOf(10);
    while (i !== -1) {
      this.newlines++;
      i = chunk.indexOf(10, i + 1);
    }
    this.lastByte = chunk[len - 1]!;
    let rest = chunk;
    if (this.released) return this.sink ? this.sink.write(chunk) : true;
    if (this.headLen < this.headLimit) {
      const take = Math.min(len, this.headLimit - this.headLen);
      this.head.push(take === len ? chunk : chunk.subarray(0, take));
      this.headLen += take;
      rest = take === len ? EMPTY : chunk.subarray(take);
    }
    if (rest.length > 0) {
      this.tail.push(rest);
      this.tailLen += rest.length;
      while (this.tail.length > 1 && this.tailLen - this.tail[0]!.length >= this.tailLimit) {
        this.tailLen -= this.tail.shift()!.length;
      }
    }
    return this.sink ? this.sink.write(chunk) : true;
  }

  onDrain(fn: () => void): void {
    if (this.sink) this.sink.onDrain(fn);
    else fn();
  }

  get lines(): number {
    return this.newlines + (this.totalBytes > 0 && this.lastByte !== 10 ? 1 : 0);
  }

  get truncated(): boolean {
    return this.totalBytes > this.headLimit + this.tailLimit;
  }

  /** The first bytes kept in memory. */
  headBuffer(): Buffer {
    return this.head.length === 1 ? this.head[0]! : Buffer.concat(this.head);
  }

  /** The last bytes kept in memory (at most tailLimit; '' when not truncated and all fit the head). */
  tailBuffer(): Buffer {
    const all = this.tail.length === 1 ? this.tail[0]! : Buffer.concat(this.tail);
    return this.truncated ? all.subarray(Math.max(0, all.length - this.tailLimit)) : all;
  }

  /** Every byte, when nothing was dropped (not truncated). */
  fullBuffer(): Buffer | undefined {
    if (this.truncated) return undefined;
    return Buffer.concat([...this.head, ...this.tail]);
  }

  /** Drops the buffered head and tail (counts stay); called once the final snapshot is taken. */
  release(): void {
    this.head = [];
    this.tail = [];
    this.released = true;
  }

  snapshot(): CaptureSnapshot {
    const headBuf = this.headBuffer();
    const binary = looksBinary(headBuf.subarray(0, 8192));
    const truncated = this.truncated;
    const omittedBytes = truncated ? this.totalBytes - this.headLimit - this.tailLimit : 0;
    let spillPath = this.sink?.path;
    // A sink that cannot make its file (no writable directory) returns undefined; never throws.
    if (truncated && this.sink) spillPath = this.sink.materialize();
    const base = { totalBytes: this.totalBytes, lines: this.lines, binary, truncated, omittedBytes };
    const withPath = spillPath === undefined ? {} : { spillPath };
    if (binary) return { ...base, head: '', tail: '', ...withPath };
    if (!truncated) {
      return { ...base, head: cleanForModel(decodeUtf8(this.fullBuffer() ?? EMPTY)), tail: '', ...withPath };
    }
    const head = headBuf.subarray(0, completeUtf8Prefix(headBuf));
    const tailBuf = this.tailBuffer();
    const tail = tailBuf.subarray(utf8StartOffset(tailBuf));
    return {
      ...base,
      head: cleanForModel(decodeUtf8(head)),
      tail: cleanForModel(decodeUtf8(tail)),
      ...withPath,
    };
  }
}
