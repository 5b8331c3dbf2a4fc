// The browser: `launchChrome` (the supervisor spawns Chromium with conch's flags and a fresh
// profile, conch reads DevToolsActivePort and waits for /json/version) from the call to CDP
// ready, against Chromium's own start — spawned raw by node with the same flags, timed to its
// first /json/version answer (port from its "DevTools listening" line, the fastest signal there
// is). Measured alternately, so load hits both alike. Also, as information: the whole
// createEnvironment({ cdpUrl: 'auto' }) to ready, and close() to nothing left.
// Needs a Chrome/Chromium (CHROME_PATH or chromium on PATH); the suite reports itself skipped without one.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeSync } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { median } from '../lib.mjs';

import { chromeArgs, findChrome, launchChrome } from '@conch/browser';
import { createEnvironment } from '@conch/environment';

const RUNS = 12;

async function answers(url) {
  try {
    const res = await fetch(`${url}/json/version`, { signal: AbortSignal.timeout(1000) });
    return res.ok;
  } catch {
    return false;
  }
}

/** Raw: spawn Chromium, read the port from stderr, poll /json/version; returns ms to the first answer. */
async function rawStart(executable, root) {
  const profile = mkdtempSync(join(root, 'raw-'));
  const t0 = performance.now();
  const child = spawn(executable, chromeArgs(profile), {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
    // SIGKILLed below: its singleton dir (org.chromium.Chromium.*) lands in root, removed with it.
    env: { ...process.env, TMPDIR: root },
  });
  let port;
  let err = '';
  child.stderr.on('data', (d) => {
    err += d.toString();
    port ??= /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(err)?.[1];
  });
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`chromium exited: ${err.slice(-300)}`);
      if (port && (await answers(`http://127.0.0.1:${port}`))) return performance.now() - t0;
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(-child.pid, 'SIGKILL');
    await exited;
    // removeSync, not rmSync: the tree holds Chromium's socket (see @conch/core's stale-stat.ts).
    removeSync(profile, { recursive: true, force: true });
  }
}

export default async function () {
  let executable;
  try {
    executable = findChrome();
  } catch (error) {
    return [
      {
        name: `browser: skipped (${error.code})`,
        conch: NaN,
        baseline: NaN,
        unit: 'ms',
        ratio: NaN,
        goal: 'info',
        pass: true,
      },
    ];
  }
  const root = mkdtempSync(join(tmpdir(), 'conch-bench-browser-'));
  const manager = new ProcessManager({ tempDir: () => root, cwd: root });
  const conch = [];
  const raw = [];
  const closing = [];
  try {
    // One unmeasured round of each: disk caches, the supervisor's start.
    await rawStart(executable, root);
    await (await launchChrome({ manager, tempDir: root, executablePath: executable })).close();
    for (let i = 0; i < RUNS; i++) {
      raw.push(await rawStart(executable, root));
      const t0 = performance.now();
      const chrome = await launchChrome({ manager, tempDir: root, executablePath: executable });
      conch.push(performance.now() - t0);
      const t1 = performance.now();
      await chrome.close();
      closing.push(performance.now() - t1);
    }
    const envStart = [];
    const envClose = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const env = await createEnvironment({ workingDir: root, tmpRoot: root, cdpUrl: 'auto', plugins: {} });
      envStart.push(performance.now() - t0);
      const t1 = performance.now();
      await env.close();
      envClose.push(performance.now() - t1);
    }
    const c = median(conch);
    const b = median(raw);
    return [
      {
        name: 'browser auto start to CDP ready vs raw Chromium to first /json/version (median)',
        conch: c,
        baseline: b,
        unit: 'ms',
        ratio: c / b,
        // Chromium's own start is the same work done raw, measured alternately: conch's launch adds
        // a supervisor hop, a profile directory and the DevToolsActivePort read to it.
        goal: 'ratio <= 1.5',
        pass: c / b <= 1.5,
      },
      {
        name: 'browser close(): tree killed, profile removed (median)',
        conch: median(closing),
        baseline: NaN,
        unit: 'ms',
        ratio: NaN,
        goal: 'info',
        pass: true,
      },
      {
        name: "createEnvironment({ cdpUrl: 'auto' }) to ready vs raw Chromium (median)",
        conch: median(envStart),
        baseline: b,
        unit: 'ms',
        ratio: median(envStart) / b,
        goal: 'info',
        pass: true,
      },
      {
        name: 'environment close() with a browser (median)',
        conch: median(envClose),
        baseline: NaN,
        unit: 'ms',
        ratio: NaN,
        goal: 'info',
        pass: true,
      },
    ];
  } finally {
    await manager.dispose();
    removeSync(root, { recursive: true, force: true });
  }
}
