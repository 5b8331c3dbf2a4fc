// Invariant: a local Chromium starts through the process manager with a private profile, answers CDP on 127.0.0.1, is listed as "[browser] Chrome Headless  CDP Ready ws://…", and after close, a failed start, an abort or the host's SIGKILL no Chromium process and no profile is left.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sweepStaleTempDirs } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BrowserStartError } from './errors/browser-start-error.js';
import { launchChrome } from './launch-chrome.js';
import { requireChrome } from './test-support/chrome.js';
import { processesMentioning, waitFor } from '@conch/test-support';
import { answersCdp } from '@conch/test-support/web';

const hasChrome = requireChrome();
let dir: string;
let manager: ProcessManager;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-launch-'));
  manager = new ProcessManager({ tempDir: () => dir, cwd: dir });
});
afterEach(async () => {
  await manager.dispose();
  expect(processesMentioning(dir)).toEqual([]);
  rmSync(dir, { recursive: true, force: true });
});

/** An executable script in the test dir standing in for a browser. */
function script(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

describe.skipIf(!hasChrome)('launchChrome', () => {
  it('starts a private headless Chromium that answers CDP, listed as the browser row, and close() leaves nothing', async () => {
    const chrome = await launchChrome({ manager, tempDir: dir });
    expect(chrome.wsUrl).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/devtools\/browser\/[0-9a-f-]+$/);
    expect(chrome.httpUrl).toBe(`http://127.0.0.1:${chrome.port}`);
    expect(chrome.version).toMatch(/Chrome\/\d+/);
    expect(await answersCdp(chrome.httpUrl)).toBe(true);
    expect(existsSync(join(chrome.profileDir, 'DevToolsActivePort'))).toBe(true);
    expect(chrome.profileDir.startsWith(dir)).toBe(true);

    const row = manager.list().find((p) => p.id === chrome.process.id)!;
    expect(row.command).toBe(`[browser] Chrome Headless  CDP Ready ${chrome.wsUrl}`);
    expect(row.isRunning).toBe(true);
    // Its whole tree (zygotes, renderers) runs with the private profile.
    expect(processesMentioning(chrome.profileDir).length).toBeGreaterThan(1);

    await chrome.close();
    expect(chrome.closed).toBe(true);
    expect(processesMentioning(chrome.profileDir)).toEqual([]);
    expect(existsSync(chrome.profileDir)).toBe(false);
    expect(await answersCdp(chrome.httpUrl)).toBe(false);
    expect(manager.list().find((p) => p.id === chrome.process.id)?.isRunning).toBe(false);
    await chrome.close(); // idempotent
  });

  it('two browsers get two free ports and two profiles', async () => {
    const [a, b] = await Promise.all([
      launchChrome({ manager, tempDir: dir }),
      launchChrome({ manager, tempDir: dir }),
    ]);
    try {
      expect(a.port).not.toBe(b.port);
      expect(a.profileDir).not.toBe(b.profileDir);
      expect(await answersCdp(a.httpUrl)).toBe(true);
      expect(await answersCdp(b.httpUrl)).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a browser that exits at once is a BrowserStartError with its output, and its profile is removed', async () => {
    const fake = script('crashing-browser', 'echo "cannot open display: missing libfoo" >&2; exit 3');
    const error = await launchChrome({ manager, tempDir: dir, executablePath: fake }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(BrowserStartError);
    expect((error as BrowserStartError).code).toBe('BROWSER_START_FAILED');
    expect((error as Error).message).toContain(
      `${fake} to start and answer the DevTools protocol; it exited (code 3)`,
    );
    expect((error as BrowserStartError).stderrTail).toBe('cannot open display: missing libfoo');
    expect(readdirSync(dir).filter((f) => f.startsWith('chrome-profile-'))).toEqual([]);
  });

  it('a browser that never answers times out, is killed and its profile removed', async () => {
    // A browser that hangs before opening its DevTools port.
    const fake = script('hanging-browser', 'exec sleep 300');
    const error = await launchChrome({
      manager,
      tempDir: dir,
      executablePath: fake,
      startTimeoutMs: 1500,
    }).catch((e: unknown) => e);
    expect((error as BrowserStartError).code).toBe('BROWSER_START_FAILED');
    expect((error as Error).message).toMatch(
      /did not answer within 1500 ms \(DevToolsActivePort was not written\)/,
    );
    expect(manager.list().filter((p) => p.isRunning)).toEqual([]);
    expect(readdirSync(dir).filter((f) => f.startsWith('chrome-profile-'))).toEqual([]);
  });

  it('an abort during start-up kills the half-started browser', async () => {
    const controller = new AbortController();
    const starting = launchChrome({ manager, tempDir: dir, signal: controller.signal });
    await waitFor(() => manager.list().some((p) => p.isRunning && p.pid !== undefined), {
      what: 'the spawn',
      timeoutMs: 10_000,
    });
    controller.abort();
    const error = await starting.catch((e: unknown) => e);
    expect((error as { code?: string }).code).toBe('ABORTED');
    expect(manager.list().filter((p) => p.isRunning)).toEqual([]);
    expect(processesMentioning(join(dir, 'chrome-profile-'))).toEqual([]);
    expect(readdirSync(dir).filter((f) => f.startsWith('chrome-profile-'))).toEqual([]);
  });
});

describe.skipIf(!hasChrome)('host SIGKILLed', () => {
  const hosts: ChildProcess[] = [];
  afterEach(() => {
    for (const host of hosts.splice(0)) host.kill('SIGKILL');
  });

  it('its supervisor kills the browser it started', async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const script = join(here, 'test-support', 'host-with-browser.mjs');
    // $TMPDIR is the test's dir, so Chromium's singleton dir lands there too.
    const host = spawn(process.execPath, [script, dir], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TMPDIR: dir },
    });
    hosts.push(host);
    let out = '';
    host.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor(() => out.includes('\n'), { what: 'the host to start its browser', timeoutMs: 60_000 });
    const info = JSON.parse(out.split('\n')[0]!) as { profileDir: string; httpUrl: string };
    expect(await answersCdp(info.httpUrl)).toBe(true);
    expect(processesMentioning(info.profileDir).length).toBeGreaterThan(0);

    const exited = new Promise((resolve) => host.once('exit', resolve));
    host.kill('SIGKILL');
    await exited;
    await waitFor(() => processesMentioning(info.profileDir).length === 0, {
      what: 'no Chromium left after the host died',
      timeoutMs: 10_000,
    });
    expect(await answersCdp(info.httpUrl)).toBe(false);

    // No exit hook ran: the profile and Chromium's singleton dir are still there, until the next
    // conch host's sweep removes them.
    const singletons = () => readdirSync(dir).filter((f) => f.startsWith('org.chromium.Chromium.'));
    expect(existsSync(info.profileDir)).toBe(true);
    expect(singletons()).toHaveLength(1);
    expect(sweepStaleTempDirs(dir)).toEqual([dirname(info.profileDir)]);
    expect(existsSync(info.profileDir)).toBe(false);
    expect(singletons()).toEqual([]);
  });
});

describe.skipIf(!hasChrome)('a host that is only a script', () => {
  it('runs to its end through launch, close() and dispose(), and leaves no Chromium', () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const script = join(here, 'test-support', 'script-host-close.mjs');
    const run = spawnSync(process.execPath, [script, dir], { encoding: 'utf8', timeout: 120_000 });
    expect(run.stdout).toBe('started\nclosed\ndisposed\n');
    expect(run.status).toBe(0);
    expect(processesMentioning(join(dir, 'chrome-profile-'))).toEqual([]);
  });
});
