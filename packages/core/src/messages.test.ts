// Invariant: validation errors help the caller fix them — an unknown config key or argument gets a "did you mean", and the display of INVALID_ARGUMENTS lists each issue on its own line, bounded.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin, defineTool } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { suggestKey } from './errors/validation-issue.js';
import { PluginRegistry } from './registry.js';
import { toToolErrorResult } from './results.js';

const plugin = definePlugin({
  name: 'typos',
  version: '1.0.0',
  configSchema: z.strictObject({
    maxOutputChars: z.number().optional(),
    extraPaths: z.array(z.string()).optional(),
  }),
  setup: () => ({
    tools: [
      defineTool({
        name: 'shell',
        description: 'Shell',
        inputSchema: z.strictObject({
          command: z.string(),
          session_id: z.number().optional(),
          timeout: z.number().optional(),
          a: z.string().optional(),
          b: z.string().optional(),
          c: z.string().optional(),
          d: z.string().optional(),
          e: z.string().optional(),
          f: z.string().optional(),
        }),
        execute: () => ({}),
      }),
    ],
  }),
});

const registry = () => new PluginRegistry({ logger: pino({ level: 'silent' }), plugins: [plugin] });

describe('did you mean', () => {
  it('suggests the config key in both spellings, naming the key as given', async () => {
    const r = registry();
    const error = await r.expose('typos', { max_ouput_chars: 5 }).catch((e: unknown) => e);
    expect(ConchError.isInstance(error) && error.code).toBe('INVALID_CONFIG');
    expect((error as Error).message).toContain(
      "max_ouput_chars: no such key (unknown field max_ouput_chars); did you mean 'maxOutputChars' / 'max_output_chars'?",
    );
    const camel = await r.expose('typos', { extraPath: [] }).catch((e: unknown) => e);
    expect((camel as Error).message).toContain("did you mean 'extraPaths' / 'extra_paths'?");
    const far = await r.expose('typos', { colour: 'red' }).catch((e: unknown) => e);
    expect((far as Error).message).not.toContain('did you mean');
    await r.dispose();
  });

  it('suggests the argument name for a tool call, and lists each issue on its own display line', async () => {
    const r = registry();
    await r.exposeTool('typos');
    const error = await r.execute('shell', { comand: 'ls', sessionId: 1 }).catch((e: unknown) => e);
    expect(ConchError.isInstance(error) && error.code).toBe('INVALID_ARGUMENTS');
    expect((error as Error).message).toContain(
      "comand: no such key (unknown field comand); did you mean 'command'?",
    );
    expect((error as Error).message).toContain("did you mean 'session_id'?");
    const { display } = toToolErrorResult(error);
    const lines = display.split('\n');
    expect(lines[0]).toBe("✗ INVALID_ARGUMENTS: Invalid arguments for tool 'shell'");
    expect(lines.slice(1)).toEqual([
      '  command: Invalid input: expected string, received undefined; received nothing (undefined)',
      '  comand: no such key (unknown field comand); did you mean \'command\'?; received "ls"',
      "  sessionId: no such key (unknown field sessionId); did you mean 'session_id'?; received 1",
    ]);
    await r.dispose();
  });

  it('bounds the display to five issues and one line each', async () => {
    const r = registry();
    await r.exposeTool('typos');
    const error = await r
      .execute('shell', { command: 'x'.repeat(400), a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, timeout: 'no' })
      .catch((e: unknown) => e);
    const lines = toToolErrorResult(error).display.split('\n');
    expect(lines).toHaveLength(1 + 5 + 1);
    expect(lines.at(-1)).toBe('  … and 2 more');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(170);
    await r.dispose();
  });

  it('suggestKey finds near misses only', () => {
    expect(suggestKey('max_ouput_chars', ['maxOutputChars', 'extraPaths'], true)).toBe(
      "'maxOutputChars' / 'max_output_chars'",
    );
    expect(suggestKey('comand', ['command', 'cwd'])).toBe("'command'");
    expect(suggestKey('xyz', ['command', 'cwd'])).toBeUndefined();
  });
});
