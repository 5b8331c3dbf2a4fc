// Invariant: a host that dies of a signal it does not handle (SIGTERM, SIGINT, SIGHUP) or calls
// process.exit() without dispose()/close() leaves nothing in $TMPDIR: not the registry's temp dir,
// not the environment's, not a Chromium profile, and no Chromium or command process — and it still
// dies of that signal.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processesMentioning, waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { requireChrome } from './test-support/chrome.js';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
let root: string;
const hosts: ChildProcess[] = [];
beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-host-signal-')));
});
afterEach(() => {
  // A test that failed before killing its host: the host dies now (its exit hooks clean up).
  for (const host of hosts.splice(0))
    if (host.exitCode === null && host.signalCode === null) host.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

/** Starts a host whose $TMPDIR is `root/tmp`; it prints one JSON line once ready, then idles. */
function startHost(body: string, ending: string) {
  const tmp = join(root, 'tmp');
  const ws = join(root, 'ws');
  const script = `
    import { mkdirSync } from 'node:fs';
    mkdirSync(${JSON.stringify(tmp)}, { recursive: true });
    mkdirSync(${JSON.stringify(ws)}, { recursive: true });
    ${body}
    setInterval(() => {}, 1000);
    ${ending}
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: packageDir,
    env: { ...process.env, TMPDIR: tmp, HOME: join(root, 'home'), MARK: `mark-${root.slice(-8)}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  hosts.push(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { child, tmp, ended, out: () => out, err: () => err };
}

const registryHost = `
  import { PluginRegistry } from '@conch/core';
  import { permissionPlugin } from '@conch/permission';
  import { cliPlugin } from '@conch/cli';
  import { backgroundPlugin } from '@conch/background';
  const registry = new PluginRegistry({ cwd: process.env.HOME + '/../ws', plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  for (const p of ['permission', 'background', 'cli']) await registry.exposeTool(p, {});
  const task = await registry.execute('cli_based_tool', { command: "sh -c 'sleep 300; echo " + process.env.MARK + "-done'", background: true });
  await registry.execute('cli_based_tool', { command: 'seq 1 100000' });
  const { readdirSync } = await import('node:fs');
  console.log(JSON.stringify({ temp: registry.tempDir(), prefix: registry.status().processes?.cookiePrefix, tmp: readdirSync(process.env.TMPDIR) }));
`;

describe('a host that dies without disposing', () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)(
    'a registry host killed by an unhandled %s leaves no temp dir and no process',
    async (signal) => {
      const host = startHost(registryHost, '');
      await waitFor(() => host.out().includes('\n'), { what: 'host ready', timeoutMs: 60_000 });
      const ready = JSON.parse(host.out()) as { temp: string; tmp: string[] };
      expect(existsSync(ready.temp)).toBe(true);
      expect(processesMentioning(`mark-${root.slice(-8)}`).length).toBeGreaterThan(0);
      expect(ready.temp.startsWith(host.tmp)).toBe(true);
      host.child.kill(signal);
      const end = await host.ended;
      expect(end.signal, host.err()).toBe(signal);
      expect(readdirSync(host.tmp)).toEqual([]);
      await waitFor(() => processesMentioning(`mark-${root.slice(-8)}`).length === 0, {
        what: "the host's background task gone",
        timeoutMs: 30_000,
      });
    },
  );

  it('process.exit() without dispose leaves no temp dir', async () => {
    const host = startHost(registryHost, 'process.exit(3);');
    const end = await host.ended;
    expect(end.code, host.err()).toBe(3);
    expect(readdirSync(host.tmp)).toEqual([]);
  });

  it.runIf(requireChrome())(
    'an environment with a local Chromium, killed by SIGTERM: no profile, no temp dir, no Chromium left',
    async () => {
      const host = startHost(
        `
        import { createEnvironment } from '@conch/environment';
        const env = await createEnvironment({ workingDir: process.env.HOME + '/../ws', cdpUrl: 'auto', plugins: { permission: {}, cli: {} } });
        await env.registry.execute('browser_navigate', { url: 'about:blank' });
        const { readdirSync } = await import('node:fs');
        const profiles = readdirSync(env.tmpDir, { recursive: true }).filter((f) => String(f).includes('chrome-profile-'));
        console.log(JSON.stringify({ tmpDir: env.tmpDir, profiles }));
        `,
        '',
      );
      await waitFor(() => host.out().includes('\n'), { what: 'host ready', timeoutMs: 120_000 });
      const ready = JSON.parse(host.out()) as { tmpDir: string; profiles: string[] };
      expect(ready.profiles.length).toBeGreaterThan(0);
      expect(ready.tmpDir.startsWith(host.tmp)).toBe(true);
      expect(processesMentioning(host.tmp).length).toBeGreaterThan(0);
      host.child.kill('SIGTERM');
      const end = await host.ended;
      expect(end.signal, host.err()).toBe('SIGTERM');
      expect(readdirSync(host.tmp)).toEqual([]);
      // nothing that mentions the host's temp dir still runs (Chromium's processes carry its profile path)
      await waitFor(() => processesMentioning(host.tmp).length === 0, {
        what: 'no Chromium of the host left',
        timeoutMs: 30_000,
      });
    },
    180_000,
  );
});
