import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';

/** Lines of a stream, one at a time, on demand; undefined at end of input. */
export class LineReader {
  private readonly lines: string[] = [];
  private readonly waiters: ((line: string | undefined) => void)[] = [];
  private ended = false;
  private readonly close: () => void;

  constructor(input: Readable) {
    const rl = createInterface({ input, crlfDelay: Infinity, terminal: false });
    rl.on('line', (line) => {
      const waiter = this.waiters.shift();
      if (waiter) waiter(line);
      else this.lines.push(line);
    });
    rl.on('close', () => {
      this.ended = true;
      for (const waiter of this.waiters.splice(0)) waiter(undefined);
    });
    this.close = () => rl.close();
  }

  next(): Promise<string | undefined> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  dispose(): void {
    this.close();
  }
}
