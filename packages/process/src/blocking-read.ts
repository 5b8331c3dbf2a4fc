import { readSync, writeSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Blocks this thread for `ms` (fractions allowed) without spinning the CPU. */
function sleep(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/** The poll interval after `attempt` empty reads: fine at first (replies take ~1-3 ms), then coarser. */
function backoff(attempt: number): number {
  return attempt < 40 ? 0.05 : attempt < 200 ? 0.25 : 2;
}

/**
 * Line-oriented, synchronous request/reply over a socket the event loop also owns. The host uses
 * it for PTY spawns only: node has no blocking read on a socket, and the host's end of a stdio
 * pipe is non-blocking, so `readLine` polls `readSync` (EAGAIN while empty) with short
 * `Atomics.wait` sleeps in between. The event loop does not run meanwhile, so nothing else can
 * consume the reply; anything the loop reads from the socket later (a reply that came after a
 * timeout) is handed in through `push` and still found by id.
 */
export class BlockingLineChannel {
  private readonly fd: number;
  private readonly decoder = new StringDecoder('utf8');
  private readonly chunk = Buffer.alloc(64 * 1024);
  private buffered = '';

  constructor(fd: number) {
    this.fd = fd;
  }

  /** Text the event loop read from the socket (kept for the next readLine). */
  push(text: string): void {
    this.buffered += text;
  }

  /** Writes one line; throws when the socket is closed, or EAGAIN when it stays full past `timeoutMs`. */
  writeLine(text: string, timeoutMs: number): void {
    let data = Buffer.from(`${text}\n`);
    const deadline = performance.now() + timeoutMs;
    for (let attempt = 0; data.length > 0; attempt++) {
      try {
        data = data.subarray(writeSync(this.fd, data));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN' || performance.now() > deadline) throw error;
        sleep(backoff(attempt));
      }
    }
  }

  /** The next line (without '\n'); throws on end of stream, or ETIMEDOUT after `timeoutMs`. */
  readLine(timeoutMs: number): string {
    const deadline = performance.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const nl = this.buffered.indexOf('\n');
      if (nl !== -1) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        return line;
      }
      let n: number;
      try {
        n = readSync(this.fd, this.chunk, 0, this.chunk.length, null);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
        if (performance.now() > deadline)
          throw Object.assign(new Error(`no reply within ${timeoutMs} ms`, { cause: error }), {
            code: 'ETIMEDOUT',
          });
        sleep(backoff(attempt));
        continue;
      }
      if (n === 0) throw new Error('the channel closed');
      this.buffered += this.decoder.write(this.chunk.subarray(0, n));
    }
  }
}
