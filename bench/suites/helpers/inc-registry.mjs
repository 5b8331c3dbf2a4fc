// A registry with one trivial tool, `inc({ n }) -> { n: n + 1 }`: what the overhead suites measure;
// and the same call through a hand-rolled executor, their baseline.
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { z } from 'zod';
import { PluginRegistry, definePlugin, defineTool } from '@conch/core';

export const inc = (args) => ({ n: args.n + 1 });
/** The tool's input schema (the baseline validates with the very same object). */
export const incSchema = z.object({ n: z.number() });

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
              inputSchema: incSchema,
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

const events = new EventEmitter();
events.on('call', () => {});
events.on('result', () => {});

/**
 * The per-call work registry.execute promises, done raw with node's own primitives and nothing
 * else: a random call id, a fresh AbortController tied to the caller's signal, an event before and
 * after, the arguments validated with the tool's zod schema, the awaited call. (A bare function
 * call or a zod parse alone costs a fraction of a microsecond, where the timer's own cost and the
 * machine's noise decide the ratio.)
 */
export async function handRolledExecute(args, signal) {
  const callId = randomUUID();
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    events.emit('call', { callId, tool: 'inc', args });
    const parsed = incSchema.safeParse(args);
    if (!parsed.success) throw parsed.error;
    const result = await inc(parsed.data, { signal: controller.signal });
    events.emit('result', { callId, tool: 'inc', result });
    return result;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}
