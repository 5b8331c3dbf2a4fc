import { mkdir, writeFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import {
  ConchError,
  defineTool,
  PERMISSION_GATE,
  type PermissionRequest,
  type PluginScope,
  type ToolDefinition,
  type ToolResult,
} from '@conch/core';
import { PROCESS_MANAGER } from '@conch/process';
import { z } from 'zod';
import type { Page } from 'playwright-core';
import type { BrowserConfig } from './config.js';
import type { PageRequests, PageSession } from './page-session.js';
import { pngSize } from './png-size.js';
import type { BlockedRequest } from './request-guard.js';
import { UrlAllowlist } from './url-allowlist.js';

const NAVIGABLE = new Set(['http:', 'https:', 'file:', 'about:', 'data:']);

/** `localhost:3000` -> `http://localhost:3000`; what models often write for a dev server. */
export function normalizeUrl(input: string): URL | undefined {
  const text = input.trim();
  const withScheme =
    /^[a-z][a-z0-9+.-]*:\/\//i.test(text) || /^(about|data):/i.test(text) ? text : `http://${text}`;
  try {
    const url = new URL(withScheme);
    return NAVIGABLE.has(url.protocol) ? url : undefined;
  } catch {
    return undefined;
  }
}

/** A read-only action for the gate when one is exposed; nothing to decide without one. */
function readOnlyAction(ctx: Pick<PluginScope, 'resolveOptional'>, tool: string, summary: string) {
  if (!ctx.resolveOptional(PERMISSION_GATE)) return undefined;
  return { kind: 'action', tool, summary, readOnly: true } satisfies PermissionRequest;
}

function oneLine(text: string, max = 160): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

/** A failure the model can recover from: the seed's `error` plus a stable code and one line for UIs. */
function failure(error_code: string, error: string): ToolResult {
  return { error, error_code, display: oneLine(error) };
}

function messageOf(error: unknown): string {
  // Playwright errors carry a call log after the first line; the first line says what happened.
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n')[0]!.replace(/^\w+\.\w+: /, '');
}

/** Failures reaching the browser itself (closed, crashed, unreachable) vs. a page-level failure. */
function browserGone(error: unknown): boolean {
  return /Target page, context or browser has been closed|Browser has been closed|browser has disconnected|has been closed|ECONNREFUSED|connectOverCDP/i.test(
    error instanceof Error ? error.message : String(error),
  );
}

function unavailable(error: unknown): ToolResult {
  return failure(
    'BROWSER_UNAVAILABLE',
    `The browser is not available: ${messageOf(error)}. It may have been stopped or crashed; tell the user.`,
  );
}

/** A thrown error as the tool's result: the browser gone, the guard failing, or `code`. */
function pageFailure(error: unknown, code: string): ToolResult {
  if (browserGone(error)) return unavailable(error);
  if (ConchError.isInstance(error) && error.code === 'REQUEST_GUARD_FAILED')
    return failure('REQUEST_GUARD_FAILED', error.message);
  return failure(code, messageOf(error));
}

const BLOCKED_LISTED = 20;

/** localhost, 127.0.0.0/8 and ::1 as a URL spells them. */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

function hostPort(url: string): string | undefined {
  try {
    const parsed = new URL(url);
    const port =
      parsed.port || ({ 'http:': '80', 'https:': '443' } as Record<string, string>)[parsed.protocol];
    return port ? `${parsed.hostname}:${port}` : undefined;
  } catch {
    return undefined;
  }
}

/** `blocked_urls` and a note when requests were refused during the call (or since the last one). */
function blockedFields(all: readonly BlockedRequest[]): ToolResult {
  // Chromium preconnects to a frame's or a link's origin: a connection refused where a request to
  // the same host and port was refused too says nothing more.
  const refusedEndpoints = new Set(
    all.map((b) => (b.resourceType === 'Connection' ? undefined : hostPort(b.url))),
  );
  const blocked = all.filter((b) => b.resourceType !== 'Connection' || !refusedEndpoints.has(b.url));
  if (blocked.length === 0) return {};
  const urls = [...new Set(blocked.map((b) => b.url))];
  return {
    blocked_urls: urls.slice(0, BLOCKED_LISTED),
    note:
      `${blocked.length} request${blocked.length === 1 ? '' : 's'} to URLs outside the browser's allowedUrls ` +
      `${blocked.length === 1 ? 'was' : 'were'} blocked${urls.length > BLOCKED_LISTED ? ` (the first ${BLOCKED_LISTED} URLs listed)` : ''}. ` +
      'If the page needs them, the user can add their origins to allowedUrls.',
  };
}

/**
 * URL_BLOCKED for a read of the page: it shows the error page of a refused navigation, or (should
 * anything have slipped past the guard) is on a URL the policy refuses. Nothing of it is returned.
 */
function readRefusal(page: Page, requests: PageRequests, pages: PageSession): ToolResult | undefined {
  // The guard's record, not page.url(): the error page may be committing while the URL still names
  // the page before it.
  const blocked = requests.blockedNavigation();
  if (blocked) {
    const error =
      `The page tried to open ${blocked.url}${blocked.redirect ? ' (through a redirect)' : ''}, which was blocked: ${blocked.reason}. ` +
      'It shows an error page instead; nothing from that URL was loaded. Open an allowed URL with browser_navigate.';
    return { ...failure('URL_BLOCKED', error), blocked_url: blocked.url, url: page.url() };
  }
  const url = page.url();
  if (url.startsWith('chrome-error:')) return undefined; // Chrome's own error page (refused connection …)
  const verdict = pages.policy.judge(url);
  if (verdict.allowed) return undefined;
  const error = `The page is on ${url}, which the browser may not show: ${verdict.reason}. Nothing of it is returned; open an allowed URL with browser_navigate.`;
  return { ...failure('URL_BLOCKED', error), blocked_url: url, url };
}

/**
 * Waits until Chrome's error page for a refused navigation has committed (Playwright reports the
 * refusal before it does). Bounded by the navigation timeout; a page that never shows one is left
 * as it is.
 */
async function settleOnErrorPage(page: Page): Promise<void> {
  await page
    .waitForURL((url) => url.protocol === 'chrome-error:', { waitUntil: 'commit' })
    .catch(() => undefined);
}

/** URL_BLOCKED for a navigation that ended on the error page of a refused URL. */
function navigationRefusal(
  requested: string,
  blocked: BlockedRequest | undefined,
  others: readonly BlockedRequest[],
): ToolResult {
  const where =
    !blocked || blocked.url === requested
      ? ''
      : blocked.redirect
        ? ` (it redirected to ${blocked.url})`
        : ` (the page went on to ${blocked.url})`;
  const reason = blocked?.reason ?? "the URL is not in the browser's allowedUrls";
  const error =
    `Opening ${requested} was stopped${where}: ${reason}. The page shows an error page instead; ` +
    'nothing from the blocked URL was loaded.';
  return {
    ...blockedFields(others.filter((b) => b !== blocked && b.url !== blocked?.url)),
    ...failure('URL_BLOCKED', error),
    blocked_url: blocked?.url ?? requested,
  };
}

function capText(text: string, max: number): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  return { text: `${text.slice(0, max)}\n… (${text.length - max} more characters)`, truncated: true };
}

