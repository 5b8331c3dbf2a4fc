// The registry validates config and arguments with named-field errors, isolates registries, honours aborts and disposes once.
import { existsSync, rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { tempDir } from '@conch/test-support';
import { Ajv } from 'ajv';
import { pino } from 'pino';
import { afterEach, describe, expect, onTestFinished, test } from 'vitest';
import { z } from 'zod';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { PluginRegistry } from './registry.js';
import { TOKENS } from './tokens.js';
import { echoPlugin, guardedPlugin } from './test-support/plugins.js';

const registries: PluginRegistry[] = [];
function makeRegistry(options: ConstructorParameters<typeof PluginRegistry>[0] = {}) {
  const registry = new PluginRegistry({ plugins: [echoPlugin, guardedPlugin], ...options });
  registries.push(registry);
  return registry;
}
afterEach(async () => {
  await Promise.all(registries.splice(0).map((r) => r.dispose()));
});

async function thrown(fn: () => unknown): Promise<ConchError> {
  try {
    await fn();
  } catch (error) {
    if (ConchError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a throw');
}

describe('exposeTool', () => {
  test('unknown plugin lists the known ones', async () => {
    const error = await thrown(() => makeRegistry().exposeTool('nope'));
    expect(error.code).toBe('NO_SUCH_PLUGIN');
    expect(error.message).toContain("Unknown plugin 'nope'");
    expect(error.message).toContain('echo, guarded');
  });

  test('bad config names the field, the expectation and the value', async () => {
    const error = await thrown(() => makeRegistry().exposeTool('echo', { maxOutputChars: -1 }));
    expect(error.code).toBe('INVALID_CONFIG');
    expect(error.message).toMatch(/maxOutputChars: .*>0.*received -1/);
  });

  test('unknown config keys are rejected by name', async () => {
    const error = await thrown(() => makeRegistry().exposeTool('echo', { prefixx: 'a' }));
    expect(error.message).toMatch(/prefixx: no such key/);
  });

  test('snake_case aliases map to camelCase; both spellings at once is an error', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo', { max_output_chars: 3 });
    expect(await registry.execute('echo', { text: 'abcdef' })).toEqual({ text: 'abc', display: '✓' });
    const error = await thrown(() =>
      makeRegistry().exposeTool('echo', { max_output_chars: 3, maxOutputChars: 4 }),
    );
    expect(error.message).toContain("given both 'maxOutputChars' and 'max_output_chars'");
  });

  test('exposing twice and duplicate tool names throw', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    expect((await thrown(() => registry.exposeTool('echo'))).code).toBe('PLUGIN_ALREADY_EXPOSED');
    const clash = definePlugin({
      name: 'clash',
      version: '1',
      configSchema: z.object({}),
      tools: () => [
        defineTool({ name: 'echo', description: 'again', inputSchema: z.object({}), execute: () => ({}) }),
      ],
    });
    registry.register(clash);
    const error = await thrown(() => registry.exposeTool('clash'));
    expect(error.code).toBe('DUPLICATE_TOOL');
    expect(error.message).toContain("already provided by plugin 'echo'");
    expect(registry.tools().map((t) => t.name)).toEqual(['echo', 'sleep']);
  });

  test('partners are exposed with derived config unless deferred or disabled', () => {
    const base = definePlugin({
      name: 'base',
      version: '1',
      configSchema: z.object({ n: z.number().default(1) }),
      tools: [],
    });
    const needy = definePlugin({
      name: 'needy',
      version: '1',
      configSchema: z.object({ n: z.number().default(7), partner: z.boolean().default(true) }),
      partners: [{ plugin: 'base', config: (c) => ({ n: c.n }), when: (c) => c.partner }],
      tools: [],
    });
    const registry = makeRegistry({ plugins: [base, needy] });
    registry.exposeSync('needy');
    expect(registry.isExposed('base')).toBe(true);
    const off = makeRegistry({ plugins: [base, needy] });
    off.exposeSync('needy', { partner: false });
    expect(off.isExposed('base')).toBe(false);
    const deferred = makeRegistry({ plugins: [base, needy] });
    deferred.exposeSync('needy', {}, { deferPartners: ['base'] });
    expect(deferred.isExposed('base')).toBe(false);
  });
});

describe('schemas', () => {
  test('all three formats carry valid JSON Schemas, computed once', () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    const ajv = new Ajv({ strict: false });
    const openai = registry.toolSchemas('openai') as {
      type: string;
      function: { name: string; parameters: object };
    }[];
    const anthropic = registry.toolSchemas('anthropic') as { name: string; input_schema: object }[];
    const plain = registry.toolSchemas('json-schema') as { name: string; inputSchema: object }[];
    expect(openai.map((t) => t.function.name)).toEqual(['echo', 'sleep']);
    expect(openai[0]?.type).toBe('function');
    for (const schema of [
      ...openai.map((t) => t.function.parameters),
      ...anthropic.map((t) => t.input_schema),
      ...plain.map((t) => t.inputSchema),
    ]) {
      expect(ajv.validateSchema(schema)).toBe(true);
    }
    const validate = ajv.compile(plain[0]!.inputSchema);
    expect(validate({ text: 'hi' })).toBe(true);
    expect(validate({ text: 1 })).toBe(false);
    expect(plain[0]!.inputSchema).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string', description: 'what to repeat' } },
      required: ['text'],
    });
    expect(registry.toolSchemas('openai')[0]).toStrictEqual(openai[0]);
    expect(registry.tools()[0]!.inputSchema).toBe(registry.tools()[0]!.inputSchema);
  });

  test('an unknown format is a named error', async () => {
    const error = await thrown(() => makeRegistry().toolSchemas('xml' as never));
    expect(error.message).toContain("expected 'openai', 'anthropic' or 'json-schema'");
  });

  test('systemInstructions joins exposed plugins only', () => {
    const registry = makeRegistry();
    expect(registry.systemInstructions()).toBe('');
    registry.exposeSync('echo', { prefix: '>' });
    expect(registry.systemInstructions()).toBe('echo repeats text, prefixed with ">".');
  });
});

