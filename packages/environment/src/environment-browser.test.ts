// Invariant: with a real Chromium, an environment's browser starts ('auto'), answers CDP, opens a page served by a terminal background session and screenshots it into a valid non-blank PNG; closing kills the processes, then the browser, then removes the temp dir, leaving no Chromium — also after a failed start, with an external browser (never closed), on a browser session, and when the host is SIGKILLed.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChrome, CdpUnreachableError } from '@conch/browser';
import { NoSuchPluginError, PluginRegistry, type ToolResult } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEnvironment, type EnvironmentOptions } from './environment.js';
import { requireChrome } from './test-support/chrome.js';
import { descendants, processesMentioning, waitFor } from '@conch/test-support';
import { announcedPort, answersCdp, decodePng, serveCommand, writeSite } from '@conch/test-support/web';

type Result = ToolResult & Record<string, any>;

const hasChrome = requireChrome();
let root: string;
let work: string;
let tmpRoot: string;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-env-browser-')));
  work = join(root, 'work');
  tmpRoot = join(root, 'tmp');
  mkdirSync(work);
  mkdirSync(tmpRoot);
});
afterEach(async () => {
  expect(readdirSync(tmpRoot)).toEqual([]);
  expect(processesMentioning(tmpRoot)).toEqual([]);
  await waitFor(() => descendants(process.pid).length === 0, {
    what: 'every child process to exit',
    timeoutMs: 5_000,
  });
  rmSync(root, { recursive: true, force: true });
});

const SERVE_RULE = 'python3 -u -m http.server *';

