// Invariant: the browser plugin drives a real Chromium — a page served by a background command is navigated, read and screenshotted into a valid, non-blank PNG — asks the gate for URLs outside the allowlist and for scripts, uses an external browser without ever closing it, and exposes nothing without a cdpUrl.
import { createServer } from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import {
  BACKGROUND_SERVICE,
  PluginRegistry,
  type ApprovalAnswer,
  type ApprovalRequest,
  type ToolResult,
} from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { ProcessManager } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BROWSER_SERVICE } from './browser-service.js';
import { CdpUnreachableError } from './errors/cdp-unreachable-error.js';
import { launchChrome } from './launch-chrome.js';
import { browserPlugin } from './plugin.js';
import { requireChrome } from './test-support/chrome.js';
import { processesMentioning, waitFor } from '@conch/test-support';
import { announcedPort, answersCdp, decodePng, serveCommand, writeSite } from '@conch/test-support/web';

type Result = ToolResult & Record<string, any>;

const hasChrome = requireChrome();
let dir: string;
let registry: PluginRegistry;
let asked: ApprovalRequest[];
let answer: ApprovalAnswer;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-browser-plugin-'));
  asked = [];
  answer = 'deny';
  registry = new PluginRegistry({
    cwd: dir,
    tempRoot: dir,
    plugins: [permissionPlugin, cliPlugin, backgroundPlugin, browserPlugin],
  });
  await registry.expose('permission', {
    rules: { allow: ['python3 -u -m http.server *'] },
    approve: (request: ApprovalRequest) => {
      asked.push(request);
      return Promise.resolve(answer);
    },
  });
  registry.exposeSync('cli', {});
});
afterEach(async () => {
  await registry.dispose();
  expect(processesMentioning(dir)).toEqual([]);
  rmSync(dir, { recursive: true, force: true });
});

/** Serves the test site with a background cli command; resolves with its base URL once it answers. */
async function serveSite(): Promise<string> {
  const site = writeSite(dir);
  // Outside the sandbox (the host rule allows it): a server in the sandbox's own network namespace
  // is out of the browser's reach.
  const started = (await registry.execute('cli_based_tool', {
    command: serveCommand(site),
    background: true,
    sandbox: false,
    justification: 'the browser on the host must reach the test server',
  })) as Result;
  expect(started.background_task_id).toBeDefined();
  const background = registry.resolve(BACKGROUND_SERVICE);
  let port: number | undefined;
  await waitFor(
    async () => {
      port ??= announcedPort((await background.logs(started.background_task_id as string)).text);
      return port !== undefined;
    },
    { what: 'the server to announce its port', timeoutMs: 20_000 },
  );
  const base = `http://127.0.0.1:${port!}`;
  await waitFor(async () => (await fetch(base).catch(() => undefined))?.ok === true, {
    what: 'the server to answer',
    timeoutMs: 10_000,
  });
  return base;
}

describe('cdpUrl null (the default)', () => {
  it('exposes no browser tools and provides no browser', async () => {
    const tools = await registry.expose('browser', {});
    expect(tools).toEqual([]);
    expect(registry.tools().some((t) => t.name.startsWith('browser_'))).toBe(false);
    expect(registry.resolveOptional(BROWSER_SERVICE)).toBeUndefined();
    expect((await registry.status()).browser).toEqual({ mode: 'off' });
  });
});