describe('execute', () => {
  test('unknown tool lists the exposed ones', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    const error = await thrown(() => registry.execute('cli_based_tool', {}));
    expect(error.code).toBe('NO_SUCH_TOOL');
    expect(error.message).toContain('Exposed tools: echo, sleep');
  });

  test('bad arguments name the field', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    const error = await thrown(() => registry.execute('echo', {}));
    expect(error.code).toBe('INVALID_ARGUMENTS');
    expect(error.message).toMatch(/text: .*expected string.*received nothing/);
    const extra = await thrown(() => registry.execute('echo', { text: 'a', colour: 'red' }));
    expect(extra.message).toContain('colour: no such key');
  });

  test('events trace every step with one call id', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    const seen: string[] = [];
    for (const name of ['tool.call', 'tool.validated', 'tool.start', 'tool.result'] as const) {
      registry.events.on(name, (e) => seen.push(`${name}:${e.callId}`));
    }
    await registry.execute('echo', { text: 'a' }, { callId: 'c1' });
    expect(seen).toEqual(['tool.call:c1', 'tool.validated:c1', 'tool.start:c1', 'tool.result:c1']);
  });

  test('a tool that needs permission and finds no gate is refused with how to configure one', async () => {
    const registry = makeRegistry();
    registry.exposeSync('guarded');
    const error = await thrown(() => registry.execute('run_thing', { command: 'ls' }));
    expect(error.code).toBe('PERMISSION_GATE_MISSING');
    expect(error.message).toContain("registry.exposeTool('permission'");
  });

  test('the gate decides: deny comes back as a result value, allow runs', async () => {
    const registry = makeRegistry();
    registry.exposeSync('guarded');
    registry.container.register(TOKENS.PermissionGate, {
      useValue: {
        check: async (request: { command: string }) =>
          request.command.startsWith('rm')
            ? { outcome: 'deny', reason: 'rm is not allowed', rule: 'test', suggestion: "allow: ['rm x']" }
            : { outcome: 'allow', reason: 'fine' },
      },
    });
    expect(await registry.execute('run_thing', { command: 'ls' })).toEqual({ ran: 'ls', display: '✓' });
    expect(await registry.execute('run_thing', { command: 'rm x' })).toEqual({
      error: 'Permission denied: rm is not allowed',
      error_code: 'PERMISSION_DENIED',
      display: '[Blocked] rm is not allowed',
      permission_denied: true,
      rule: 'test',
      suggestion: "allow: ['rm x']",
    });
  });

  test('abort before execute throws ABORTED without running', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    const controller = new AbortController();
    controller.abort();
    let started = false;
    registry.events.on('tool.start', () => (started = true));
    const error = await thrown(() => registry.execute('echo', { text: 'a' }, { signal: controller.signal }));
    expect(error.code).toBe('ABORTED');
    expect(started).toBe(false);
  });

  test('abort during execute rejects at once and aborts the tool signal', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    const controller = new AbortController();
    const pending = registry.execute('sleep', { ms: 60_000 }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    const error = await thrown(() => pending);
    expect(error.code).toBe('ABORTED');
  });

  // A tool that takes a while to stop (a tree that ignores SIGTERM: SIGKILL after a grace, then a
  // check that it is gone, on a busy machine): the caller relies on nothing of the call running.
  test.each([150, 400, 900])(
    'an aborted call answers once its tool has stopped, %i ms after the abort',
    async (stopMs) => {
      const state = { stopped: false };
      const slowStopper = definePlugin({
        name: 'slow-stopper',
        version: '1',
        configSchema: z.object({}),
        tools: [
          defineTool({
            name: 'stop_slowly',
            description: 'stops a while after its abort',
            inputSchema: z.object({}),
            execute: (_args, call) =>
              new Promise((resolve) => {
                call.signal!.addEventListener('abort', () =>
                  setTimeout(() => {
                    state.stopped = true;
                    resolve({ stopped: true });
                  }, stopMs),
                );
              }),
          }),
        ],
      });
      const registry = makeRegistry({ plugins: [slowStopper] });
      registry.exposeSync('slow-stopper');
      const controller = new AbortController();
      const pending = registry.execute('stop_slowly', {}, { signal: controller.signal });
      setTimeout(() => controller.abort(), 20);
      const error = await thrown(() => pending);
      expect(error.code).toBe('ABORTED');
      expect(state.stopped).toBe(true);
    },
  );

  test('a tool that never stops on its abort: the call answers ABORTED after the wind-down, and says so in the log', async () => {
    const logged: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(String(chunk));
        done();
      },
    });
    const deaf = definePlugin({
      name: 'deaf',
      version: '1',
      configSchema: z.object({}),
      tools: [
        defineTool({
          name: 'ignore_abort',
          description: 'never stops',
          inputSchema: z.object({}),
          execute: () => new Promise(() => undefined),
        }),
      ],
    });
    const registry = makeRegistry({ plugins: [deaf], logger: pino({ level: 'warn' }, sink) });
    registry.exposeSync('deaf');
    const controller = new AbortController();
    const pending = registry.execute('ignore_abort', {}, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    const error = await thrown(() => pending);
    expect(error.code).toBe('ABORTED');
    expect(logged.join('')).toContain(
      "tool 'ignore_abort' of plugin 'deaf' had not stopped 5000 ms after its call was aborted",
    );
  });
});