function options(extra: EnvironmentOptions = {}): EnvironmentOptions {
  return {
    workingDir: work,
    tmpRoot,
    plugins: {
      permission: { rules: { allow: [SERVE_RULE, 'sleep *'] } },
      cli: {},
      background: {},
      terminal: {},
    },
    ...extra,
  };
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

describe.skipIf(!hasChrome)("cdpUrl 'auto'", () => {
  it('starts Chromium, serves a page from a terminal background session, navigates and screenshots it, and leaves nothing', async () => {
    let httpUrl = '';
    let base = '';
    {
      await using env = await createEnvironment(
        options({ cdpUrl: 'auto', browser: { screenshotDir: 'shots' } }),
      );
      const browser = env.browser!;
      expect(browser.mode).toBe('auto');
      expect(env.cdpUrl).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/devtools\/browser\//);
      httpUrl = browser.httpUrl!;
      expect(await answersCdp(httpUrl)).toBe(true);
      // The browser is a process of the environment, as the process panel and !ps show it.
      const row = env.processes.list().find((p) => p.id === browser.processId)!;
      expect(row.command).toBe(`[browser] Chrome Headless  CDP Ready ${env.cdpUrl}`);
      expect(row.isRunning).toBe(true);

      // A static server in a terminal background session; wait for it by polling the session.
      const site = writeSite(work);
      const started = (await env.registry.execute('terminal', {
        command: serveCommand(site),
        background: true,
      })) as Result;
      expect(started.state).toBe('background');
      let output = String(started.output ?? '');
      await waitFor(
        async () => {
          if (announcedPort(output) !== undefined) return true;
          const poll = (await env.registry.execute('terminal', {
            session_id: started.session_id,
            input: '',
          })) as Result;
          output += String(poll.output ?? '');
          return announcedPort(output) !== undefined;
        },
        { what: 'the server to announce its port', timeoutMs: 30_000 },
      );
      base = `http://127.0.0.1:${announcedPort(output)!}`;

      const nav = (await env.registry.execute('browser_navigate', { url: `${base}/` })) as Result;
      expect(nav).toMatchObject({ title: 'conch test page', status: 200 });
      const shot = (await env.registry.execute('browser_screenshot', { name: 'home.png' })) as Result;
      expect(shot.path).toBe(join(work, 'shots', 'home.png'));
      const png = decodePng(shot.path as string);
      expect([png.width, png.height]).toEqual([1280, 800]);
      expect(png.distinctColors).toBeGreaterThan(2);
      expect(png.at(10, 10)).toEqual([255, 0, 0, 255]);
      expect(png.at(1200, 780)).toEqual([255, 255, 255, 255]);
    }
    // Closed: no Chromium (afterEach checks processes under the temp dir), no server, no profile.
    expect(await answersCdp(httpUrl)).toBe(false);
    expect(
      await fetch(base).then(
        () => 'answered',
        () => 'refused',
      ),
    ).toBe('refused');
    expect(existsSync(join(work, 'shots', 'home.png'))).toBe(true); // the host's screenshot dir is kept
  });

  it('closes in the seed order: processes, then the browser, then the registry and the temp dir', async () => {
    const env = await createEnvironment(options({ cdpUrl: 'auto' }));
    const order: string[] = [];
    const browserId = env.browser!.processId!;
    env.events.on('process.exited', (e) => {
      order.push(e.id === browserId ? 'browser process exited' : 'process exited');
    });
    env.events.on('browser.closed', () =>
      order.push(`browser closed (temp dir exists: ${existsSync(env.tmpDir)})`),
    );
    env.events.on('registry.disposed', () => order.push('registry disposed'));
    env.processes.manager.spawn('sleep', ['300']);
    await env.registry.execute('cli_based_tool', { command: 'sleep 301', background: true });
    await waitFor(() => env.processes.list().filter((p) => p.isRunning).length === 3, {
      what: 'two commands',
      timeoutMs: 10_000,
    });
    await env.close();
    expect(order).toEqual([
      'process exited',
      'process exited',
      'browser process exited',
      'browser closed (temp dir exists: true)',
      'registry disposed',
    ]);
    expect(existsSync(env.tmpDir)).toBe(false);
  });

  it('undoes a start that fails after the browser started: Chromium killed, temp dir removed', async () => {
    const registry = new PluginRegistry({ cwd: work, tempRoot: tmpRoot });
    let readyAt: string | undefined;
    registry.events.on('browser.ready', (e) => (readyAt = e.cdpUrl));
    const error = await createEnvironment({
      registry,
      tmpRoot,
      plugins: { permission: {}, browser: { cdpUrl: 'auto' }, 'not-installed': {} },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoSuchPluginError);
    expect(readyAt).toMatch(/^ws:\/\//);
    expect(await answersCdp(`http://${new URL(readyAt!).host}`)).toBe(false);
    expect(registry.disposed).toBe(true);
  });

  it('browserSession() shares the running browser and leaves it running', async () => {
    await using env = await createEnvironment(options({ cdpUrl: 'auto' }));
    {
      await using session = await env.browserSession();
      expect(session).toMatchObject({ shared: true, cdpUrl: env.cdpUrl });
    }
    expect(await answersCdp(env.browser!.httpUrl!)).toBe(true);
  });
});

describe('external cdpUrl', () => {
  it.skipIf(!hasChrome)(
    'uses a browser the test started, exposes the tools, and never closes it',
    async () => {
      const outside = join(root, 'outside');
      mkdirSync(outside);
      const manager = new ProcessManager({ tempDir: () => outside, cwd: outside });
      const chrome = await launchChrome({ manager, tempDir: outside });
      try {
        const env = await createEnvironment(options({ cdpUrl: chrome.httpUrl }));
        expect(env.browser).toMatchObject({ mode: 'external', cdpUrl: chrome.wsUrl, processId: undefined });
        expect(env.registry.tools().map((t) => t.name)).toContain('browser_navigate');
        const nav = (await env.registry.execute('browser_navigate', { url: 'about:blank' })) as Result;
        expect(nav.url).toBe('about:blank');
        await env.close();
        expect(await answersCdp(chrome.httpUrl)).toBe(true);
      } finally {
        await chrome.close();
        await manager.dispose();
      }
    },
  );

  it('refuses an unreachable URL with a clear error, and undoes the start', async () => {
    const port = await closedPort();
    const error = await createEnvironment(options({ cdpUrl: `ws://127.0.0.1:${port}` })).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CdpUnreachableError);
    expect((error as CdpUnreachableError).code).toBe('CDP_UNREACHABLE');
    expect((error as Error).message).toBe(
      `browser cdpUrl: expected a browser answering the Chrome DevTools Protocol at ws://127.0.0.1:${port} ` +
        `(tried GET http://127.0.0.1:${port}/json/version); it did not answer: connect ECONNREFUSED 127.0.0.1:${port}. ` +
        "Start Chrome with --remote-debugging-port=9222 (and pass http://127.0.0.1:9222), or use cdpUrl: 'auto' for a private headless Chromium.",
    );
  });
});

describe.skipIf(!hasChrome)('no browser (the default)', () => {
  it('has no browser tools, and browserSession() starts a temporary browser that closes with the session or the environment', async () => {
    const env = await createEnvironment(options());
    expect(env.browser).toBeUndefined();
    expect(env.registry.tools().some((t) => t.name.startsWith('browser_'))).toBe(false);

    let httpUrl = '';
    {
      await using session = await env.browserSession();
      expect(session.shared).toBe(false);
      httpUrl = session.httpUrl!;
      expect(await answersCdp(httpUrl)).toBe(true);
      expect(
        env.processes
          .list()
          .some((p) => p.isRunning && p.command === `[browser] Chrome Headless  CDP Ready ${session.cdpUrl}`),
      ).toBe(true);
    }
    expect(await answersCdp(httpUrl)).toBe(false);

    const left = await env.browserSession();
    expect(await answersCdp(left.httpUrl!)).toBe(true);
    await env.close();
    expect(await answersCdp(left.httpUrl!)).toBe(false);
  });
});

describe.skipIf(!hasChrome)('host SIGKILLed', () => {
  const hosts: ChildProcess[] = [];
  afterEach(() => {
    for (const host of hosts.splice(0)) host.kill('SIGKILL');
  });

  it('its supervisor kills the browser and the commands', async () => {
    const script = join(dirname(fileURLToPath(import.meta.url)), 'test-support', 'host-with-environment.mjs');
    const host = spawn(process.execPath, [script, work, tmpRoot], { stdio: ['ignore', 'pipe', 'inherit'] });
    hosts.push(host);
    let out = '';
    host.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor(() => out.includes('\n'), { what: 'the host to start its environment', timeoutMs: 60_000 });
    const info = JSON.parse(out.split('\n')[0]!) as { tmpDir: string; httpUrl: string };
    expect(await answersCdp(info.httpUrl)).toBe(true);
    expect(processesMentioning(info.tmpDir).length).toBeGreaterThan(1); // Chromium's tree and the sleep

    const exited = new Promise((resolve) => host.once('exit', resolve));
    host.kill('SIGKILL');
    await exited;
    await waitFor(() => processesMentioning(info.tmpDir).length === 0, {
      what: 'nothing left after the host died',
      timeoutMs: 10_000,
    });
    expect(await answersCdp(info.httpUrl)).toBe(false);
    // Nobody is left to remove a SIGKILLed host's temp dir: that is the one thing it leaves.
    rmSync(info.tmpDir, { recursive: true, force: true });
  });
});
