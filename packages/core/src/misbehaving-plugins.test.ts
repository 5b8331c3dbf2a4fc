// A third-party plugin that hangs, throws, returns values JSON cannot carry, or throws from its listeners fails with a code and a message naming it, and the registry (and host) keep working; arguments too deep or too large fail validation by field, never by overflowing the stack.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { tempDir } from '@conch/test-support';
import { pino } from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { toJsonSafe } from './json-safe.js';
import { PluginRegistry, type PluginRegistryOptions } from './registry.js';
import { token } from './token.js';
import { echoPlugin } from './test-support/plugins.js';

const registries: PluginRegistry[] = [];
afterEach(async () => {
  await Promise.all(registries.splice(0).map((r) => r.dispose()));
});

/** A registry whose log lines are kept (parsed). */
function makeRegistry(options: PluginRegistryOptions = {}) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of String(chunk).split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const registry = new PluginRegistry({ logger: pino({ level: 'warn' }, sink), ...options });
  registries.push(registry);
  return { registry, lines };
}

async function rejection(promise: Promise<unknown>): Promise<ConchError> {
  try {
    await promise;
  } catch (error) {
    if (ConchError.isInstance(error)) return error;
    throw new Error(`expected a ConchError, got ${String(error)}`, { cause: error });
  }
  throw new Error('expected a rejection');
}

const SERVICE = token<string>('test.misbehaving.service');

describe('plugin setup', () => {
  test('a setup that never settles fails expose() at the configured bound, naming the plugin', async () => {
    const hung = definePlugin({
      name: 'hung',
      version: '1.0.0',
      setup: () => new Promise<never>(() => {}),
    });
    const { registry } = makeRegistry({ plugins: [hung, echoPlugin], setupTimeoutMs: 50 });
    const error = await rejection(registry.expose('hung'));
    expect(error.code).toBe('PLUGIN_SETUP_TIMEOUT');
    expect(error.message).toMatch(
      /Plugin 'hung' setup did not finish within 50 ms \(the registry's setupTimeoutMs\)/,
    );
    expect(registry.isExposed('hung')).toBe(false);
    // The registry keeps working.
    await registry.expose('echo');
    expect(await registry.execute('echo', { text: 'hi' })).toMatchObject({ text: 'hi' });
  });

  test('a setup that finishes after its deadline stays unexposed: its provide is refused and its dispose runs', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let disposed = false;
    let provideError: unknown;
    const late = definePlugin({
      name: 'late',
      version: '1.0.0',
      async setup(ctx) {
        await gate;
        try {
          ctx.provide(SERVICE, 'late');
        } catch (error) {
          provideError = error;
        }
        return {
          tools: [
            defineTool({
              name: 'late_tool',
              description: 'x',
              inputSchema: z.object({}),
              execute: () => ({}),
            }),
          ],
          dispose: () => {
            disposed = true;
          },
        };
      },
    });
    const { registry, lines } = makeRegistry({ plugins: [late], setupTimeoutMs: 30 });
    expect((await rejection(registry.expose('late'))).code).toBe('PLUGIN_SETUP_TIMEOUT');
    release();
    await waitUntil(() => disposed);
    expect(ConchError.isInstance(provideError) && provideError.code).toBe('PLUGIN_SETUP_TIMEOUT');
    expect(registry.resolveOptional(SERVICE)).toBeUndefined();
    expect(registry.tools().map((t) => t.name)).toEqual([]);
    expect(lines.some((l) => l.plugin === 'late' && String(l.msg).includes('after its deadline'))).toBe(true);
  });

  test('dispose() fails a setup still running at once (no wait for the deadline)', async () => {
    const hung = definePlugin({ name: 'hung', version: '1.0.0', setup: () => new Promise<never>(() => {}) });
    const { registry } = makeRegistry({ plugins: [hung], setupTimeoutMs: 3_600_000 });
    const exposing = registry.expose('hung');
    await registry.dispose();
    expect((await rejection(exposing)).code).toBe('REGISTRY_DISPOSED');
  });

  test('the default bound is generous and documented: 60 s', async () => {
    const { DEFAULT_SETUP_TIMEOUT_MS } = await import('./registry.js');
    expect(DEFAULT_SETUP_TIMEOUT_MS).toBe(60_000);
  });

  test.each([
    ['synchronously', () => JSON.parse('{not json') as never],
    ['asynchronously', async () => Promise.reject(new TypeError('cannot read properties of undefined'))],
  ])(
    'a setup that throws %s is a PLUGIN_SETUP_FAILED naming the plugin, with the cause',
    async (_how, setup) => {
      const broken = definePlugin({ name: 'broken', version: '1.0.0', setup });
      const { registry } = makeRegistry({ plugins: [broken, echoPlugin] });
      const error = await rejection(registry.expose('broken'));
      expect(error.code).toBe('PLUGIN_SETUP_FAILED');
      expect(error.message).toMatch(/^Plugin 'broken' setup failed: (SyntaxError|TypeError): /);
      expect(error.cause).toBeInstanceOf(Error);
      expect(error.toJSON()).toMatchObject({
        code: 'PLUGIN_SETUP_FAILED',
        cause: { message: expect.any(String) },
      });
      expect(registry.isExposed('broken')).toBe(false);
      await registry.expose('echo');
      expect(await registry.execute('echo', { text: 'still here' })).toMatchObject({ text: 'still here' });
    },
  );

  test('a ConchError from setup that does not name the plugin keeps its code and gains the name', async () => {
    const strict = definePlugin({
      name: 'strict',
      version: '1.0.0',
      setup() {
        throw new ConchError({ code: 'SANDBOX_UNAVAILABLE', message: 'bwrap is missing' });
      },
    });
    const { registry } = makeRegistry({ plugins: [strict] });
    const error = await rejection(registry.expose('strict'));
    expect(error.code).toBe('SANDBOX_UNAVAILABLE');
    expect(error.message).toBe("Plugin 'strict' setup failed: bwrap is missing");
  });
});

