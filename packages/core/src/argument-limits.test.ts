// Invariant: no string argument past its byte limit (the registry's default, or the field's own limit a tool declares) reaches prepare, the gate or the tool, and nothing the registry answers, logs or emits about an argument echoes more than a bounded prefix of it.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  checkArgumentLimits,
  compileToolLimits,
  DEFAULT_ARGUMENT_LIMITS,
  type ToolArgumentLimits,
} from './argument-limits.js';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { PluginRegistry, type PluginRegistryOptions } from './registry.js';
import { ERROR_TEXT_MAX, toToolErrorResult } from './results.js';

const MiB = 1024 * 1024;
const registries: PluginRegistry[] = [];
afterEach(async () => {
  await Promise.all(registries.splice(0).map((r) => r.dispose()));
});

function makeRegistry(options: PluginRegistryOptions = {}) {
  const logged: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logged.push(String(chunk));
      done();
    },
  });
  const registry = new PluginRegistry({ logger: pino({ level: 'debug' }, sink), ...options });
  registries.push(registry);
  return { registry, logged };
}

async function rejection(promise: Promise<unknown>): Promise<ConchError> {
  try {
    await promise;
  } catch (error) {
    if (ConchError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

/** A tool that counts every step it reaches, with declared limits. */
function countingPlugin() {
  const reached = { prepare: 0, permission: 0, execute: 0 };
  const plugin = definePlugin({
    name: 'sized',
    version: '1.0.0',
    setup: () => ({
      tools: [
        defineTool({
          name: 'put',
          description: 'takes a path, a content, an env record and an argv list',
          inputSchema: z.strictObject({
            path: z.string().optional(),
            content: z.string().optional(),
            note: z.string().optional(),
            env: z.record(z.string(), z.string()).optional(),
            args: z.array(z.string()).optional(),
          }),
          argumentLimits: {
            fields: { path: 4096, content: 4 * MiB, 'env.*': 128 * 1024, 'args.*': 128 * 1024 },
          },
          prepare: () => void (reached.prepare += 1),
          permission: () => void (reached.permission += 1),
          execute: () => {
            reached.execute += 1;
            return { ok: true };
          },
        }),
        defineTool({
          name: 'fails_loudly',
          description: 'returns an error quoting its argument, or throws with it',
          inputSchema: z.strictObject({ text: z.string(), how: z.enum(['result', 'throw']) }),
          argumentLimits: { fields: { text: 4 * MiB } },
          execute: ({ text, how }) => {
            const message = `could not use ${text}, ${text}, ${text}`;
            if (how === 'throw') throw new Error(message);
            return { error: message, error_code: 'NOPE', display: `✗ ${message}` };
          },
        }),
        defineTool({
          name: 'refines',
          description: 'a schema whose refinement quotes the value',
          inputSchema: z.strictObject({
            word: z.string().superRefine((value, check) => {
              check.addIssue({ code: 'custom', message: `not a word: ${value}` });
            }),
          }),
          execute: () => ({}),
        }),
      ],
    }),
  });
  return { plugin, reached };
}

describe('string byte limits, before any work', () => {
  test('a string past the default 64 KiB is INVALID_ARGUMENTS naming the field, the limit and the size, never the value', async () => {
    const { plugin, reached } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    const error = await rejection(registry.execute('put', { note: 'n'.repeat(64 * 1024 + 1) }));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.message).toBe(
      "Invalid arguments for tool 'put':\n  note: a string of at most 65536 bytes (UTF-8); received a string of 65537 bytes",
    );
    expect(reached).toEqual({ prepare: 0, permission: 0, execute: 0 });
    // At the limit it runs.
    await expect(registry.execute('put', { note: 'n'.repeat(64 * 1024) })).resolves.toMatchObject({
      ok: true,
    });
    expect(reached.execute).toBe(1);
  });

  test('the limit counts UTF-8 bytes, not characters', async () => {
    const { plugin, reached } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    // 40,000 characters, 80,000 bytes.
    const error = await rejection(registry.execute('put', { note: 'é'.repeat(40_000) }));
    expect(error.message).toMatch(
      /note: a string of at most 65536 bytes \(UTF-8\); received a string of 80000 bytes/,
    );
    // Emoji: two UTF-16 units, four bytes each.
    const emoji = await rejection(registry.execute('put', { path: '😀'.repeat(1025) }));
    expect(emoji.message).toMatch(
      /path: a string of at most 4096 bytes \(UTF-8\); received a string of 4100 bytes/,
    );
    expect(reached.execute).toBe(0);
  });

  test("a tool's declared fields override the default both ways; * matches any key or index", async () => {
    const { plugin, reached } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    // Bigger than the default where the tool says so.
    await expect(registry.execute('put', { content: 'c'.repeat(3 * MiB) })).resolves.toMatchObject({
      ok: true,
    });
    await expect(
      registry.execute('put', { env: { BIG: 'v'.repeat(100_000) }, args: ['a', 'b'.repeat(100_000)] }),
    ).resolves.toMatchObject({ ok: true });
    expect(reached.execute).toBe(2);
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ content: 'c'.repeat(4 * MiB + 1) }, /content: a string of at most 4194304 bytes .* 4194305 bytes/],
      [{ path: 'p'.repeat(4097) }, /path: a string of at most 4096 bytes .* 4097 bytes/],
      [
        { env: { BIG: 'v'.repeat(128 * 1024 + 1) } },
        /env\.BIG: a string of at most 131072 bytes .* 131073 bytes/,
      ],
      [{ args: ['ok', 'x'.repeat(200_000)] }, /args\.1: a string of at most 131072 bytes .* 200000 bytes/],
    ];
    for (const [args, message] of cases) {
      const error = await rejection(registry.execute('put', args));
      expect(error.code).toBe('INVALID_ARGUMENTS');
      expect(error.message).toMatch(message);
      expect(error.message.length).toBeLessThan(300);
    }
    expect(reached.execute).toBe(2);
  });

  test('a key past maxKeyBytes is refused by its size, not shown', async () => {
    const { plugin, reached } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    const key = 'K'.repeat(5000);
    const error = await rejection(registry.execute('put', { env: { [key]: 'v' } }));
    expect(error.message).toMatch(
      /env\.\(a key of 5000 bytes\): keys of at most 4096 bytes \(UTF-8\); received a key of 5000 bytes/,
    );
    expect(error.message).not.toContain('KKKKKKKKKK');
    expect(reached.prepare).toBe(0);
  });

  test('the registry option sets the default for every tool that names no field', async () => {
    const { plugin } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin], argumentLimits: { maxStringBytes: 100 } });
    await registry.exposeTool('sized');
    await expect(rejection(registry.execute('put', { note: 'n'.repeat(101) }))).resolves.toMatchObject({
      code: 'INVALID_ARGUMENTS',
    });
    // A field the tool names keeps the tool's limit.
    await expect(registry.execute('put', { path: 'p'.repeat(4000) })).resolves.toMatchObject({ ok: true });
  });

  test('declared limits that are not positive integers fail the expose naming the tool and field', async () => {
    const declared: ToolArgumentLimits[] = [
      { fields: { path: 0 } },
      { fields: { '': 10 } },
      { maxStringBytes: 1.5 },
    ];
    for (const argumentLimits of declared) {
      const { registry } = makeRegistry({
        plugins: [
          definePlugin({
            name: 'bad-limits',
            version: '1.0.0',
            setup: () => ({
              tools: [
                defineTool({
                  name: 'bad',
                  description: 'bad limits',
                  inputSchema: z.strictObject({ path: z.string() }),
                  argumentLimits,
                  execute: () => ({}),
                }),
              ],
            }),
          }),
        ],
      });
      const error = await rejection(registry.exposeTool('bad-limits'));
      expect(error.code).toBe('INVALID_PLUGIN');
      expect(error.message).toMatch(/plugin 'bad-limits' tool 'bad': argumentLimits/);
    }
  });

  test('checkArgumentLimits names the first 16 MB string past its limit, by its size alone', () => {
    const big = 'x'.repeat(16 * MiB);
    const limits = compileToolLimits({ fields: { content: 4 * MiB } }, DEFAULT_ARGUMENT_LIMITS);
    const issue = checkArgumentLimits(
      { path: 'a', content: big, note: big },
      DEFAULT_ARGUMENT_LIMITS,
      limits,
    );
    expect(issue).toEqual({
      path: 'content',
      expected: 'a string of at most 4194304 bytes (UTF-8)',
      received: `a string of ${16 * MiB} bytes`,
    });
  });
});

