// Invariant: an external cdpUrl is accepted only when a DevTools endpoint really answers at it (http, ws with or without a path), and otherwise the error says what was tried and why it failed.
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessManager } from '@conch/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeCdp } from './cdp-endpoint.js';
import { CdpUnreachableError } from './errors/cdp-unreachable-error.js';
import { InvalidBrowserOptionError } from './errors/invalid-browser-option-error.js';
import { launchChrome, type ChromeInstance } from './launch-chrome.js';
import { requireChrome } from './test-support/chrome.js';

const hasChrome = requireChrome();

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

describe.skipIf(!hasChrome)('probeCdp against a real browser', () => {
  let dir: string;
  let manager: ProcessManager;
  let chrome: ChromeInstance;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'conch-cdp-'));
    manager = new ProcessManager({ tempDir: () => dir, cwd: dir });
    chrome = await launchChrome({ manager, tempDir: dir });
  });
  afterAll(async () => {
    await chrome.close();
    await manager.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('resolves an http endpoint to its browser WebSocket URL', async () => {
    const endpoint = await probeCdp(chrome.httpUrl);
    expect(endpoint.wsUrl).toBe(chrome.wsUrl);
    expect(endpoint.httpUrl).toBe(chrome.httpUrl);
    expect(endpoint.browser).toMatch(/Chrome\//);
    expect(endpoint.protocolVersion).toBe('1.3');
  });

  it('keeps a ws URL with a path, and completes one without', async () => {
    expect((await probeCdp(chrome.wsUrl)).wsUrl).toBe(chrome.wsUrl);
    expect((await probeCdp(`ws://127.0.0.1:${chrome.port}`)).wsUrl).toBe(chrome.wsUrl);
  });

  it('rewrites the reported host to the one the caller used (port forwards, container names)', async () => {
    const endpoint = await probeCdp(`http://localhost:${chrome.port}/`);
    expect(endpoint.wsUrl).toBe(chrome.wsUrl.replace('127.0.0.1', 'localhost'));
  });
});

describe('probeCdp', () => {
  it('says clearly when nothing answers', async () => {
    const port = await closedPort();
    const error = await probeCdp(`ws://127.0.0.1:${port}/devtools/browser/abc`, { timeoutMs: 2000 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CdpUnreachableError);
    const e = error as CdpUnreachableError;
    expect(e.code).toBe('CDP_UNREACHABLE');
    expect(e.message).toContain(
      `expected a browser answering the Chrome DevTools Protocol at ws://127.0.0.1:${port}/devtools/browser/abc`,
    );
    expect(e.message).toContain(`GET http://127.0.0.1:${port}/json/version, then a WebSocket handshake`);
    expect(e.message).toMatch(/ECONNREFUSED/);
    expect(e.message).toMatch(/--remote-debugging-port=9222/);
  });

  describe('an HTTP server that is not a browser', () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = createServer((req, res) => {
        if (req.url === '/json/version') res.end('{"hello":"world"}');
        else res.writeHead(404).end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => new Promise((r) => server.close(r)));

    it('is refused with what it answered', async () => {
      const error = await probeCdp(`http://127.0.0.1:${port}`).catch((e: unknown) => e);
      expect((error as CdpUnreachableError).code).toBe('CDP_UNREACHABLE');
      expect((error as Error).message).toMatch(
        /JSON without a webSocketDebuggerUrl, so it is not a DevTools endpoint/,
      );
      const ws = await probeCdp(`ws://127.0.0.1:${port}/devtools/browser/x`).catch((e: unknown) => e);
      expect((ws as Error).message).toMatch(/answered HTTP 404 instead of accepting a WebSocket/);
    });
  });

  it.each(['auto', 'localhost:9222', 'ftp://127.0.0.1:9222', ''])(
    'refuses %j as a cdpUrl, naming the field',
    async (url) => {
      const error = await probeCdp(url).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidBrowserOptionError);
      expect((error as Error).message).toMatch(
        /^browser option 'cdpUrl': expected a ws:\/\/, wss:\/\/, http:\/\/ or https:\/\/ URL/,
      );
    },
  );
});
