// cli_based_tool end to end (registry.execute -> permission gate -> parse -> spawn -> capture ->
// result) in direct mode against a raw node:child_process spawn of the same command.
import 'reflect-metadata';
import { PluginRegistry, TOKENS } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { rawRun } from '../lib.mjs';

export default async function ({ median }) {
  const registry = new PluginRegistry({ plugins: [cliPlugin, backgroundPlugin] });
  registry.container.register(TOKENS.PermissionGate, {
    useValue: { check: async () => ({ outcome: 'allow', reason: 'bench' }) },
  });
  registry.exposeTool('cli', {});
  try {
    for (let i = 0; i < 20; i++) {
      await rawRun('true', []);
      const r = await registry.execute('cli_based_tool', { command: 'true' });
      if (r.returncode !== 0 || r.mode !== 'direct')
        throw new Error(`unexpected result ${JSON.stringify(r)}`);
    }
    const raw = [];
    const conch = [];
    for (let i = 0; i < 300; i++) {
      let t0 = performance.now();
      await rawRun('true', []);
      raw.push(performance.now() - t0);
      t0 = performance.now();
      await registry.execute('cli_based_tool', { command: 'true' });
      conch.push(performance.now() - t0);
    }
    const c = median(conch);
    const b = median(raw);
    return [
      {
        name: 'cli: cli_based_tool direct `true` (median of 300)',
        conch: c,
        baseline: b,
        unit: 'ms',
        ratio: c / b,
        goal: 'ratio <= 1.2',
        pass: c / b <= 1.2,
      },
    ];
  } finally {
    await registry.dispose();
  }
}
