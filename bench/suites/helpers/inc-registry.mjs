// A registry with one trivial tool, `inc({ n }) -> { n: n + 1 }`: what the overhead suites measure.
import 'reflect-metadata';
import { z } from 'zod';
import { PluginRegistry, definePlugin, defineTool } from '@conch/core';

export const inc = (args) => ({ n: args.n + 1 });

export async function incRegistry() {
  const registry = new PluginRegistry({
    plugins: [
      definePlugin({
        name: 'bench',
        version: '0',
        configSchema: z.object({}),
        setup: () => ({
          tools: [
            defineTool({
              name: 'inc',
              description: 'inc',
              inputSchema: z.object({ n: z.number() }),
              execute: inc,
            }),
          ],
        }),
      }),
    ],
  });
  await registry.expose('bench', {});
  return registry;
}
