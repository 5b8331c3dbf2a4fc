import './events.js';
import { definePlugin, type PluginContext } from '@conch/core';
import { ensureProcessManager } from '@conch/process';
import { BROWSER_SERVICE, createBrowserService, type BrowserService } from './browser-service.js';
import { probeCdp } from './cdp-endpoint.js';
import { browserConfigSchema, type BrowserConfig } from './config.js';
import { launchChrome } from './launch-chrome.js';
import { PageSession } from './page-session.js';
import { RequestPolicy } from './request-policy.js';
import { browserInstructions, browserTools } from './tools.js';
import { UrlAllowlist } from './url-allowlist.js';

/** Starts (auto) or reaches (external) the configured browser. */
async function startBrowser(ctx: PluginContext<BrowserConfig>): Promise<BrowserService> {
  const config = ctx.config;
  if (config.cdpUrl === 'auto') {
    const chrome = await launchChrome({
      manager: ensureProcessManager(ctx),
      tempDir: ctx.env.tempDir(),
      ...(config.executablePath ? { executablePath: config.executablePath } : {}),
      startTimeoutMs: config.startTimeoutMs,
      extraArgs: config.extraArgs,
      logger: ctx.logger,
    });
    return createBrowserService({
      mode: 'auto',
      endpoint: {
        wsUrl: chrome.wsUrl,
        httpUrl: chrome.httpUrl,
        browser: chrome.version,
        protocolVersion: undefined,
      },
      chrome,
      connectTimeoutMs: config.connectTimeoutMs,
      logger: ctx.logger,
      events: ctx.events,
    });
  }
  const endpoint = await probeCdp(config.cdpUrl!, { timeoutMs: config.connectTimeoutMs });
  ctx.logger.info(
    { cdpUrl: endpoint.wsUrl, version: endpoint.browser },
    'browser: external browser answers CDP',
  );
  return createBrowserService({
    mode: 'external',
    endpoint,
    connectTimeoutMs: config.connectTimeoutMs,
    logger: ctx.logger,
    events: ctx.events,
  });
}

/**
 * Plugin 'browser': a browser reachable over CDP and the model's tools on it (browser_navigate,
 * browser_snapshot, browser_screenshot, browser_evaluate). `cdpUrl: 'auto'` starts a private
 * headless Chromium owned by the registry's process manager; a ws:// or http:// URL uses an
 * external browser after checking that it answers; null (default) exposes nothing. The running
 * browser is provided as `BROWSER_SERVICE` for the host and other CDP clients. Every request the
 * tools' pages make is checked against `allowedUrls` (`browser.blocked` events for refusals).
 */
export const browserPlugin = definePlugin<BrowserConfig>({
  name: 'browser',
  version: '0.0.0',
  description:
    'A CDP browser (local headless Chromium, external, or none) and tools to navigate, read, screenshot and evaluate pages',
  configSchema: browserConfigSchema,
  async setup(ctx) {
    const config = ctx.config;
    if (config.cdpUrl === null) {
      ctx.reportStatus('browser', () => ({ mode: 'off' }));
      return { tools: [] };
    }
    const service = await startBrowser(ctx);
    let pages: PageSession | undefined;
    try {
      ctx.provide(BROWSER_SERVICE, service);
      ctx.reportStatus('browser', () => service.status());
      pages = new PageSession(
        service,
        {
          viewport: config.viewport,
          navigationTimeoutMs: config.navigationTimeoutMs,
          connectTimeoutMs: config.connectTimeoutMs,
          policy: new RequestPolicy(new UrlAllowlist(config.allowedUrls)),
          // Connections (WebSockets) go through a proxy on this machine's loopback: only a browser
          // conch started is known to reach it.
          proxy: service.mode === 'auto',
          onBlocked: (blocked) =>
            ctx.events.emit('browser.blocked', {
              url: blocked.url,
              resourceType: blocked.resourceType,
              mainFrame: blocked.mainFrame,
              redirect: blocked.redirect,
              reason: blocked.reason,
            }),
        },
        ctx.logger,
      );
      const tools = browserTools({ config, pages, cwd: ctx.env.cwd, tempDir: () => ctx.env.tempDir() });
      ctx.events.emit('browser.ready', {
        mode: service.mode,
        cdpUrl: service.cdpUrl,
        ...(service.processId ? { processId: service.processId } : {}),
        ...(service.pid === undefined ? {} : { pid: service.pid }),
      });
      const session = pages;
      return {
        tools,
        instructions: browserInstructions(config),
        dispose: async () => {
          await session.close();
          await service.close();
        },
      };
    } catch (error) {
      // Nothing after the start may leave the browser running.
      await pages?.close();
      await service.close();
      throw error;
    }
  },
});

export default browserPlugin;
