// Invariant: when the host process exits without dispose() (exit() or an unhandled SIGTERM/SIGHUP), every process tree and escapee it started is killed.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { survivors, waitFor } from './test-support/procs.js';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');

beforeAll(() => {
  // The host script runs in a separate node process, so it needs the built package.
  execFileSync(
    process.execPath,
    [join(pkg, '../../node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: pkg,
    },
  );
}, 120_000);

describe('host exit', () => {
  it('kills running trees and setsid escapees on process.exit()', async () => {
    const script = `
      import { ProcessManager } from ${JSON.stringify(join(pkg, 'dist/index.js'))};
      const m = new ProcessManager();
      const p = m.spawn('setsid sleep 300 > /dev/null 2>&1 & echo up; sleep 300', [], { shell: true });
      p.onOutput(() => { console.log(m.cookiePrefix); process.exit(0); });
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(0);
    const prefix = run.stdout.trim();
    expect(prefix).toMatch(/^[0-9a-f]{8}-$/);
    await waitFor(() => survivors(prefix).length === 0, 10_000, 'no survivors');
    expect(survivors(prefix)).toEqual([]);
  }, 120_000);

  it.each(['SIGTERM', 'SIGHUP', 'SIGINT'] as const)(
    'kills running trees when the host dies of an unhandled %s',
    async (signal) => {
      const script = `
        import { ProcessManager } from ${JSON.stringify(join(pkg, 'dist/index.js'))};
        const m = new ProcessManager();
        const p = m.spawn('setsid sleep 300 > /dev/null 2>&1 & echo up; sleep 300', [], { shell: true });
        p.onOutput(() => console.log(m.cookiePrefix));
        setInterval(() => {}, 1000);
      `;
      const host = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      host.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      await waitFor(() => /^[0-9a-f]{8}-/.test(out), 30_000, 'host started its child');
      const prefix = out.trim();
      await waitFor(() => survivors(prefix).length >= 2, 10_000, 'tree running');
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        host.on('exit', (_code, sig) => resolve(sig)),
      );
      host.kill(signal);
      expect(await exited).toBe(signal);
      await waitFor(() => survivors(prefix).length === 0, 10_000, 'no survivors');
      expect(survivors(prefix)).toEqual([]);
    },
    120_000,
  );
});
