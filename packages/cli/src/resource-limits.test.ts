// Invariant: a command that runs into its sandbox's memory or process limit says so in its result —
// error_code OUT_OF_MEMORY / PROCESS_LIMIT, the limit and how it is enforced, the signal — instead
// of a bare exit status.
import { mkdtempSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PluginRegistry, ToolResult } from '@conch/core';
import { findBwrap, PROCESS_MANAGER } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sandboxedRegistry, survivors } from './test-support/registry.js';

const BWRAP = findBwrap();
if (process.env.CI && !BWRAP) throw new Error('the resource limit tests need bubblewrap under CI');
const python = spawnSync('python3', ['--version']).status === 0;
const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

type Result = ToolResult & Record<string, any>;

let dir: string;
const registries: PluginRegistry[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-limits-'));
});
afterEach(async () => {
  for (const r of registries.splice(0)) {
    const prefix = r.resolveOptional(PROCESS_MANAGER)?.cookiePrefix;
    await r.dispose();
    if (prefix) expect(survivors(prefix)).toEqual([]);
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A registry whose gate runs every command in the workspace-write sandbox with small limits. */
async function limitedRegistry(): Promise<PluginRegistry> {
  const registry = await sandboxedRegistry(dir, {
    background: false,
    policy: { resources: { tmpfsBytes: 64 * MiB, memoryBytes: GiB, processes: 128, idleMs: 0 } },
  });
  registries.push(registry);
  return registry;
}

const run = async (registry: PluginRegistry, command: string) =>
  (await registry.execute('cli_based_tool', { command, background: false, timeout: 120 })) as Result;

describe.runIf((BWRAP && python) || process.env.CI)('cli_based_tool at a sandbox limit', () => {
  it('a 20 GiB allocation comes back as OUT_OF_MEMORY with the limit, not a bare exit status', async () => {
    const registry = await limitedRegistry();
    const r = await run(registry, 'python3 -c "b = bytearray(20 << 30)"');
    expect(r.sandbox).toBe('workspace-write');
    expect(r.error_code).toBe('OUT_OF_MEMORY');
    expect(r.returncode).toBe(1);
    expect(r.limit).toMatchObject({ kind: 'memory', bytes: GiB });
    expect(r.limit.mechanism).toMatch(/^(rlimit|cgroup-v2|machine)$/);
    expect(r.limit.evidence).toBeTruthy();
    expect(r.error).toMatch(/1 GiB|1024 MiB/);
    expect(r.display).toMatch(/OUT_OF_MEMORY/);
  }, 120_000);

  it('a fork loop comes back as PROCESS_LIMIT with the limit and the signal', async () => {
    const registry = await limitedRegistry();
    const r = await run(
      registry,
      `python3 -c 'import os
while True:
  try: os.fork()
  except OSError: pass'`,
    );
    expect(r.error_code).toBe('PROCESS_LIMIT');
    expect(r.returncode).toBe(137);
    expect(r.signal).toBe('SIGKILL');
    expect(r.limit).toMatchObject({ kind: 'processes', processes: 128 });
    expect(r.error).toMatch(/limit of 128 processes/);
    // The sandbox goes on.
    const after = await run(registry, 'echo still here');
    expect(after.returncode).toBe(0);
    expect(after.stdout).toContain('still here');
  }, 120_000);

  it('an ordinary failure keeps its own code', async () => {
    const registry = await limitedRegistry();
    const r = await run(registry, 'ls /no/such/dir');
    expect(r.error_code).toBe('NO_SUCH_FILE');
    expect(r.limit).toBeUndefined();
  }, 60_000);
});