describe('a crashing plugin', () => {
  test('a tool that throws gives TOOL_FAILED with the cause, and the registry keeps working', async () => {
    const buggy = definePlugin({
      name: 'buggy',
      version: '1',
      configSchema: z.object({}),
      tools: [
        defineTool({
          name: 'crash',
          description: 'throws',
          inputSchema: z.object({}),
          execute: () => {
            throw new TypeError('undefined is not a function');
          },
        }),
      ],
    });
    const registry = makeRegistry({ plugins: [echoPlugin, buggy] });
    registry.exposeSync('buggy');
    registry.exposeSync('echo');
    const error = await thrown(() => registry.execute('crash', {}));
    expect(error.code).toBe('TOOL_FAILED');
    expect(error.message).toBe("Tool 'crash' failed: undefined is not a function");
    expect(error.cause).toBeInstanceOf(TypeError);
    expect(await registry.execute('echo', { text: 'still here' })).toEqual({
      text: 'still here',
      display: '✓',
    });
  });
});

describe('isolation and lifecycle', () => {
  test('two registries share no state: exposure, services, events, temp dirs', async () => {
    const a = makeRegistry();
    const b = makeRegistry();
    a.exposeSync('echo', { prefix: 'A' });
    b.exposeSync('echo', { prefix: 'B' });
    a.container.register(TOKENS.PermissionGate, {
      useValue: { check: async () => ({ outcome: 'allow', reason: '' }) },
    });
    expect(a.resolveOptional(TOKENS.PermissionGate)).toBeDefined();
    expect(b.resolveOptional(TOKENS.PermissionGate)).toBeUndefined();
    let bEvents = 0;
    b.events.on('tool.result', () => bEvents++);
    expect(await a.execute('echo', { text: 'x' })).toEqual({ text: 'Ax', display: '✓' });
    expect(await b.execute('echo', { text: 'x' })).toEqual({ text: 'Bx', display: '✓' });
    expect(bEvents).toBe(1);
    expect(a.tempDir()).not.toBe(b.tempDir());
    expect(a.events).not.toBe(b.events);
  });

  test('dispose is idempotent, runs plugin disposers once, removes the temp dir and aborts in-flight calls', async () => {
    let disposed = 0;
    const counted = definePlugin({
      name: 'counted',
      version: '1',
      configSchema: z.object({}),
      register: (ctx) => ctx.onDispose(() => void disposed++),
      tools: [],
    });
    const tempRoot = tempDir('conch-core-');
    const registry = makeRegistry({ plugins: [echoPlugin, counted], tempRoot });
    registry.exposeSync('counted');
    registry.exposeSync('echo');
    const dir = registry.tempDir();
    expect(existsSync(dir)).toBe(true);
    const inFlight = registry.execute('sleep', { ms: 60_000 });
    const first = registry.dispose();
    const second = registry.dispose();
    expect(second).toBe(first);
    await first;
    await registry.dispose();
    expect(disposed).toBe(1);
    expect(existsSync(dir)).toBe(false);
    expect((await thrown(() => inFlight)).code).toBe('ABORTED');
    expect((await thrown(() => registry.execute('echo', { text: 'a' }))).code).toBe('REGISTRY_DISPOSED');
    expect((await thrown(() => registry.exposeTool('echo'))).code).toBe('REGISTRY_DISPOSED');
  });

  test('keepTempFiles keeps the temp dir', async () => {
    const registry = makeRegistry({ keepTempFiles: true });
    const dir = registry.tempDir();
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    await registry.dispose();
    expect(existsSync(dir)).toBe(true);
  });

  test('a throwing event listener does not break the call', async () => {
    const registry = makeRegistry();
    registry.exposeSync('echo');
    registry.events.on('tool.start', () => {
      throw new Error('listener bug');
    });
    expect(await registry.execute('echo', { text: 'ok' })).toEqual({ text: 'ok', display: '✓' });
  });
});
