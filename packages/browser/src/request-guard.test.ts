// Invariant: with an allowlist, no request of the tools' pages reaches a disallowed origin — redirect hops, meta refreshes, later script navigations, popups, frames, scripts, images, CSS imports, fetch, service workers, WebSockets — and the tools never return its content.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, type ApprovalAnswer, type ApprovalRequest, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { ProcessManager } from '@conch/process';
import { processesMentioning, waitFor } from '@conch/test-support';
import { decodePng } from '@conch/test-support/web';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { launchChrome, type ChromeInstance } from './launch-chrome.js';
import { browserPlugin } from './plugin.js';
import { requireChrome } from './test-support/chrome.js';

type Result = ToolResult & Record<string, any>;

const hasChrome = requireChrome();
const SECRET = 'SECRET FROM THE BLOCKED ORIGIN';
const GREEN: [number, number, number, number] = [0, 255, 0, 255];
/** A whole test, browser start included, on a busy 2-core machine. */
const TEST_TIMEOUT = 180_000;
/** Waiting for one browser event. */
const EVENT_TIMEOUT = 60_000;

/** A local origin: an http server on 127.0.0.1 that records every request and WebSocket handshake it gets. */
interface Origin {
  base: string;
  port: number;
  /** Paths requested, in order (`ws:` + path for WebSocket handshakes). */
  hits: string[];
  close(): Promise<void>;
}

async function serve(
  handle: (req: IncomingMessage, res: ServerResponse, origin: Origin) => void,
): Promise<Origin> {
  const sockets = new Set<Socket>();
  const server: Server = createServer();
  const origin: Origin = {
    base: '',
    port: 0,
    hits: [],
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((r) => server.close(r));
    },
  };
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('request', (req, res) => {
    origin.hits.push(req.url ?? '');
    handle(req, res, origin);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    origin.hits.push(`ws:${req.url ?? ''}`);
    const accept = createHash('sha1')
      .update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
      .digest('base64');
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin.port = (server.address() as { port: number }).port;
  origin.base = `http://127.0.0.1:${origin.port}`;
  return origin;
}

function send(res: ServerResponse, type: string, body: string | Buffer): void {
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

// A 1x1 PNG.
const PIXEL = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);

/** What the blocked origin serves: bright green pages carrying the secret, scripts that would announce themselves. */
function blockedSite(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '/';
  if (path.endsWith('.js')) return send(res, 'text/javascript', `document.title = 'BLOCKED SCRIPT RAN';`);
  if (path.endsWith('.css')) return send(res, 'text/css', 'body { background: #00ff00 !important; }');
  if (path.endsWith('.png')) return send(res, 'image/png', PIXEL);
  res.setHeader('access-control-allow-origin', '*');
  send(
    res,
    'text/html',
    `<!doctype html><title>blocked page</title><body style="margin:0;background:#00ff00;height:100vh"><p>${SECRET}</p></body>`,
  );
}

const PAGE_STYLE = '<style>body{margin:0;background:#fff;font:16px sans-serif}</style>';

/** The allowed origin's pages, each reaching for the blocked origin in one way. */
function allowedSite(blocked: () => Origin, later: { target?: string; waiting: ServerResponse[] }) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const B = blocked().base;
    const page = (title: string, body: string) =>
      send(
        res,
        'text/html',
        `<!doctype html><title>${title}</title>${PAGE_STYLE}<body><p>ALLOWED PAGE</p>${body}</body>`,
      );
    switch (req.url) {
      case '/':
        return page('allowed', '');
      case '/redirect':
        res.writeHead(302, { location: `${B}/secret` });
        return void res.end();
      case '/meta':
        return page('meta', `<meta http-equiv="refresh" content="0;url=${B}/meta">`);
      case '/later':
        // Navigates away once the test lets /go answer: after the navigation returned, by the page alone.
        return page(
          'later',
          `<script>fetch('/go').then(r => r.text()).then(u => { location.href = u; })</script>`,
        );
      case '/go':
        if (later.target) return send(res, 'text/plain', later.target);
        later.waiting.push(res);
        return;
      case '/frame':
        return page('frame', `<iframe src="${B}/frame" style="width:600px;height:400px;border:0"></iframe>`);
      case '/sub':
        return page(
          'sub',
          `<link rel="stylesheet" href="/style.css"><img src="${B}/image.png" width="200" height="200">` +
            `<script src="${B}/script.js"></script>` +
            `<p id="fetch">fetch pending</p><script>fetch('${B}/fetch').then(r => r.text(), () => 'fetch failed').then(t => { document.getElementById('fetch').textContent = t; })</script>`,
        );
      case '/style.css':
        return send(res, 'text/css', `@import url("${B}/imported.css");\np { color: #333; }`);
      case '/sw':
        return page('sw', `<script>navigator.serviceWorker.register('/sw.js')</script>`);
      case '/sw.js':
        return send(
          res,
          'text/javascript',
          `self.addEventListener('install', (e) => e.waitUntil(fetch('${B}/sw-install').catch(() => undefined)));
           self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));
           self.addEventListener('fetch', (e) => { if (new URL(e.request.url).pathname === '/proxied') e.respondWith(fetch('${B}/sw-proxied')); });`,
        );
      default:
        res.writeHead(404);
        res.end('not found');
    }
  };
}

