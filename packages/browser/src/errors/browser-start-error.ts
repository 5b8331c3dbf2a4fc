import { ConchError } from '@conch/core';

/** A local Chromium was spawned but did not come up with a DevTools endpoint. */
export class BrowserStartError extends ConchError {
  readonly executablePath: string;
  /** The end of what Chromium wrote to stderr (its own diagnosis), possibly empty. */
  readonly stderrTail: string;

  constructor(executablePath: string, reason: string, stderrTail = '', cause?: unknown) {
    const tail = stderrTail.trim();
    super({
      code: 'BROWSER_START_FAILED',
      message:
        `browser cdpUrl 'auto': expected ${executablePath} to start and answer the DevTools protocol; ${reason}` +
        (tail ? `. Its last output:\n${tail}` : ''),
      cause,
    });
    this.name = 'BrowserStartError';
    this.executablePath = executablePath;
    this.stderrTail = tail;
  }
}
