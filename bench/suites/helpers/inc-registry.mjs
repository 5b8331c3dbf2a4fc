// A registry with one trivial tool, `inc({ n }) -> { n: n + 1 }`: what the overhead suites measure.
import 'reflect-metadata';
import { z } from 'zod';
import { PluginRegistry, definePlugin, defineTool } from '@conch/core';

export const inc = (args) => ({ n: args.n + 1 });

export function incRegistry() {
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
            execute: inc,
          }),
        ],
      }),
    ],
  });
  registry.exposeTool('bench', {});
  return registry;
}