const navigateInput = z.strictObject({
  url: z
    .string()
    .min(1)
    .refine((u) => normalizeUrl(u) !== undefined, 'an absolute http(s), file, about or data URL')
    .describe('The URL to open, e.g. http://127.0.0.1:8000/ (a bare host:port means http://)'),
  wait_until: z
    .enum(['load', 'domcontentloaded', 'networkidle', 'commit'])
    .optional()
    .describe("When the navigation counts as done (default 'load')"),
});

const snapshotInput = z.strictObject({
  format: z
    .enum(['text', 'aria'])
    .optional()
    .describe("'text' (default): the page's visible text; 'aria': its accessibility tree as YAML"),
  max_chars: z.number().int().min(100).optional().describe('Characters to return at most'),
});

const screenshotInput = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'a file name of letters, digits, ".", "_" or "-"')
    .optional()
    .describe('File name for the PNG (saved in the screenshot directory); default screenshot-<n>.png'),
  full_page: z.boolean().optional().describe('Capture the whole scrollable page instead of the viewport'),
});

const evaluateInput = z.strictObject({
  expression: z
    .string()
    .min(1)
    .max(20_000)
    .describe(
      'A JavaScript expression evaluated in the page, e.g. document.title; its value must be JSON-serialisable',
    ),
});

export interface BrowserToolsDeps {
  config: BrowserConfig;
  pages: PageSession;
  /** The registry's cwd (relative screenshotDir) and temp dir (default screenshotDir). */
  cwd: string;
  tempDir: () => string;
}

