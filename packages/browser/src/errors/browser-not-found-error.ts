import { ConchError } from '@conch/core';

/** No Chrome or Chromium executable was found for `cdpUrl: 'auto'` (conch never downloads one). */
export class BrowserNotFoundError extends ConchError {
  /** Where it looked: CHROME_PATH and the names searched on PATH. */
  readonly searched: readonly string[];

  constructor(searched: readonly string[], detail?: string) {
    super({
      code: 'BROWSER_NOT_FOUND',
      message:
        `browser cdpUrl 'auto': expected a Chrome or Chromium executable (${searched.join(', ')}); ` +
        `${detail ?? 'none was found'}. Install one (apt-get install -y chromium) or set CHROME_PATH ` +
        '(or the executablePath option); conch never downloads a browser.',
    });
    this.name = 'BrowserNotFoundError';
    this.searched = searched;
  }
}
