// Invariant: a terminal call's `env` is judged as the `export` line it becomes, whatever its size:
// 10,000 or 30,000 variables reach the shell (no parse-limit refusal), and a variable the gate would
// ask about is still asked about (and, with no approver, refused) when it hides among thousands.
import 'reflect-metadata';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { terminalPlugin } from './plugin.js';

let root: string;
let registry: PluginRegistry;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'conch-terminal-env-'));
});
afterEach(async () => {
  await registry.dispose();
  rmSync(root, { recursive: true, force: true });
});

async function setUp(permission: Record<string, unknown>): Promise<void> {
  registry = new PluginRegistry({ cwd: root, tempRoot: root, logger: pino({ level: 'silent' }) });
  registry.register(permissionPlugin);
  registry.register(terminalPlugin);
  await registry.expose('permission', permission);
  await registry.expose('terminal', { shell: '/bin/bash' });
}
const call = (args: Record<string, unknown>) =>
  registry.execute('terminal', args) as Promise<ToolResult & Record<string, any>>;

function many(n: number, name: (i: number) => string, value: (i: number) => string): Record<string, string> {
  const env: Record<string, string> = {};
  for (let i = 0; i < n; i++) env[name(i)] = value(i);
  return env;
}

describe('a terminal started with thousands of variables', () => {
  it.each([
    ['10,000 short ones', 10_000, 8],
    ['30,000 short ones', 30_000, 8],
    ['2,000 of 200 bytes with quotes and spaces', 2_000, 200],
  ])('%s, default sandbox: every one reaches the shell', async (_name, n, size) => {
    await setUp({});
    const value = (i: number) => `${i}'s "v" $(x) `.padEnd(size, '.');
    const env = many(n, (i) => `BIG_${i}`, value);
    const picks = [0, Math.floor(n / 3), n - 1];
    const res = await call({
      command: picks.map((i) => `printf '%s\\n' "$BIG_${i}"`).join('; '),
      env,
      timeout: 60,
    });
    expect(res.error, JSON.stringify(res).slice(0, 400)).toBeUndefined();
    expect(res.output).toBe(picks.map((i) => `${value(i)}\n`).join(''));
  });

  it.each([
    ['first', 0],
    ['in the middle', 6_000],
    ['last', 11_999],
  ])(
    'sandbox off, no approver: one variable the gate asks about, %s among 12,000 inert ones, is refused and nothing runs',
    async (_name, at) => {
      await setUp({ sandbox: 'off' });
      const env = many(
        12_000,
        (i) => `inert_${i}`,
        (i) => `v${i}`,
      );
      const entries = Object.entries(env);
      entries.splice(at, 0, ['LD_PRELOAD', join(root, 'x.so')]);
      const marker = join(root, 'ran');
      const res = await call({ command: `touch ${marker}`, env: Object.fromEntries(entries), timeout: 60 });
      expect(res.error_code).toBe('PERMISSION_DENIED');
      expect(res.error).toContain('LD_PRELOAD');
      expect(existsSync(marker)).toBe(false);
    },
  );

  it('sandbox off, no approver: 12,000 inert variables alone run', async () => {
    await setUp({ sandbox: 'off' });
    const env = many(
      12_000,
      (i) => `inert_${i}`,
      (i) => `v${i}`,
    );
    const res = await call({ command: 'echo "$inert_0 $inert_11999"', env, timeout: 60 });
    expect(res.error, JSON.stringify(res).slice(0, 400)).toBeUndefined();
    expect(res.output).toBe('v0 v11999\n');
  });
});
