// Small real plugins for core's tests: they do real work (timers, files), nothing is mocked.
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { definePlugin, defineTool, type PluginDefinition } from '../define.js';

export const echoPlugin = definePlugin({
  name: 'echo',
  version: '1.0.0',
  configSchema: z.strictObject({
    prefix: z.string().default(''),
    maxOutputChars: z.number().int().positive().default(100),
  }),
  systemInstructions: (ctx) => `echo repeats text, prefixed with ${JSON.stringify(ctx.config.prefix)}.`,
  tools: (ctx) => [
    defineTool({
      name: 'echo',
      description: 'Repeat a text',
      inputSchema: z.strictObject({
        text: z.string().describe('what to repeat'),
        times: z.number().int().min(1).default(1),
      }),
      annotations: { readOnlyHint: true },
      execute: (args) => ({
        text: (ctx.config.prefix + args.text).repeat(args.times).slice(0, ctx.config.maxOutputChars),
      }),
    }),
    defineTool({
      name: 'sleep',
      description: 'Wait, honouring abort',
      inputSchema: z.strictObject({ ms: z.number().int().min(0) }),
      execute: async (args, call) => {
        await delay(args.ms, undefined, { signal: call.signal });
        return { slept: args.ms };
      },
    }),
  ],
});

export const guardedPlugin: PluginDefinition = definePlugin({
  name: 'guarded',
  version: '1.0.0',
  configSchema: z.strictObject({}),
  tools: [
    defineTool({
      name: 'run_thing',
      description: 'Pretends to run a command; needs a permission decision',
      inputSchema: z.strictObject({ command: z.string() }),
      permission: (args, ctx) => ({
        kind: 'command',
        tool: 'run_thing',
        command: args.command,
        cwd: ctx.env.cwd,
      }),
      execute: (args) => ({ ran: args.command }),
    }),
  ],
});