describe('tool results that JSON cannot carry', () => {
  test('BigInt, cycles, Map, Set, Error, NaN and deep nesting are converted, and the conversion is logged by path', async () => {
    const odd = definePlugin({
      name: 'odd',
      version: '1.0.0',
      setup: () => ({
        tools: [
          defineTool({
            name: 'odd_result',
            description: 'returns what JSON cannot carry',
            inputSchema: z.object({}),
            execute: () => {
              const node: Record<string, unknown> = { name: 'root' };
              node.self = node;
              let deep: Record<string, unknown> = {};
              const top = deep;
              for (let i = 0; i < 20_000; i++) deep = (deep.next = {}) as Record<string, unknown>;
              return {
                count: 12345678901234567890n,
                rows: [{ id: 1n }],
                node,
                seen: new Set(['a']),
                byName: new Map([['x', 1]]),
                failure: new RangeError('out of range'),
                ratio: Number.NaN,
                deep: top,
              };
            },
          }),
        ],
      }),
    });
    const { registry, lines } = makeRegistry({ plugins: [odd] });
    await registry.expose('odd');
    const result = await registry.execute('odd_result', {});
    const json = JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
    expect(json).toMatchObject({
      count: '12345678901234567890',
      rows: [{ id: '1' }],
      node: { name: 'root', self: '[Circular]' },
      seen: ['a'],
      byName: { x: 1 },
      failure: { name: 'RangeError', message: 'out of range' },
      ratio: 'NaN',
    });
    expect(JSON.stringify(result)).toContain('[Too deep]');
    const warning = lines.find((l) => l.tool === 'odd_result');
    expect(warning).toMatchObject({ plugin: 'odd' });
    expect(warning?.changes).toEqual(
      expect.arrayContaining([
        'count: BigInt -> string',
        'rows.0.id: BigInt -> string',
        'node.self: circular reference -> "[Circular]"',
        'seen: Set -> array',
      ]),
    );
  });

  test('a result JSON carries as it is comes back as the same object', () => {
    const value = { a: [1, 'x', { b: null }], shared: { s: 1 } };
    expect(toJsonSafe(value).value).toBe(value);
    const shared = { s: 1 };
    const twice = { one: shared, two: shared };
    expect(toJsonSafe(twice)).toEqual({ value: twice, changes: [] });
  });
});

