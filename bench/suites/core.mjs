// Registry overhead: execute() of a trivial tool vs calling the function directly.
import 'reflect-metadata';
import { z } from 'zod';
import { PluginRegistry, definePlugin, defineTool } from '@conch/core';

export default async function ({ median, time }) {
  const fn = (args) => ({ n: args.n + 1 });
  const registry = new PluginRegistry({
    plugins: [
      definePlugin({
        name: 'bench',
        version: '0',
        configSchema: z.object({}),
        tools: [
          defineTool({
            name: 'inc',
            description: 'inc',
            inputSchema: z.object({ n: z.number() }),
            execute: fn,
          }),
        ],
      }),
    ],
  });
  registry.exposeTool('bench', {});
  const conch = median(await time(() => registry.execute('inc', { n: 1 }), { runs: 2000, warmup: 200 }));
  const baseline = median(await time(async () => fn({ n: 1 }), { runs: 2000, warmup: 200 }));
  await registry.dispose();
  return [
    {
      name: 'registry.execute overhead (median)',
      conch,
      baseline,
      unit: 'ms',
      ratio: conch / baseline,
      goal: 'conch < 0.05 ms',
      pass: conch < 0.05,
    },
  ];
}
