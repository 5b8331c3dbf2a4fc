import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  clearStaleStat,
  ConchError,
  onHostExit,
  removeSync,
  token,
  type EventBus,
  type Logger,
} from '@conch/core';
import type { Browser, BrowserType } from 'playwright-core';
import type { ChromeInstance } from './launch-chrome.js';
import type { CdpEndpoint } from './cdp-endpoint.js';

export type BrowserMode = 'auto' | 'external';

/** What `registry.status()` reports under `browser`. */
export interface BrowserStatus {
  mode: BrowserMode | 'off';
  cdpUrl?: string;
  httpUrl?: string;
  version?: string;
  /** The process manager's id and the pid of a local browser ('auto'). */
  processId?: string;
  pid?: number;
  /** Whether Playwright holds a connection (the tools connect on first use). */
  connected?: boolean;
  /** A local browser that exited on its own (crash, `!kill`). */
  exited?: boolean;
}

/**
 * The running browser of a registry, provided by the browser plugin under `BROWSER_SERVICE`:
 * its CDP address for any CDP client (Playwright, Puppeteer, Playwright MCP, browser-use), a
 * shared Playwright connection, and its lifecycle.
 */
export interface BrowserService {
  readonly mode: BrowserMode;
  /** The browser-level WebSocket endpoint (`ws://…/devtools/browser/<id>`). */
  readonly cdpUrl: string;
  /** `http://host:port` of the endpoint, when it has an HTTP side. */
  readonly httpUrl: string | undefined;
  readonly version: string | undefined;
  /** The local browser's process in the registry's process manager ('auto' only). */
  readonly processId: string | undefined;
  readonly pid: number | undefined;
  /** A Playwright `Browser` over CDP, connected on first call and shared; reconnects after a disconnect. */
  connect(): Promise<Browser>;
  status(): BrowserStatus;
  /**
   * Disconnects Playwright; a local browser is then killed (whole tree) and its profile removed.
   * An external browser is never closed, only disconnected from. Idempotent.
   */
  close(): Promise<void>;
}

/** The browser plugin's service: `registry.resolveOptional(BROWSER_SERVICE)`. */
export const BROWSER_SERVICE = token<BrowserService>('conch.browser.BrowserService');

interface ServiceInit {
  mode: BrowserMode;
  endpoint: CdpEndpoint;
  chrome?: ChromeInstance;
  connectTimeoutMs: number;
  logger: Logger;
  events?: EventBus;
}

/** Loads playwright-core only when a connection is made: hosts that only need the CDP URL never pay for it. */
async function loadChromium(): Promise<BrowserType> {
  clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
  const playwright = await import('playwright-core');
  return playwright.chromium;
}

/** The BrowserService over a probed endpoint (external) or a launched Chromium (auto). */
export function createBrowserService(init: ServiceInit): BrowserService {
  const { mode, endpoint, chrome, logger } = init;
  let connecting: Promise<Browser> | undefined;
  let closing: Promise<void> | undefined;
  let exited = false;
  if (chrome) {
    void chrome.process.result.then(() => {
      exited = true;
      if (!closing) logger.warn({ cdpUrl: endpoint.wsUrl }, 'browser: the local Chromium exited on its own');
    });
  }

  const connect = (): Promise<Browser> => {
    if (closing)
      return Promise.reject(
        new ConchError({ code: 'BROWSER_CLOSED', message: 'the browser has been closed' }),
      );
    connecting ??= (async () => {
      const chromium = await loadChromium();
      // Playwright makes a `playwright-artifacts-*` dir in $TMPDIR per connection and removes it on
      // close; a host that dies of a signal would leave it. The dirs that appear during the connect
      // are this connection's (playwright takes no dir of ours): removed on host exit too.
      const before = artifactDirs();
      const browser = await chromium.connectOverCDP(endpoint.wsUrl, {
        timeout: init.connectTimeoutMs,
        isLocal: mode === 'auto',
      });
      const made = [...artifactDirs()].filter((d) => !before.has(d));
      const removeHook =
        made.length > 0
          ? onHostExit(() => {
              for (const dir of made) removeSync(dir, { recursive: true, force: true });
            }, 'clean')
          : undefined;
      browser.on('disconnected', () => {
        connecting = undefined;
        removeHook?.();
      });
      return browser;
    })().catch((error: unknown) => {
      connecting = undefined;
      throw error;
    });
    return connecting;
  };

  const service: BrowserService = {
    mode,
    cdpUrl: endpoint.wsUrl,
    httpUrl: endpoint.httpUrl,
    version: endpoint.browser,
    processId: chrome?.process.id,
    pid: chrome?.process.pid,
    connect,
    status: () => ({
      mode,
      cdpUrl: endpoint.wsUrl,
      ...(endpoint.httpUrl ? { httpUrl: endpoint.httpUrl } : {}),
      ...(endpoint.browser ? { version: endpoint.browser } : {}),
      ...(chrome ? { processId: chrome.process.id, pid: chrome.process.pid, exited } : {}),
      connected: connecting !== undefined,
    }),
    close: () =>
      (closing ??= (async () => {
        const pending = connecting;
        connecting = undefined;
        if (pending) {
          try {
            // Over CDP, close() drops the contexts Playwright created and disconnects; it never
            // closes an external browser itself.
            await (await pending).close();
          } catch (error) {
            logger.debug({ err: error }, 'browser: disconnect failed (already gone)');
          }
        }
        if (chrome) await chrome.close();
        init.events?.emit('browser.closed', { mode, cdpUrl: endpoint.wsUrl });
      })()),
  };
  return service;
}

/** The `playwright-artifacts-*` dirs in $TMPDIR now. */
function artifactDirs(): Set<string> {
  const dir = tmpdir();
  try {
    return new Set(
      readdirSync(dir)
        .filter((n) => n.startsWith('playwright-artifacts-'))
        .map((n) => join(dir, n)),
    );
  } catch {
    return new Set();
  }
}
