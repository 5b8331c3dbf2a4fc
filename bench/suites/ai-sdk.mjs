// AI SDK adapter overhead, each row against the same work done raw in the same run (ratios, so the
// pass column judges conch and not the machine): a tool call through toAiSdkTools(registry) against
// registry.execute of the same tool, alternating; and toAiSdkTools over 50 exposed tools against
// building the same 50 AI SDK tools by hand (`tool({ description, inputSchema: jsonSchema(schema),
// execute })` from JSON schemas already at hand), alternating.
import 'reflect-metadata';
import { z } from 'zod';
import { PluginRegistry, definePlugin, defineTool } from '@conch/core';
import { toAiSdkTools } from '@conch/ai-sdk';
import { jsonSchema, tool } from 'ai';
import { alternate } from '../lib.mjs';

export default async function () {
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
  try {
    const aiTools = toAiSdkTools(registry);
    let id = 0;
    const call = await alternate(
      () => aiTools.inc_0.execute({ n: 1 }, { toolCallId: `c${id++}`, messages: [] }),
      () => registry.execute('inc_0', { n: 1 }),
      { runs: 3000, warmup: 300 },
    );
    // The hand-written adapter: the JSON schemas and descriptions a host would keep as constants.
    const infos = registry.tools().map(({ name, description, inputSchema }) => ({
      name,
      description,
      inputSchema,
    }));
    const byHand = async () => {
      const out = {};
      for (const info of infos) {
        out[info.name] = tool({
          description: info.description,
          inputSchema: jsonSchema(info.inputSchema),
          execute: (input) => registry.execute(info.name, input),
        });
      }
      return out;
    };
    const convert = await alternate(async () => toAiSdkTools(registry), byHand, { runs: 300, warmup: 30 });
    return [
      {
        name: 'ai-sdk tool call vs registry.execute (median)',
        conch: call.conch,
        baseline: call.baseline,
        unit: 'ms',
        ratio: call.conch / call.baseline,
        goal: 'ratio <= 1.5',
        pass: call.conch / call.baseline <= 1.5,
      },
      {
        name: 'toAiSdkTools for 50 tools vs the same 50 AI SDK tools built by hand with tool() + jsonSchema() (median)',
        conch: convert.conch,
        baseline: convert.baseline,
        unit: 'ms',
        ratio: convert.conch / convert.baseline,
        goal: 'ratio <= 3',
        pass: convert.conch / convert.baseline <= 3,
      },
    ];
  } finally {
    await registry.dispose();
  }
}
