import { ConchError } from '@conch/core';

/** An external `cdpUrl` does not answer the Chrome DevTools Protocol. */
export class CdpUnreachableError extends ConchError {
  readonly url: string;
  /** What was tried, e.g. `GET http://127.0.0.1:9222/json/version`. */
  readonly probed: readonly string[];

  constructor(url: string, probed: readonly string[], reason: string, cause?: unknown) {
    super({
      code: 'CDP_UNREACHABLE',
      message:
        `browser cdpUrl: expected a browser answering the Chrome DevTools Protocol at ${url} ` +
        `(tried ${probed.join(', then ')}); ${reason}. Start Chrome with --remote-debugging-port=9222 ` +
        "(and pass http://127.0.0.1:9222), or use cdpUrl: 'auto' for a private headless Chromium.",
      cause,
    });
    this.name = 'CdpUnreachableError';
    this.url = url;
    this.probed = probed;
  }
}