describe.skipIf(!hasChrome)("cdpUrl 'auto'", () => {
  it('navigates to a page served by a background command, reads it and saves a valid, non-blank screenshot', async () => {
    const shots = join(dir, 'shots');
    await registry.expose('browser', { cdpUrl: 'auto', screenshotDir: shots });
    const browser = registry.resolve(BROWSER_SERVICE);
    expect(browser.mode).toBe('auto');
    expect(await answersCdp(browser.httpUrl!)).toBe(true);
    expect(registry.tools().map((t) => t.name)).toEqual(
      expect.arrayContaining([
        'browser_navigate',
        'browser_snapshot',
        'browser_screenshot',
        'browser_evaluate',
      ]),
    );
    const base = await serveSite();

    const nav = (await registry.execute('browser_navigate', { url: `${base}/` })) as Result;
    expect(nav).toMatchObject({ url: `${base}/`, title: 'conch test page', status: 200 });
    expect(asked).toEqual([]); // loopback is in the default allowlist

    const text = (await registry.execute('browser_snapshot', {})) as Result;
    expect(text.snapshot).toContain('Hello from conch');
    expect(text.snapshot).toContain('The browser tools read this paragraph.');
    expect(text.truncated).toBe(false);
    const aria = (await registry.execute('browser_snapshot', { format: 'aria' })) as Result;
    expect(aria.snapshot).toMatch(/heading "Hello from conch"/);
    expect(aria.snapshot).toMatch(/link "other page"/);
    const cut = (await registry.execute('browser_snapshot', { max_chars: 100, format: 'aria' })) as Result;
    expect(cut.truncated).toBe(true);
    expect(cut.total_chars).toBe(aria.total_chars);

    const shot = (await registry.execute('browser_screenshot', { name: 'home' })) as Result;
    expect(shot.path).toBe(join(shots, 'home.png'));
    expect(shot).toMatchObject({ width: 1280, height: 800 });
    const png = decodePng(shot.path as string);
    expect([png.width, png.height]).toEqual([1280, 800]);
    expect(png.distinctColors).toBeGreaterThan(2);
    expect(png.at(50, 50)).toEqual([255, 0, 0, 255]); // the red block
    expect(png.at(600, 700)).toEqual([255, 255, 255, 255]); // the white page
    const full = (await registry.execute('browser_screenshot', { full_page: true })) as Result;
    expect(full.path).toBe(join(shots, 'screenshot-1.png'));
    expect(decodePng(full.path as string).width).toBe(1280);

    // The browser is a process of the registry, in the panel's words.
    const row = registry
      .resolve<ProcessManager>(Symbol.for('conch.process.ProcessManager'))
      .list()
      .find((p) => p.id === browser.processId);
    expect(row?.command).toBe(`[browser] Chrome Headless  CDP Ready ${browser.cdpUrl}`);

    expect(processesMentioning(dir).length).toBeGreaterThan(1); // the browser's tree, profile under dir
    await registry.dispose();
    expect(processesMentioning(dir)).toEqual([]);
    expect(await answersCdp(browser.httpUrl!)).toBe(false);
  });

  it('asks before opening a URL outside the allowlist, and a denial leaves the page where it was', async () => {
    await registry.expose('browser', { cdpUrl: 'auto' });
    const denied = (await registry.execute('browser_navigate', { url: 'https://example.com/' })) as Result;
    expect(denied.permission_denied).toBe(true);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.display).toBe(
      `open https://example.com/ in the browser (not in the browser's allowedUrls; "https://example.com" would allow it)`,
    );
    const snap = (await registry.execute('browser_snapshot', {})) as Result;
    expect(snap.url).toBe('about:blank');
  });

  it('asks before evaluating a script; runs it once approved', async () => {
    await registry.expose('browser', { cdpUrl: 'auto' });
    const base = await serveSite();
    await registry.execute('browser_navigate', { url: base });
    const refused = (await registry.execute('browser_evaluate', { expression: 'document.title' })) as Result;
    expect(refused.permission_denied).toBe(true);
    expect(asked.at(-1)!.display).toBe(`run JavaScript in ${base}/: document.title`);
    answer = 'once';
    const ok = (await registry.execute('browser_evaluate', {
      expression: '[document.title, document.querySelectorAll("p").length]',
    })) as Result;
    expect(ok).toMatchObject({ result: ['conch test page', 1], type: 'array', truncated: false });
    const thrown = (await registry.execute('browser_evaluate', { expression: 'nope.nope' })) as Result;
    expect(thrown.error_code).toBe('EVALUATION_FAILED');
    expect(thrown.error).toMatch(/nope is not defined/);
  });

  it("leaves browser_evaluate out with evaluate: 'off'", async () => {
    await registry.expose('browser', { cdpUrl: 'auto', evaluate: 'off' });
    expect(registry.tools().map((t) => t.name)).not.toContain('browser_evaluate');
  });

  it('reports a refused connection as NAVIGATION_FAILED, a page that never loads as TIMED_OUT, and a killed browser as BROWSER_UNAVAILABLE', async () => {
    await registry.expose('browser', { cdpUrl: 'auto', navigationTimeoutMs: 1000 });
    const silent = createServer(() => {
      // never answers
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentPort = (silent.address() as { port: number }).port;
    const slow = (await registry.execute('browser_navigate', {
      url: `http://127.0.0.1:${silentPort}/`,
    })) as Result;
    silent.closeAllConnections();
    await new Promise((r) => silent.close(r));
    expect(slow.error_code).toBe('TIMED_OUT');
    expect(slow.error).toMatch(/timed out: .*1000ms exceeded/);

    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    await new Promise((r) => server.close(r));
    const refused = (await registry.execute('browser_navigate', { url: `127.0.0.1:${port}` })) as Result;
    expect(refused.error_code).toBe('NAVIGATION_FAILED');
    expect(refused.error).toMatch(/ERR_CONNECTION_REFUSED.*Nothing listens there/);

    const browser = registry.resolve(BROWSER_SERVICE);
    await registry
      .resolve<ProcessManager>(Symbol.for('conch.process.ProcessManager'))
      .kill(browser.processId!);
    const gone = (await registry.execute('browser_snapshot', {})) as Result;
    expect(gone.error_code).toBe('BROWSER_UNAVAILABLE');
    expect((await registry.status()).browser).toMatchObject({ exited: true });
  });
});

describe('external cdpUrl', () => {
  it.skipIf(!hasChrome)('uses a browser it did not start, and never closes it', async () => {
    const own = new ProcessManager({ tempDir: () => dir, cwd: dir });
    const chrome = await launchChrome({ manager: own, tempDir: dir });
    try {
      await registry.expose('browser', { cdpUrl: chrome.httpUrl });
      const browser = registry.resolve(BROWSER_SERVICE);
      expect(browser).toMatchObject({ mode: 'external', cdpUrl: chrome.wsUrl, processId: undefined });
      const base = await serveSite();
      const nav = (await registry.execute('browser_navigate', { url: base })) as Result;
      expect(nav.title).toBe('conch test page');
      await registry.dispose();
      expect(await answersCdp(chrome.httpUrl)).toBe(true);
      expect(chrome.process.isRunning).toBe(true);
    } finally {
      await chrome.close();
      await own.dispose();
    }
  });

  it('refuses an endpoint that does not answer, with a clear error, and exposes no tools', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    await new Promise((r) => server.close(r));
    const error = await registry
      .expose('browser', { cdpUrl: `http://127.0.0.1:${port}` })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CDP_UNREACHABLE' });
    expect((error as Error).cause).toBeInstanceOf(CdpUnreachableError);
    expect((error as Error).message).toContain(
      `at http://127.0.0.1:${port} (tried GET http://127.0.0.1:${port}/json/version)`,
    );
    expect(registry.isExposed('browser')).toBe(false);
    expect(registry.tools().some((t) => t.name.startsWith('browser_'))).toBe(false);
  });

  it('rejects a cdpUrl that is not a URL at expose time, naming the field', async () => {
    await expect(registry.exposeTool('browser', { cdpUrl: 'localhost:9222' })).rejects.toThrow(
      /cdpUrl: 'auto', null, or a ws:\/\/, wss:\/\/, http:\/\/ or https:\/\/ URL/,
    );
  });
});

it.skipIf(!hasChrome)(
  'removes the screenshots with the registry temp dir when no screenshotDir is set',
  async () => {
    await registry.expose('browser', { cdpUrl: 'auto' });
    const shot = (await registry.execute('browser_screenshot', {})) as Result;
    expect(shot.path).toMatch(/\/screenshots\/screenshot-1\.png$/);
    expect(existsSync(shot.path as string)).toBe(true);
    await registry.dispose();
    expect(existsSync(shot.path as string)).toBe(false);
  },
);
