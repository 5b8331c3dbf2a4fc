// Invariant: a command whose processes are all gone while something conch cannot see still holds its
// output pipes (an `env -i setsid` escapee) is never an empty or silent success: what was read is
// returned with error_code OUTPUT_INCOMPLETE once the drain's bound passes; an ordinary command gets
// no such code.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, TOKENS } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliPlugin } from './plugin.js';
import type { Result } from './test-support/registry.js';

let dir: string;
let registry: PluginRegistry;
let manager: ProcessManager;
const marker = `31.${process.pid % 1000}7`;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-incomplete-'));
  manager = new ProcessManager({ cwd: dir, tempDir: () => dir, drainMs: 50 });
  // A manager of our own with a short drain (50 ms rounds: the bound is 30 of them), given before
  // the cli is exposed so the cli uses it; an allow-all gate.
  registry = new PluginRegistry({ cwd: dir, plugins: [cliPlugin] });
  registry.container.register(TOKENS.ProcessManager, { useValue: manager });
  registry.container.register(TOKENS.PermissionGate, {
    useValue: { check: () => Promise.resolve({ outcome: 'allow' as const, reason: 'test' }) },
  });
  registry.exposeSync('cli', {});
});
afterEach(async () => {
  try {
    execFileSync('pkill', ['-f', `sleep ${marker}`]);
  } catch {
    // none left
  }
  await registry.dispose();
  await manager.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('output that cannot finish arriving', () => {
  // Each command waits until its escapee has escaped (its own session, no cookie) before it ends:
  // on a loaded machine the background child may not have run yet when the shell exits, and while
  // it is still in the command's group with its cookie the sweep at the leader's exit rightly ends
  // it (seen beside three CPU hogs: no OUTPUT_INCOMPLETE, since nothing held the pipe any more).
  const escaped = `until [ -e .escaped ]; do sleep 0.01; done`;
  const escapee = (then: string) => `env -i setsid sh -c ': > .escaped; ${then}'`;
  it.each([
    ['stdout', `${escapee(`exec sleep ${marker}`)} & ${escaped}; echo seen`],
    ['stderr', `${escapee(`exec sleep ${marker}`)} 2>&1 >/dev/null & ${escaped}; echo seen`],
    ['both', `${escapee(`sleep ${marker}`)} & ${escaped}; echo seen; echo err >&2`],
  ])(
    'held by an escapee conch cannot see (%s): what was read, and OUTPUT_INCOMPLETE',
    async (_n, command) => {
      const r = (await registry.execute('cli_based_tool', { command })) as Result;
      expect(r.stdout).toBe('seen\n');
      expect(r.error_code).toBe('OUTPUT_INCOMPLETE');
      expect(r.error).toMatch(/did not finish arriving/);
    },
  );

  it('an ordinary command, and one whose escapee closed its pipes, get no such code', async () => {
    const plain = (await registry.execute('cli_based_tool', { command: 'echo plain' })) as Result;
    expect(plain).toMatchObject({ stdout: 'plain\n', returncode: 0 });
    expect(plain.error_code).toBeUndefined();
    const closed = (await registry.execute('cli_based_tool', {
      command: `env -i setsid sleep ${marker} >/dev/null 2>&1 & echo done`,
    })) as Result;
    expect(closed.stdout).toBe('done\n');
    expect(closed.error_code).toBeUndefined();
  });
});