/** The model's browser tools over one page session. */
export function browserTools(deps: BrowserToolsDeps): ToolDefinition[] {
  const { config, pages } = deps;
  const { allowlist } = pages.policy;
  const screenshotDir = () =>
    config.screenshotDir
      ? isAbsolute(config.screenshotDir)
        ? config.screenshotDir
        : resolve(deps.cwd, config.screenshotDir)
      : join(deps.tempDir(), 'screenshots');
  let shots = 0;

  const tools: ToolDefinition[] = [
    defineTool<z.output<typeof navigateInput>, ToolResult, BrowserConfig, URL>({
      name: 'browser_navigate',
      description:
        'Open a URL in the headless browser and wait for it to load. Returns { url, title, status }. ' +
        'Start local servers first (in the background) and navigate to http://127.0.0.1:<port>/.',
      inputSchema: navigateInput,
      annotations: { readOnlyHint: false, openWorldHint: true },
      prepare: (args) => normalizeUrl(args.url)!,
      permission: (_args, ctx, url) =>
        allowlist.match(url)
          ? readOnlyAction(ctx, 'browser_navigate', `open ${url.href}`)
          : {
              kind: 'action',
              tool: 'browser_navigate',
              summary: `open ${url.href} in the browser (not in the browser's allowedUrls; "${UrlAllowlist.suggestionFor(url)}" would allow it)`,
            },
      execute: async (args, ctx, url) => {
        // Outside the allowlist and still allowed: a human (or a host rule) approved it. Its origin
        // may load until the next navigation; every other request stays refused.
        const approved = !allowlist.match(url) && ctx.decision?.outcome === 'allow';
        // A loopback page may be served from inside the sandbox (a dev server a terminal session
        // started): its port is forwarded to the host's loopback; scan now rather than wait for
        // the next poll.
        if (isLoopback(url.hostname)) await ctx.resolveOptional(PROCESS_MANAGER)?.refreshForwardedPorts();
        try {
          return await pages.run(async (page, requests) => {
            // The page went for a refused URL on its own: let Chrome's error page land first, or it
            // would interrupt this navigation.
            if (requests.blockedNavigation()) await settleOnErrorPage(page);
            pages.policy.approve(approved ? url : undefined);
            requests.takeBlocked(); // refusals before this navigation are not its business
            requests.clearBlockedNavigation();
            let response;
            try {
              response = await page.goto(url.href, { waitUntil: args.wait_until ?? 'load' });
            } catch (error) {
              const blocked = requests.blockedNavigation();
              const message = messageOf(error);
              if (blocked || /ERR_BLOCKED_BY_CLIENT/.test(message)) {
                await settleOnErrorPage(page);
                return navigationRefusal(url.href, blocked, requests.takeBlocked());
              }
              // Through the context's proxy Chromium only says the proxy failed; say what it met.
              const failed = /ERR_SOCKS_CONNECTION_FAILED/.test(message)
                ? requests.connectionFailure(url.href)
                : undefined;
              if (failed) throw new Error(message.replace('ERR_SOCKS_CONNECTION_FAILED', failed));
              throw error;
            }
            // Loaded, then left for a refused URL while loading (a meta refresh, a script).
            const left = requests.blockedNavigation();
            if (left) {
              await settleOnErrorPage(page);
              return navigationRefusal(url.href, left, requests.takeBlocked());
            }
            const title = await page.title();
            const status = response?.status();
            const finalUrl = page.url();
            return {
              url: finalUrl,
              title,
              ...(status === undefined ? {} : { status }),
              ...blockedFields(requests.takeBlocked()),
              display: `${status ?? ''} ${title || finalUrl}`.trim(),
            };
          });
        } catch (error) {
          if (browserGone(error)) return unavailable(error);
          if (ConchError.isInstance(error) && error.code === 'REQUEST_GUARD_FAILED')
            return failure('REQUEST_GUARD_FAILED', error.message);
          const message = messageOf(error);
          return /Timeout/i.test(message)
            ? failure('TIMED_OUT', `Opening ${url.href} timed out: ${message}`)
            : failure(
                'NAVIGATION_FAILED',
                `Opening ${url.href} failed: ${message}${/ERR_CONNECTION_REFUSED/.test(message) ? '. Nothing listens there: is the server running and ready?' : ''}`,
              );
        }
      },
    }),

    defineTool<z.output<typeof snapshotInput>, ToolResult, BrowserConfig>({
      name: 'browser_snapshot',
      description:
        "Read the current page: its visible text (format 'text', default) or its accessibility tree " +
        "(format 'aria', YAML with roles, names and [ref=…] ids). Returns { url, title, snapshot, total_chars, truncated }.",
      inputSchema: snapshotInput,
      annotations: { readOnlyHint: true, openWorldHint: false },
      permission: (args, ctx) =>
        readOnlyAction(ctx, 'browser_snapshot', `read the page (${args.format ?? 'text'})`),
      execute: async (args) => {
        try {
          return await pages.run(async (page, requests) => {
            const refused = readRefusal(page, requests, pages);
            if (refused) return { ...blockedFields(requests.takeBlocked()), ...refused };
            const format = args.format ?? 'text';
            const raw =
              format === 'aria'
                ? await page.ariaSnapshot({ mode: 'ai' })
                : await page.evaluate('document.body ? document.body.innerText : ""');
            const text = String(raw ?? '');
            const cut = capText(text, args.max_chars ?? config.maxSnapshotChars);
            const title = await page.title();
            return {
              url: page.url(),
              title,
              format,
              snapshot: cut.text,
              total_chars: text.length,
              truncated: cut.truncated,
              ...blockedFields(requests.takeBlocked()),
              display: `${title || page.url()}: ${text.length} characters of ${format}`,
            };
          });
        } catch (error) {
          return pageFailure(error, 'SNAPSHOT_FAILED');
        }
      },
    }),

    defineTool<z.output<typeof screenshotInput>, ToolResult, BrowserConfig>({
      name: 'browser_screenshot',
      description:
        "Save a PNG screenshot of the current page (the viewport, or the whole page with full_page) in the host's " +
        'screenshot directory. Returns { path, width, height, bytes }.',
      inputSchema: screenshotInput,
      annotations: { readOnlyHint: true, openWorldHint: false },
      permission: (args, ctx) =>
        readOnlyAction(
          ctx,
          'browser_screenshot',
          `screenshot the page${args.full_page ? ' (full page)' : ''}`,
        ),
      execute: async (args) => {
        try {
          return await pages.run(async (page, requests) => {
            const refused = readRefusal(page, requests, pages);
            if (refused) return refused;
            // A tab behind a popup (window.open) draws no frames, and a screenshot would wait for one.
            await page.bringToFront();
            const data = await page.screenshot({ type: 'png', fullPage: args.full_page === true });
            const dir = screenshotDir();
            await mkdir(dir, { recursive: true });
            const base = args.name ?? `screenshot-${++shots}`;
            const path = join(dir, base.toLowerCase().endsWith('.png') ? base : `${base}.png`);
            await writeFile(path, data);
            const size = pngSize(data) ?? { width: 0, height: 0 };
            return {
              path,
              width: size.width,
              height: size.height,
              bytes: data.length,
              url: page.url(),
              display: `${path} (${size.width}x${size.height})`,
            };
          });
        } catch (error) {
          return pageFailure(error, 'SCREENSHOT_FAILED');
        }
      },
    }),
  ];

  if (config.evaluate !== 'off') {
    tools.push(
      defineTool<z.output<typeof evaluateInput>, ToolResult, BrowserConfig>({
        name: 'browser_evaluate',
        description:
          'Evaluate a small JavaScript expression in the current page and return its JSON value ' +
          '(e.g. document.title, [...document.querySelectorAll("a")].map(a => a.href)).',
        inputSchema: evaluateInput,
        annotations: { readOnlyHint: false, openWorldHint: true },
        // Page scripts can fetch, post forms and read what the page can: a human decides, unless
        // the host allowed evaluation outright.
        permission: (args) =>
          config.evaluate === 'allow'
            ? undefined
            : {
                kind: 'action',
                tool: 'browser_evaluate',
                summary: `run JavaScript in ${pages.currentUrl() ?? 'the page'}: ${oneLine(args.expression, 300)}`,
              },
        execute: async (args) => {
          try {
            return await pages.run(async (page, requests) => {
              const refused = readRefusal(page, requests, pages);
              if (refused) return refused;
              const value: unknown = await page.evaluate(args.expression);
              const json = value === undefined ? 'undefined' : JSON.stringify(value);
              const cut = capText(json ?? 'undefined', config.maxSnapshotChars);
              return {
                result: cut.truncated ? cut.text : value === undefined ? null : value,
                type: value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value,
                truncated: cut.truncated,
                display: oneLine(json ?? 'undefined'),
              };
            });
          } catch (error) {
            return pageFailure(error, 'EVALUATION_FAILED');
          }
        },
      }),
    );
  }
  return tools;
}

export function browserInstructions(config: BrowserConfig): string {
  return [
    'A headless browser is available through CDP. browser_navigate opens a URL; browser_snapshot reads the page as text or as an accessibility tree; browser_screenshot saves a PNG and returns its path' +
      (config.evaluate === 'off'
        ? '.'
        : '; browser_evaluate runs a JavaScript expression in the page (it asks the user first).'),
    `URLs matching ${config.allowedUrls.join(', ')} open at once; other URLs ask the user. Pages load only from those URLs (and from the origin the user approved, until the next navigation): every other request, redirect or navigation is blocked (URL_BLOCKED, blocked_urls).`,
    'To look at a local web app: start its server in the background (terminal with background: true), wait until it listens, then navigate to http://127.0.0.1:<port>/.',
  ].join('\n');
}
