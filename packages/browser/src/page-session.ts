import { ConchError } from '@conch/core';
import type { Logger } from '@conch/core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { BrowserService } from './browser-service.js';

/**
 * The page the model's browser tools work on: one browser context of its own (so an external
 * browser's own tabs and cookies are never touched), created on first use, recreated when the
 * browser reconnects or the page was closed. Calls run one at a time: two tools racing on one page
 * (a navigation under a screenshot) would give results that belong to neither.
 */
export class PageSession {
  private context: BrowserContext | undefined;
  private page: Page | undefined;
  private browser: Browser | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly service: BrowserService,
    private readonly options: { viewport: { width: number; height: number }; navigationTimeoutMs: number },
    private readonly logger: Logger,
  ) {}

  /** Runs `fn` on the page once the calls before it are done. */
  run<T>(fn: (page: Page) => Promise<T>): Promise<T> {
    const next = this.queue.then(async () => fn(await this.currentPage()));
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** The page's URL without waiting, or undefined before the first call. */
  currentUrl(): string | undefined {
    return this.page && !this.page.isClosed() ? this.page.url() : undefined;
  }

  private async currentPage(): Promise<Page> {
    if (this.closed)
      throw new ConchError({ code: 'BROWSER_CLOSED', message: 'the browser tools have been disposed' });
    const browser = await this.service.connect();
    if (browser !== this.browser || !browser.isConnected()) {
      this.browser = browser;
      this.context = undefined;
      this.page = undefined;
    }
    if (!this.context) {
      this.context = await browser.newContext({ viewport: this.options.viewport });
      this.context.setDefaultNavigationTimeout(this.options.navigationTimeoutMs);
      this.context.setDefaultTimeout(this.options.navigationTimeoutMs);
      this.page = undefined;
    }
    if (!this.page || this.page.isClosed()) this.page = await this.context.newPage();
    return this.page;
  }

  /** Closes the tools' context (never the browser); later calls fail. */
  async close(): Promise<void> {
    this.closed = true;
    const context = this.context;
    this.context = undefined;
    this.page = undefined;
    if (context && this.browser?.isConnected()) {
      try {
        await context.close();
      } catch (error) {
        this.logger.debug({ err: error }, 'browser: closing the tools context failed (browser gone)');
      }
    }
  }
}
