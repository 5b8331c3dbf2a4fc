import { ConchError } from '@conch/core';
import type { Logger } from '@conch/core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { AllowlistProxy } from './allowlist-proxy.js';
import type { BrowserService } from './browser-service.js';
import { RequestGuard, type BlockedRequest } from './request-guard.js';
import type { RequestPolicy } from './request-policy.js';

export interface PageSessionOptions {
  viewport: { width: number; height: number };
  navigationTimeoutMs: number;
  /** How long attaching the request guard may take. */
  connectTimeoutMs: number;
  /** What the pages may load; judged on every request they make. */
  policy: RequestPolicy;
  /**
   * Also send the context's connections through a SOCKS proxy that only connects to allowed hosts
   * and ports (WebSockets, which request interception does not see). Only for a browser on this
   * machine: the proxy listens on this machine's 127.0.0.1.
   */
  proxy: boolean;
  /** Hears every refused request and connection. */
  onBlocked?: (blocked: BlockedRequest) => void;
}

/** What a tool learns about the page's requests besides the page itself. */
export interface PageRequests {
  /**
   * The refused main-frame navigation the page shows (or is about to show) Chrome's error page
   * for: the page's last main-frame request was refused.
   */
  blockedNavigation(): BlockedRequest | undefined;
  /** Forgets it (a navigation of the tools starts; about:blank and data: make no request). */
  clearBlockedNavigation(): void;
  /** Requests refused since the last call. */
  takeBlocked(): BlockedRequest[];
  /**
   * Chromium's name for why the context's proxy could not connect to `url`'s host (the browser
   * itself only says ERR_SOCKS_CONNECTION_FAILED), when a proxy is in use and it failed.
   */
  connectionFailure(url: string): string | undefined;
}

/**
 * The page the model's browser tools work on: one browser context of its own (so an external
 * browser's own tabs and cookies are never touched), created on first use, recreated when the
 * browser reconnects or the page was closed. Calls run one at a time: two tools racing on one page
 * (a navigation under a screenshot) would give results that belong to neither.
 *
 * Every request of the context — its tabs and popups, frames, workers and service workers — is
 * judged by the policy through a RequestGuard before it leaves the browser; the guard is in place
 * before the first page can load anything. If the guard's connection is lost, the context is
 * closed at once and the next call starts over with a new guard.
 */
export class PageSession {
  private context: BrowserContext | undefined;
  private page: Page | undefined;
  private pageTargetId: string | undefined;
  private browser: Browser | undefined;
  private guard: RequestGuard | undefined;
  private proxy: AllowlistProxy | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private dropping: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly service: BrowserService,
    private readonly options: PageSessionOptions,
    private readonly logger: Logger,
  ) {}

  /** What the pages may load (the tools' permission check and approvals use it too). */
  get policy(): RequestPolicy {
    return this.options.policy;
  }

  /** Runs `fn` on the page once the calls before it are done. */
  run<T>(fn: (page: Page, requests: PageRequests) => Promise<T>): Promise<T> {
    const next = this.queue.then(async () => {
      const page = await this.currentPage();
      const guard = this.guard!;
      const targetId = this.pageTargetId!;
      return fn(page, {
        blockedNavigation: () => guard.blockedNavigation(targetId),
        clearBlockedNavigation: () => guard.clearBlockedNavigation(targetId),
        takeBlocked: () => guard.takeBlocked(),
        connectionFailure: (url) => this.proxy?.connectionFailure(url),
      });
    });
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
    if (this.dropping) await this.dropping;
    const browser = await this.service.connect();
    if (browser !== this.browser || !browser.isConnected()) {
      this.browser = browser;
      this.context = undefined;
      this.page = undefined;
      await this.guard?.close();
      this.guard = undefined;
    }
    if (!this.guard) {
      const guard = await RequestGuard.start(this.service.cdpUrl, {
        policy: this.options.policy,
        logger: this.logger,
        timeoutMs: this.options.connectTimeoutMs,
        ...(this.options.onBlocked ? { onBlocked: this.options.onBlocked } : {}),
      });
      guard.onLost(() => {
        // Fail closed: pages whose requests nobody checks any more are closed now, not at the next call.
        this.dropping ??= this.drop().finally(() => {
          this.dropping = undefined;
        });
      });
      this.guard = guard;
    }
    if (!this.context) {
      if (this.options.proxy && !this.proxy) {
        const guard = this.guard;
        this.proxy = await AllowlistProxy.start({
          judge: (host, port) => this.options.policy.judgeEndpoint(host, port),
          onBlocked: (endpoint, reason) =>
            guard.record({
              url: endpoint,
              resourceType: 'Connection',
              mainFrame: false,
              redirect: false,
              reason,
              at: Date.now(),
            }),
          logger: this.logger,
        });
      }
      this.context = await browser.newContext({
        viewport: this.options.viewport,
        ...(this.proxy ? { proxy: { server: this.proxy.url } } : {}),
      });
      this.context.setDefaultNavigationTimeout(this.options.navigationTimeoutMs);
      this.context.setDefaultTimeout(this.options.navigationTimeoutMs);
      this.page = undefined;
    }
    if (!this.page || this.page.isClosed()) {
      const page = await this.context.newPage();
      try {
        this.pageTargetId = await this.protect(this.context, page);
      } catch (error) {
        await page.close().catch(() => undefined);
        throw error;
      }
      this.page = page;
    }
    return this.page;
  }

  /** Puts the page's context under the guard; resolves with the page's CDP target id. */
  private async protect(context: BrowserContext, page: Page): Promise<string> {
    const cdp = await context.newCDPSession(page);
    let info: { targetId: string; browserContextId?: string };
    try {
      ({ targetInfo: info } = await cdp.send('Target.getTargetInfo'));
    } finally {
      await cdp.detach().catch(() => undefined);
    }
    if (!info.browserContextId)
      throw new ConchError({
        code: 'REQUEST_GUARD_FAILED',
        message: 'the browser did not say which browser context the tools page belongs to',
      });
    await this.guard!.protect(info.targetId, info.browserContextId);
    return info.targetId;
  }

  /** Closes the context and forgets the guard (it lost its connection). */
  private async drop(): Promise<void> {
    const context = this.context;
    this.context = undefined;
    this.page = undefined;
    const guard = this.guard;
    this.guard = undefined;
    await guard?.close();
    if (context) {
      try {
        await context.close();
      } catch (error) {
        this.logger.debug({ err: error }, 'browser: closing an unguarded context failed (browser gone)');
      }
    }
  }

  /** Closes the tools' context (never the browser), the guard and the proxy; later calls fail. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.dropping) await this.dropping;
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
    await this.guard?.close();
    this.guard = undefined;
    await this.proxy?.close();
    this.proxy = undefined;
  }
}
