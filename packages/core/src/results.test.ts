// Invariant: every result that leaves the registry carries a one-line `display`, and every `error` an `error_code`; a thrown error becomes the same `{ error, error_code, display }` body for every adapter.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { PluginRegistry } from './registry.js';
import { ERROR_CODES, oneLine, toToolErrorResult, withResultSummary } from './results.js';
import { PERMISSION_GATE } from './tokens.js';

const plugin = definePlugin({
  name: 'shapes',
  version: '1.0.0',
  setup: (ctx) => {
    ctx.provide(PERMISSION_GATE, {
      check: async (request) =>
        request.kind === 'command' && request.command.includes('sudo')
          ? { outcome: 'deny', reason: 'sudo runs as another user\nsecond line' }
          : { outcome: 'allow', reason: 'fine' },
    });
    return {
      tools: [
        defineTool({
          name: 'plain',
          description: 'returns data and no summary',
          inputSchema: z.strictObject({}),
          execute: () => ({ n: 1 }),
        }),
        defineTool({
          name: 'own_summary',
          description: 'writes its own display and code',
          inputSchema: z.strictObject({}),
          execute: () => ({ error: 'gone', error_code: 'UNKNOWN_TASK', display: 'task t1: unknown' }),
        }),
        defineTool({
          name: 'bare_error',
          description: 'an error without a code, as an old third-party plugin returns it',
          inputSchema: z.strictObject({ long: z.boolean().default(false) }),
          execute: ({ long }) => ({ error: long ? `${'x'.repeat(400)}\nmore` : 'it broke' }),
        }),
        defineTool({
          name: 'guarded',
          description: 'asks the gate',
          inputSchema: z.strictObject({ command: z.string() }),
          permission: ({ command }) => ({ kind: 'command', tool: 'guarded', command, cwd: '/' }),
          execute: ({ command }) => ({ ran: command }),
        }),
        defineTool({
          name: 'crash',
          description: 'throws a plain Error',
          inputSchema: z.strictObject({}),
          execute: () => {
            throw new Error('disk on fire');
          },
        }),
      ],
    };
  },
});

async function registry(): Promise<PluginRegistry> {
  const r = new PluginRegistry({ logger: pino({ level: 'silent' }), plugins: [plugin] });
  await r.expose('shapes');
  return r;
}

describe('result summaries', () => {
  it('adds ✓ to a successful result without one and keeps a tool’s own display and code', async () => {
    const r = await registry();
    expect(await r.execute('plain', {})).toEqual({ n: 1, display: '✓' });
    expect(await r.execute('own_summary', {})).toEqual({
      error: 'gone',
      error_code: 'UNKNOWN_TASK',
      display: 'task t1: unknown',
    });
    await r.dispose();
  });

  it('names an uncoded error TOOL_FAILED and cuts its display to one short line', async () => {
    const r = await registry();
    expect(await r.execute('bare_error', {})).toEqual({
      error: 'it broke',
      error_code: 'TOOL_FAILED',
      display: '✗ TOOL_FAILED: it broke',
    });
    const long = await r.execute('bare_error', { long: true });
    expect(long.display).toMatch(/^✗ TOOL_FAILED: x+…$/);
    expect((long.display as string).length).toBeLessThanOrEqual('✗ TOOL_FAILED: '.length + 160);
    await r.dispose();
  });

  it('a denial is PERMISSION_DENIED with a [Blocked] display of the reason’s first line', async () => {
    const r = await registry();
    expect(await r.execute('guarded', { command: 'sudo id' })).toMatchObject({
      error_code: 'PERMISSION_DENIED',
      display: '[Blocked] sudo runs as another user',
      permission_denied: true,
    });
    expect(await r.execute('guarded', { command: 'id' })).toEqual({ ran: 'id', display: '✓' });
    await r.dispose();
  });

  it('thrown errors become one body: code from the ConchError, TOOL_FAILED for anything else', async () => {
    const r = await registry();
    const outcomes = await Promise.all(
      [() => r.execute('nope', {}), () => r.execute('plain', { extra: 1 }), () => r.execute('crash', {})].map(
        (call) => call().then(() => undefined, toToolErrorResult),
      ),
    );
    expect(outcomes.map((o) => o?.error_code)).toEqual(['NO_SUCH_TOOL', 'INVALID_ARGUMENTS', 'TOOL_FAILED']);
    expect(outcomes[2]).toEqual({
      error: "Tool 'crash' failed: disk on fire",
      error_code: 'TOOL_FAILED',
      display: "✗ TOOL_FAILED: Tool 'crash' failed: disk on fire",
    });
    expect(toToolErrorResult('a string')).toEqual({
      error: 'a string',
      error_code: 'TOOL_FAILED',
      display: '✗ TOOL_FAILED: a string',
    });
    expect(toToolErrorResult(new ConchError({ code: 'TIMED_OUT', message: 'slow\nvery' })).display).toBe(
      '✗ TIMED_OUT: slow',
    );
    await r.dispose();
  });

  it('the documented set covers the shared codes and describes each', () => {
    for (const code of [
      'COMMAND_NOT_FOUND',
      'PERMISSION_DENIED',
      'UNKNOWN_SESSION',
      'POOL_FULL',
      'INVALID_ARGUMENTS',
    ]) {
      expect(ERROR_CODES).toHaveProperty(code);
    }
    for (const text of Object.values(ERROR_CODES)) expect(text.length).toBeGreaterThan(10);
    expect(oneLine('  a\nb ')).toBe('a');
    const same = { ok: true, display: 'done' };
    expect(withResultSummary(same)).toBe(same);
  });
});
