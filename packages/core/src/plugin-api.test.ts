// Invariant: a plugin is one `setup(ctx)` per exposure — typed tokens provide and resolve services, per-exposure state lives in the setup closure, one object per call reaches both the gate and execute, and the deprecated hooks keep working.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import type { PermissionGate, PermissionRequest } from './permission.js';
import { PluginRegistry } from './registry.js';
import { token } from './token.js';
import { PERMISSION_GATE } from './tokens.js';
import { pino } from 'pino';
import { Writable } from 'node:stream';

const silentLogger = () => pino({ level: 'silent' });

interface Counter {
  next(): number;
}
const COUNTER = token<Counter>('test.counter');

const counterPlugin = definePlugin({
  name: 'counter',
  version: '1.0.0',
  configSchema: z.strictObject({ start: z.number().default(0) }),
  setup(ctx) {
    // Per-exposure state: two registries never share it.
    let n = ctx.config.start;
    ctx.provide(COUNTER, { next: () => ++n });
    ctx.reportStatus('counter', () => ({ value: n }));
    return {
      tools: [
        defineTool({
          name: 'count',
          description: 'Count up',
          inputSchema: z.strictObject({}),
          execute: () => ({ value: ++n }),
        }),
      ],
      instructions: () => `count starts at ${ctx.config.start}`,
    };
  },
});

describe('plugin API v1', () => {
  it('keeps per-exposure state in the setup closure and provides typed services', async () => {
    const a = new PluginRegistry({ logger: silentLogger(), plugins: [counterPlugin] });
    const b = new PluginRegistry({ logger: silentLogger(), plugins: [counterPlugin] });
    await a.expose('counter', { start: 10 });
    await b.expose('counter', {});
    expect(await a.execute('count', {})).toEqual({ value: 11, display: '✓' });
    expect(await b.execute('count', {})).toEqual({ value: 1, display: '✓' });
    // The token carries the type: no type argument, no cast.
    const counter = a.resolveOptional(COUNTER);
    expect(counter?.next()).toBe(12);
    expect(await a.status()).toMatchObject({ counter: { value: 12 } });
    expect(a.systemInstructions()).toBe('count starts at 10');
    expect(b.resolve(COUNTER).next()).toBe(2);
    await Promise.all([a.dispose(), b.dispose()]);
  });

  it('refuses a second provider of one service with a named error', async () => {
    const twin = definePlugin({
      name: 'twin',
      version: '1.0.0',
      configSchema: z.strictObject({}),
      setup(ctx) {
        ctx.provide(COUNTER, { next: () => 0 });
        return {};
      },
    });
    const registry = new PluginRegistry({ logger: silentLogger(), plugins: [counterPlugin, twin] });
    await registry.expose('counter');
    let error: unknown;
    try {
      await registry.expose('twin');
    } catch (e) {
      error = e;
    }
    expect(ConchError.isInstance(error) && error.code).toBe('DUPLICATE_SERVICE');
    expect((error as Error).message).toContain("'test.counter'");
    expect(() => registry.resolve(token<string>('test.missing'))).toThrow(
      /no exposed plugin provides the service 'test.missing'/,
    );
    await registry.dispose();
  });

  it('awaits an asynchronous setup; exposeTool is expose: no warning, awaits it, returns the names', async () => {
    const slow = definePlugin({
      name: 'slow',
      version: '1.0.0',
      configSchema: z.strictObject({}),
      async setup() {
        await new Promise((r) => setTimeout(r, 10));
        return {
          tools: [
            defineTool({
              name: 'late',
              description: 'x',
              inputSchema: z.strictObject({}),
              execute: () => ({ ok: true }),
            }),
          ],
        };
      },
    });
    const warnings: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        warnings.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: 'warn' }, sink);
    const registry = new PluginRegistry({ logger, plugins: [slow, counterPlugin] });
    await expect(registry.exposeTool('slow')).resolves.toEqual(['late']);
    await expect(registry.exposeTool('counter')).resolves.toEqual(['count']);
    expect(await registry.execute('late', {})).toEqual({ ok: true, display: '✓' });
    expect(warnings).toEqual([]);
    const other = new PluginRegistry({ logger: silentLogger(), plugins: [slow] });
    await expect(other.expose('slow')).resolves.toEqual(['late']);
    expect(await other.execute('late', {})).toEqual({ ok: true, display: '✓' });
    await Promise.all([registry.dispose(), other.dispose()]);
  });

  it('rejects bad config and unknown plugins with the field or name', async () => {
    const registry = new PluginRegistry({ logger: silentLogger(), plugins: [counterPlugin] });
    await expect(registry.expose('counter', { start: 'x' })).rejects.toThrow(/start/);
    await expect(registry.expose('nope')).rejects.toThrow(/nope/);
    void registry.dispose();
  });

  it('hands one prepared object to the gate and to execute, and the decision to execute', async () => {
    const seen: { request?: PermissionRequest; prepared?: unknown; decision?: unknown } = {};
    const gate: PermissionGate = {
      check: async (request) => {
        seen.request = request;
        return { outcome: 'allow', reason: 'test', readOnly: true };
      },
    };
    const gatePlugin = definePlugin({
      name: 'gate',
      version: '1.0.0',
      configSchema: z.strictObject({}),
      setup(ctx) {
        ctx.provide(PERMISSION_GATE, gate);
        return {};
      },
    });
    const planned = definePlugin({
      name: 'planned',
      version: '1.0.0',
      configSchema: z.strictObject({}),
      setup: () => ({
        tools: [
          defineTool({
            name: 'run',
            description: 'x',
            inputSchema: z.strictObject({ command: z.string() }),
            prepare: (args) => ({ line: args.command, id: Math.random() }),
            permission: (_args, _ctx, plan) => ({ kind: 'action', tool: 'run', summary: plan.line }),
            execute: (_args, call, plan) => {
              seen.prepared = plan;
              seen.decision = call.decision;
              return { ok: true };
            },
          }),
        ],
      }),
    });
    const registry = new PluginRegistry({ logger: silentLogger(), plugins: [gatePlugin, planned] });
    await registry.expose('gate');
    await registry.expose('planned');
    await registry.execute('run', { command: 'ls' });
    expect(seen.request).toMatchObject({ summary: 'ls' });
    expect(seen.prepared).toMatchObject({ line: 'ls' });
    expect(seen.decision).toMatchObject({ outcome: 'allow', readOnly: true });
    await registry.dispose();
  });
});
