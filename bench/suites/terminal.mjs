// Terminal sessions: `echo hi` round trip through registry.execute('terminal') in a warm session
// vs spawning a fresh login shell for it (`bash -lic 'echo hi'`), measured in the same run. The
// session's PTY runs under the registry's supervisor (the default); the same round trip with the
// PTY in the host process (a ProcessManager without supervisor) is measured alongside, so the
// relay's cost shows.
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, TOKENS } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { terminalPlugin } from '@conch/terminal';

function freshLoginShell() {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-lic', 'echo hi'], (error, stdout) => {
      if (error) reject(error);
      else if (!stdout.includes('hi')) reject(new Error(`unexpected output ${JSON.stringify(stdout)}`));
      else resolve();
    });
  });
}

function terminalRegistry(root, { supervisor }) {
  mkdirSync(root);
  const registry = new PluginRegistry({ cwd: root, tempRoot: root });
  if (!supervisor) {
    const manager = new ProcessManager({ supervisor: false, tempDir: () => root, cwd: root });
    registry.container.register(TOKENS.ProcessManager, { useValue: manager });
  }
  registry.register(terminalPlugin);
  registry.container.register(TOKENS.PermissionGate, {
    useValue: { check: async () => ({ outcome: 'allow', reason: 'bench' }) },
  });
  registry.exposeTool('terminal', {});
  return registry;
}

export default async function ({ median, percentile, time }) {
  const root = mkdtempSync(join(tmpdir(), 'conch-bench-terminal-'));
  const supervised = terminalRegistry(join(root, 'supervised'), { supervisor: true });
  const inHost = terminalRegistry(join(root, 'in-host'), { supervisor: false });
  try {
    const echo = (registry) => async () => {
      const result = await registry.execute('terminal', { command: 'echo hi' });
      if (result.output !== 'hi\n') throw new Error(`unexpected result ${JSON.stringify(result)}`);
    };
    const session = await time(echo(supervised), { runs: 200, warmup: 10 });
    const local = await time(echo(inHost), { runs: 200, warmup: 10 });
    const fresh = await time(freshLoginShell, { runs: 30, warmup: 2 });
    const conch = median(session);
    const baseline = median(fresh);
    return [
      {
        name: 'terminal echo hi: warm session vs fresh bash -lic (median)',
        conch,
        baseline,
        unit: 'ms',
        ratio: conch / baseline,
        goal: 'session >= 20x faster, median < 5 ms',
        pass: baseline / conch >= 20 && conch < 5,
      },
      {
        name: 'terminal echo hi: warm session p95',
        conch: percentile(session, 95),
        baseline: percentile(fresh, 95),
        unit: 'ms',
        ratio: percentile(session, 95) / percentile(fresh, 95),
        goal: 'info',
        pass: true,
      },
      {
        name: 'terminal echo hi: supervised PTY vs PTY in the host (median)',
        conch,
        baseline: median(local),
        unit: 'ms',
        ratio: conch / median(local),
        goal: 'info (the supervisor relay)',
        pass: true,
      },
    ];
  } finally {
    await supervised.dispose();
    await inHost.dispose();
    rmSync(root, { recursive: true, force: true });
  }
}