/** Every 8th pixel of a screenshot; none may be the blocked origin's green. */
function greenPixels(path: string): number {
  const png = decodePng(path);
  let green = 0;
  for (let y = 0; y < png.height; y += 8)
    for (let x = 0; x < png.width; x += 8) if (png.at(x, y).every((v, i) => v === GREEN[i])) green++;
  return green;
}

const modes = [
  { mode: 'auto' as const, proxy: true },
  { mode: 'external' as const, proxy: false },
];

describe.skipIf(!hasChrome).each(modes)('with an allowlist ($mode browser)', ({ mode }) => {
  let dir: string;
  let registry: PluginRegistry;
  let allowed: Origin;
  let blocked: Origin;
  let later: { target?: string; waiting: ServerResponse[] };
  let answer: ApprovalAnswer;
  let asked: ApprovalRequest[];
  let external: { chrome: ChromeInstance; manager: ProcessManager; dir: string } | undefined;

  beforeAll(async () => {
    if (mode !== 'external') return;
    const chromeDir = mkdtempSync(join(tmpdir(), 'conch-guard-chrome-'));
    const manager = new ProcessManager({ tempDir: () => chromeDir, cwd: chromeDir });
    external = { chrome: await launchChrome({ manager, tempDir: chromeDir }), manager, dir: chromeDir };
  }, TEST_TIMEOUT);
  afterAll(async () => {
    if (!external) return;
    await external.chrome.close();
    await external.manager.dispose();
    expect(processesMentioning(external.dir)).toEqual([]);
    rmSync(external.dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'conch-guard-'));
    blocked = await serve(blockedSite);
    later = { waiting: [] };
    allowed = await serve(allowedSite(() => blocked, later));
    answer = 'deny';
    asked = [];
    registry = new PluginRegistry({ cwd: dir, tempRoot: dir, plugins: [permissionPlugin, browserPlugin] });
    await registry.expose('permission', {
      approve: (request: ApprovalRequest) => {
        asked.push(request);
        return Promise.resolve(answer);
      },
    });
    await registry.expose('browser', {
      cdpUrl: mode === 'auto' ? 'auto' : external!.chrome.httpUrl,
      allowedUrls: [allowed.base],
      evaluate: 'allow',
      screenshotDir: join(dir, 'shots'),
      navigationTimeoutMs: 60_000,
    });
  }, TEST_TIMEOUT);
  afterEach(async () => {
    for (const res of later.waiting) res.destroy();
    await registry.dispose();
    await allowed.close();
    await blocked.close();
    expect(processesMentioning(dir)).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  });

  const tool = async (name: string, args: Record<string, unknown> = {}) =>
    (await registry.execute(name, args)) as Result;

  /**
   * Resolves when the guard reports `url` blocked; rejects at once if the blocked origin receives
   * it instead (what happens without the guard), or after a generous timeout.
   */
  function blockedEvent(url: string, origin = blocked): Promise<Record<string, unknown>> {
    const path = new URL(url).pathname;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error(`no browser.blocked event for ${url}`)), EVENT_TIMEOUT);
      const poll = setInterval(() => {
        if (origin.hits.includes(path)) finish(new Error(`${url} reached the blocked server`));
      }, 20);
      const off = registry.events.on('browser.blocked', (event) => {
        if (event.url === url) finish(undefined, event);
      });
      function finish(error: Error | undefined, event?: unknown) {
        clearTimeout(timer);
        clearInterval(poll);
        off();
        if (error) reject(error);
        else resolve(event as Record<string, unknown>);
      }
    });
  }

  /** The tools read the allowed page: its text, its accessibility tree and a screenshot without the blocked green. */
  async function showsTheAllowedPage(): Promise<void> {
    for (const format of ['text', 'aria'] as const) {
      const snap = await tool('browser_snapshot', { format });
      expect(snap.error).toBeUndefined();
      expect(snap.snapshot).toContain('ALLOWED PAGE');
      expect(snap.snapshot).not.toContain(SECRET);
    }
    const shot = await tool('browser_screenshot', {});
    expect(shot.error).toBeUndefined();
    expect(greenPixels(shot.path as string)).toBe(0);
  }

  /** Every read of the page says it was blocked (URL_BLOCKED, naming the URL); nothing of it comes back. */
  async function showsTheBlockError(blockedUrl: string): Promise<void> {
    for (const [name, args] of [
      ['browser_snapshot', {}],
      ['browser_snapshot', { format: 'aria' }],
      ['browser_screenshot', {}],
      ['browser_evaluate', { expression: 'document.documentElement.outerHTML' }],
    ] as const) {
      const result = await tool(name, args);
      expect(result, name).toMatchObject({ error_code: 'URL_BLOCKED', blocked_url: blockedUrl });
      expect(result.error).toContain(`tried to open ${blockedUrl}`);
      expect(JSON.stringify(result)).not.toContain(SECRET);
      expect(result.path).toBeUndefined();
    }
  }

  /** Polls the snapshot until the page shows the block error; each read on the way shows the allowed page or that error. */
  async function waitForBlockError(): Promise<void> {
    await waitFor(
      async () => {
        const snap = await tool('browser_snapshot', {});
        expect(JSON.stringify(snap)).not.toContain(SECRET);
        if (snap.error_code === undefined) expect(snap.snapshot).toContain('ALLOWED PAGE');
        return snap.error_code === 'URL_BLOCKED';
      },
      { what: 'the page to show the block error', timeoutMs: EVENT_TIMEOUT },
    );
  }

  it(
    'stops a 302 redirect from the allowed origin to a blocked one: URL_BLOCKED naming the hop',
    async () => {
      const event = blockedEvent(`${blocked.base}/secret`);
      const nav = await tool('browser_navigate', { url: `${allowed.base}/redirect` });
      expect(await event).toMatchObject({ resourceType: 'Document', mainFrame: true, redirect: true });
      expect(nav).toMatchObject({ error_code: 'URL_BLOCKED', blocked_url: `${blocked.base}/secret` });
      expect(nav.error).toContain(
        `Opening ${allowed.base}/redirect was stopped (it redirected to ${blocked.base}/secret)`,
      );
      expect(nav.error).toContain(`"${blocked.base}" would allow it`);
      expect(blocked.hits).toEqual([]);
      await showsTheBlockError(`${blocked.base}/secret`);
      // An allowed navigation afterwards works as before.
      const after = await tool('browser_navigate', { url: `${allowed.base}/` });
      expect(after).toMatchObject({ status: 200 });
      await showsTheAllowedPage();
    },
    TEST_TIMEOUT,
  );

  it(
    'stops a meta refresh to a blocked origin',
    async () => {
      const event = blockedEvent(`${blocked.base}/meta`);
      const nav = await tool('browser_navigate', { url: `${allowed.base}/meta` });
      expect(JSON.stringify(nav)).not.toContain(SECRET);
      expect(await event).toMatchObject({ mainFrame: true, redirect: false });
      await waitForBlockError();
      expect(blocked.hits).toEqual([]);
      await showsTheBlockError(`${blocked.base}/meta`);
    },
    TEST_TIMEOUT,
  );

  it(
    'stops a navigation the page starts by itself later (location.href after the navigation returned)',
    async () => {
      const nav = await tool('browser_navigate', { url: `${allowed.base}/later` });
      expect(nav).toMatchObject({ status: 200, title: 'later' });
      await showsTheAllowedPage();
      const event = blockedEvent(`${blocked.base}/later`);
      later.target = `${blocked.base}/later`;
      await waitFor(() => later.waiting.length > 0, {
        what: 'the page to ask /go',
        timeoutMs: EVENT_TIMEOUT,
      });
      for (const res of later.waiting.splice(0)) send(res, 'text/plain', later.target);
      expect(await event).toMatchObject({ mainFrame: true });
      await waitForBlockError();
      expect(blocked.hits).toEqual([]);
      await showsTheBlockError(`${blocked.base}/later`);
    },
    TEST_TIMEOUT,
  );

  it(
    'stops window.open of a blocked URL (a new tab is guarded before it runs)',
    async () => {
      await tool('browser_navigate', { url: `${allowed.base}/` });
      const event = blockedEvent(`${blocked.base}/popup`);
      const opened = await tool('browser_evaluate', {
        expression: `window.open(${JSON.stringify(`${blocked.base}/popup`)}) !== null`,
      });
      expect(opened.result).toBe(true);
      expect(await event).toMatchObject({ resourceType: 'Document', mainFrame: true });
      expect(blocked.hits).toEqual([]);
      await showsTheAllowedPage();
    },
    TEST_TIMEOUT,
  );

  it(
    'stops an iframe of a blocked origin; the page around it is read as before',
    async () => {
      const event = blockedEvent(`${blocked.base}/frame`);
      const nav = await tool('browser_navigate', { url: `${allowed.base}/frame` });
      expect(nav).toMatchObject({ status: 200, title: 'frame', blocked_urls: [`${blocked.base}/frame`] });
      expect(await event).toMatchObject({ resourceType: 'Document', mainFrame: false });
      expect(blocked.hits).toEqual([]);
      await showsTheAllowedPage();
    },
    TEST_TIMEOUT,
  );

  it(
    'stops a blocked script, image, CSS import and fetch before they reach the blocked server',
    async () => {
      const events = Promise.all(
        ['script.js', 'image.png', 'imported.css', 'fetch'].map((p) => blockedEvent(`${blocked.base}/${p}`)),
      );
      const nav = await tool('browser_navigate', { url: `${allowed.base}/sub` });
      expect(nav).toMatchObject({ status: 200, title: 'sub' });
      expect(nav.blocked_urls).toEqual(
        expect.arrayContaining([
          `${blocked.base}/script.js`,
          `${blocked.base}/image.png`,
          `${blocked.base}/imported.css`,
        ]),
      );
      expect(nav.note).toMatch(/requests to URLs outside the browser's allowedUrls were blocked/);
      expect((await events).map((e) => e.resourceType)).toEqual(['Script', 'Image', 'Stylesheet', 'XHR']);
      expect(blocked.hits).toEqual([]);
      const fetched = await tool('browser_evaluate', {
        expression: `new Promise((r) => { const p = document.getElementById('fetch'); const done = () => p.textContent !== 'fetch pending'; if (done()) return r(p.textContent); new MutationObserver(() => done() && r(p.textContent)).observe(p, { childList: true, characterData: true, subtree: true }); })`,
      });
      expect(fetched.result).toBe('fetch failed');
      expect((await tool('browser_evaluate', { expression: 'document.title' })).result).toBe('sub');
      await showsTheAllowedPage();
    },
    TEST_TIMEOUT,
  );

  it(
    "stops a service worker's requests: its install fetch and the responses it would fetch for the page",
    async () => {
      const install = blockedEvent(`${blocked.base}/sw-install`);
      await tool('browser_navigate', { url: `${allowed.base}/sw` });
      expect(await install).toMatchObject({ resourceType: expect.any(String), mainFrame: false });
      const ready = await tool('browser_evaluate', {
        expression: 'navigator.serviceWorker.ready.then((r) => r.active !== null)',
      });
      expect(ready.result).toBe(true);
      const proxied = blockedEvent(`${blocked.base}/sw-proxied`);
      const nav = await tool('browser_navigate', { url: `${allowed.base}/proxied` });
      await proxied;
      expect(JSON.stringify(nav)).not.toContain(SECRET);
      expect(nav.error_code).toBeDefined(); // the worker's answer failed, so the navigation did
      expect(blocked.hits).toEqual([]);
      const snap = await tool('browser_snapshot', {});
      expect(JSON.stringify(snap)).not.toContain(SECRET);
      const shot = await tool('browser_screenshot', {});
      if (shot.path) expect(greenPixels(shot.path as string)).toBe(0);
    },
    TEST_TIMEOUT,
  );

  it(
    'lets an origin a human approved load (its own requests too) until the next navigation; a third origin stays blocked',
    async () => {
      const third = await serve((req, res) => {
        if (req.url === '/')
          return send(
            res,
            'text/html',
            `<!doctype html><title>approved</title>${PAGE_STYLE}<body><p>ALLOWED PAGE (approved)</p><img src="/own.png"><script src="${blocked.base}/from-approved.js"></script></body>`,
          );
        send(res, 'image/png', PIXEL);
      });
      try {
        answer = 'once';
        const event = blockedEvent(`${blocked.base}/from-approved.js`);
        const nav = await tool('browser_navigate', { url: `${third.base}/` });
        expect(asked).toHaveLength(1);
        expect(nav).toMatchObject({
          status: 200,
          title: 'approved',
          blocked_urls: [`${blocked.base}/from-approved.js`],
        });
        await event;
        expect(third.hits.filter((h) => h !== '/favicon.ico')).toEqual(['/', '/own.png']);
        expect(blocked.hits).toEqual([]);
        await showsTheAllowedPage();

        // The next navigation ends the approval: the approved origin is outside the allowlist again.
        await tool('browser_navigate', { url: `${allowed.base}/` });
        const again = blockedEvent(`${third.base}/again.png`, third);
        const loaded = await tool('browser_evaluate', {
          expression: `new Promise((r) => { const i = new Image(); i.onload = () => r('loaded'); i.onerror = () => r('blocked'); i.src = ${JSON.stringify(`${third.base}/again.png`)}; })`,
        });
        expect(loaded.result).toBe('blocked');
        await again;
      } finally {
        await third.close();
      }
      expect(third.hits).not.toContain('/again.png');
    },
    TEST_TIMEOUT,
  );

  it.runIf(mode === 'auto')(
    'refuses a WebSocket to a blocked origin at the context proxy; one to the allowed origin opens',
    async () => {
      await tool('browser_navigate', { url: `${allowed.base}/` });
      const open = (url: string) =>
        tool('browser_evaluate', {
          expression: `new Promise((r) => { const w = new WebSocket(${JSON.stringify(url)}); w.onopen = () => { r('open'); w.close(); }; w.onerror = () => r('error'); })`,
        });
      const event = new Promise<Record<string, unknown>>((resolve) => {
        const off = registry.events.on('browser.blocked', (e) => {
          if (e.resourceType === 'Connection') {
            off();
            resolve(e);
          }
        });
      });
      expect((await open(`ws://127.0.0.1:${blocked.port}/socket`)).result).toBe('error');
      expect(await event).toMatchObject({ url: `127.0.0.1:${blocked.port}`, mainFrame: false });
      expect(blocked.hits).toEqual([]);
      expect((await open(`ws://127.0.0.1:${allowed.port}/socket`)).result).toBe('open');
      expect(allowed.hits).toContain('ws:/socket');
      const snap = await tool('browser_snapshot', {});
      expect(snap.blocked_urls).toEqual([`127.0.0.1:${blocked.port}`]);
    },
    TEST_TIMEOUT,
  );
});