describe('errors and logs never echo a large argument', () => {
  test("a tool's error result quoting its argument keeps a bounded prefix of the error and display", async () => {
    const { plugin } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    const result = await registry.execute('fails_loudly', { text: 'x'.repeat(MiB), how: 'result' });
    expect(result.error_code).toBe('NOPE');
    expect((result.error as string).length).toBeLessThan(ERROR_TEXT_MAX + 100);
    expect(result.error).toMatch(/… \(\d+ more characters not shown\)$/);
    expect((result.display as string).length).toBeLessThanOrEqual(2000);
  });

  test('a thrown error quoting its argument: the answer, the tool.error event and the log keep a bounded prefix', async () => {
    const { plugin } = countingPlugin();
    const { registry, logged } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    const events: string[] = [];
    registry.events.on('tool.error', (e) => events.push(e.error.message));
    const error = await rejection(registry.execute('fails_loudly', { text: 'x'.repeat(MiB), how: 'throw' }));
    expect(error.code).toBe('TOOL_FAILED');
    const body = toToolErrorResult(error);
    expect(JSON.stringify(body).length).toBeLessThan(12_000);
    expect(events[0]!.length).toBeLessThan(ERROR_TEXT_MAX + 100);
    const log = logged.join('');
    expect(log).toMatch(/tool 'fails_loudly' of plugin 'sized' threw/);
    expect(log.length).toBeLessThan(20_000);
  });

  test('a schema refinement that quotes the value, and an unknown key, are shown by a bounded prefix', async () => {
    const { plugin } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    const refined = await rejection(registry.execute('refines', { word: 'w'.repeat(60_000) }));
    expect(refined.code).toBe('INVALID_ARGUMENTS');
    expect(refined.message.length).toBeLessThan(1300);
    expect(refined.message).toMatch(/received "w{77}\.\.\." \(60000 characters\)/);
    const unknown = await rejection(registry.execute('put', { ['u'.repeat(4000)]: 'x'.repeat(60_000) }));
    expect(unknown.message.length).toBeLessThan(400);
    expect(unknown.message).toMatch(/no such key \(unknown field u{39}…\)/);
  });

  test('thousands of issues are listed up to twenty, the rest counted', async () => {
    const { registry } = makeRegistry({
      plugins: [
        definePlugin({
          name: 'many',
          version: '1.0.0',
          setup: () => ({
            tools: [
              defineTool({
                name: 'numbers',
                description: 'numbers only',
                inputSchema: z.strictObject({ list: z.array(z.number()) }),
                execute: () => ({}),
              }),
            ],
          }),
        }),
      ],
    });
    await registry.exposeTool('many');
    const error = await rejection(registry.execute('numbers', { list: new Array(50_000).fill('s') }));
    expect(error.message.split('\n')).toHaveLength(22);
    expect(error.message).toMatch(/… and 980 more$/);
    expect(JSON.stringify(toToolErrorResult(error)).length).toBeLessThan(10_000);
  });

  test('describeCall of a huge argument is one short line', async () => {
    const { plugin } = countingPlugin();
    const { registry } = makeRegistry({ plugins: [plugin] });
    await registry.exposeTool('sized');
    const line = registry.describeCall('put', { note: ' \n'.repeat(1000) + 'y'.repeat(16 * MiB) });
    expect(line.length).toBeLessThanOrEqual(120);
    expect(line).not.toContain('\n');
  });
});
