// AI SDK adapter overhead: a tool call through toAiSdkTools(registry) vs registry.execute directly.
import 'reflect-metadata';
import { z } from 'zod';
import { PluginRegistry, definePlugin, defineTool } from '@conch/core';
import { toAiSdkTools } from '@conch/ai-sdk';

export default async function ({ median, time }) {
  const tools = Array.from({ length: 50 }, (_, i) =>
    defineTool({
      name: `inc_${i}`,
      description: `increments (${i})`,
      inputSchema: z.object({ n: z.number().describe('the number') }),
      execute: (args) => ({ n: args.n + 1 }),
    }),
  );
  const registry = new PluginRegistry({
    plugins: [
      definePlugin({ name: 'bench', version: '0', configSchema: z.object({}), setup: () => ({ tools }) }),
    ],
  });
  await registry.expose('bench', {});
  const aiTools = toAiSdkTools(registry);
  const options = { toolCallId: 'bench', messages: [] };
  let id = 0;
  const viaAdapter = median(
    await time(() => aiTools.inc_0.execute({ n: 1 }, { ...options, toolCallId: `c${id++}` }), {
      runs: 2000,
      warmup: 200,
    }),
  );
  const direct = median(await time(() => registry.execute('inc_0', { n: 1 }), { runs: 2000, warmup: 200 }));
  const convert = median(await time(async () => toAiSdkTools(registry), { runs: 200, warmup: 20 }));
  await registry.dispose();
  return [
    {
      name: 'ai-sdk tool call vs registry.execute (median)',
      conch: viaAdapter,
      baseline: direct,
      unit: 'ms',
      ratio: viaAdapter / direct,
      goal: 'adapter adds < 0.05 ms',
      pass: viaAdapter - direct < 0.05,
    },
    {
      name: 'toAiSdkTools for 50 tools (median)',
      conch: convert,
      baseline: 0,
      unit: 'ms',
      ratio: null,
      goal: '< 2 ms',
      pass: convert < 2,
    },
  ];
}
