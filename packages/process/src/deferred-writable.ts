import { Writable } from 'node:stream';

/**
 * A child's stdin before the child exists: `proc.stdin` must be writable as soon as spawn()
 * returns, while the supervisor passes the real pipe a moment later. Writes are held (with
 * backpressure: a write's callback waits for the target's) and flow once `attach` is called;
 * `end()` ends the target. Without a target (the spawn failed) writes are discarded. Errors of
 * the target (EPIPE: the child exited without reading) are swallowed: the output and the exit
 * status tell what happened, and a stdin error must not crash the host.
 */
export class DeferredWritable extends Writable {
  private target: Writable | undefined;
  private discarding = false;
  private waiting: (() => void)[] = [];

  attach(target: Writable): void {
    this.target = target;
    target.on('error', () => {
      this.discarding = true;
    });
    this.flush();
  }

  /** The child never started (or stdin is gone): accept and drop everything. */
  discard(): void {
    this.discarding = true;
    this.flush();
  }

  private flush(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const run of waiting) run();
  }

  private whenReady(run: () => void): void {
    if (this.target || this.discarding) run();
    else this.waiting.push(run);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.whenReady(() => {
      if (this.discarding || !this.target || this.target.destroyed) {
        callback();
        return;
      }
      this.target.write(chunk, () => callback());
    });
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.whenReady(() => {
      if (!this.discarding && this.target && !this.target.destroyed) this.target.end();
      callback();
    });
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.target?.destroy();
    this.discard();
    callback(error);
  }
}