describe('listeners a plugin registers', () => {
  test('a throwing or rejecting listener is logged with the plugin name; the call, the other listeners and once() work', async () => {
    const noisy = definePlugin({
      name: 'noisy',
      version: '1.0.0',
      setup(ctx) {
        ctx.events.on('tool.call', () => {
          throw new Error('listener bug');
        });
        ctx.events.on('tool.result', async () => {
          await Promise.resolve();
          throw new Error('async listener bug');
        });
        return {};
      },
    });
    const { registry, lines } = makeRegistry({ plugins: [noisy, echoPlugin] });
    await registry.expose('noisy');
    await registry.expose('echo');
    const seen: string[] = [];
    registry.events.on('tool.result', () => seen.push('host'));
    let onceCount = 0;
    registry.events.once('tool.call', () => (onceCount += 1));
    expect(await registry.execute('echo', { text: 'a' })).toMatchObject({ text: 'a' });
    expect(await registry.execute('echo', { text: 'b' })).toMatchObject({ text: 'b' });
    await waitUntil(() => lines.filter((l) => l.plugin === 'noisy').length >= 4);
    expect(seen).toEqual(['host', 'host']);
    expect(onceCount).toBe(1);
    const messages = lines.filter((l) => l.plugin === 'noisy').map((l) => l.msg);
    expect(messages).toContain("a listener of 'tool.call' registered by plugin 'noisy' threw; continuing");
    expect(messages).toContain("a listener of 'tool.result' registered by plugin 'noisy' threw; continuing");
  });

  test('a tool that throws is TOOL_FAILED naming the tool, and logged with its plugin', async () => {
    const buggy = definePlugin({
      name: 'buggy',
      version: '1.0.0',
      setup: () => ({
        tools: [
          defineTool({
            name: 'crash',
            description: 'throws',
            inputSchema: z.object({}),
            execute: () => {
              throw new TypeError("Cannot read properties of undefined (reading 'x')");
            },
          }),
        ],
      }),
    });
    const { registry, lines } = makeRegistry({ plugins: [buggy] });
    await registry.expose('buggy');
    const error = await rejection(registry.execute('crash', {}));
    expect(error.code).toBe('TOOL_FAILED');
    expect(error.message).toBe("Tool 'crash' failed: Cannot read properties of undefined (reading 'x')");
    expect(lines.find((l) => l.tool === 'crash')).toMatchObject({
      plugin: 'buggy',
      msg: "tool 'crash' of plugin 'buggy' threw; the call fails with TOOL_FAILED and the registry keeps working",
    });
  });

  test('pluginOfError names the discovered plugin whose code threw', async () => {
    const here = dirname(fileURLToPath(import.meta.url));
    const zod = join(resolve(here, '../node_modules'), 'zod', 'index.js');
    const root = tempDir('conch-attrib-');
    const dir = join(root, 'timer-plugin');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'timer-plugin', type: 'module', conch: { plugin: 'plugin.js' } }),
    );
    writeFileSync(
      join(dir, 'plugin.js'),
      `import { z } from ${JSON.stringify(zod)};
export function fail() { throw new Error('from the plugin'); }
export default { name: 'timer-plugin', version: '1.0.0', configSchema: z.object({}), tools: [] };`,
    );
    const { registry } = makeRegistry({ pluginDirs: [root] });
    await registry.discover();
    const mod = (await import(join(dir, 'plugin.js'))) as { fail: () => never };
    let thrown: unknown;
    try {
      mod.fail();
    } catch (error) {
      thrown = error;
    }
    expect(registry.pluginOfError(thrown)).toBe('timer-plugin');
    expect(registry.pluginOfError(new Error('from here'))).toBeUndefined();
  });
});

describe('argument limits', () => {
  test('arguments nested 100,000 deep are INVALID_ARGUMENTS naming the field, not a stack overflow', async () => {
    const { registry } = makeRegistry({ plugins: [definePlugin({ ...deepPlugin })] });
    await registry.expose('deep');
    let nested: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) nested = { child: nested };
    const error = await rejection(registry.execute('takes_anything', { payload: nested }));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.message).toMatch(
      /payload\.child\.child.*: at most 64 levels of nested objects and arrays; received an object nested deeper/,
    );
    expect(error.message).not.toMatch(/call stack/);
    // Within the limits, the schema decides as before.
    expect(await registry.execute('takes_anything', { payload: { child: { child: 1 } } })).toMatchObject({
      ok: true,
    });
  });

  test('an argument with more values than the limit is INVALID_ARGUMENTS naming the field', async () => {
    const { registry } = makeRegistry({
      plugins: [definePlugin({ ...deepPlugin })],
      argumentLimits: { maxValues: 1000 },
    });
    await registry.expose('deep');
    const error = await rejection(
      registry.execute('takes_anything', { payload: { list: new Array(5000).fill(0) } }),
    );
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.message).toMatch(
      /payload\.list: arguments of at most 1000 values in all .* received more than that \(this field holds 5000 elements\)/,
    );
  });
});

const deepPlugin = {
  name: 'deep',
  version: '1.0.0',
  setup: () => ({
    tools: [
      defineTool({
        name: 'takes_anything',
        description: 'accepts any JSON (validated recursively by zod)',
        inputSchema: z.object({ payload: z.json() }),
        execute: () => ({ ok: true }),
      }),
    ],
  }),
};

async function waitUntil(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(cond()).toBe(true);
}
