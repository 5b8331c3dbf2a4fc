// cli_based_tool end to end (registry.execute -> permission gate -> parse -> spawn -> capture ->
// result) in direct mode against a raw node:child_process spawn of the same command.
import 'reflect-metadata';
import { PluginRegistry, TOKENS } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { alternate, rawRun } from '../lib.mjs';

export default async function () {
  const registry = new PluginRegistry({ plugins: [cliPlugin, backgroundPlugin] });
  registry.container.register(TOKENS.PermissionGate, {
    useValue: { check: async () => ({ outcome: 'allow', reason: 'bench' }) },
  });
  registry.exposeTool('cli', {});
  try {
    const r = await registry.execute('cli_based_tool', { command: 'true' });
    if (r.returncode !== 0 || r.mode !== 'direct') throw new Error(`unexpected result ${JSON.stringify(r)}`);
    const { conch: c, baseline: b } = await alternate(
      () => registry.execute('cli_based_tool', { command: 'true' }),
      () => rawRun('true', []),
    );
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
