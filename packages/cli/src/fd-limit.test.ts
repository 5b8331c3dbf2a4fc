// Invariant: under a low open-file limit (ulimit -n), a call one too many for the file descriptors
// left comes back alone, at once, with TOO_MANY_OPEN_FILES and what to do; the calls already
// running finish with their output, and the supervisor and the sandbox are still the same ones.
// (Its own file: the limit is lowered before this worker starts any command, as a host's would be.)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PluginRegistry } from '@conch/core';
import { findBwrap, PROCESS_MANAGER, type ProcessManager } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeRegistry, sandboxedRegistry, survivors, type Result } from './test-support/registry.js';

let dir: string;
let registry: PluginRegistry | undefined;
let restore: (() => void) | undefined;
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-cli-fds-')));
});
afterEach(async () => {
  if (registry) {
    const prefix = registry.resolve<ProcessManager>(PROCESS_MANAGER).cookiePrefix;
    await registry.dispose();
    expect(survivors(prefix)).toEqual([]);
    registry = undefined;
  }
  restore?.();
  restore = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** This process's soft open-file limit set to `soft` (prlimit), put back after the test. */
function lowerSoftLimit(soft: number): void {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'))!;
  const [was, hard] = line.slice('Max open files'.length).trim().split(/\s+/);
  execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${soft}:${hard}`]);
  restore = () => execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${was}:${hard}`]);
}

/** A registry running every command outside any sandbox, or in the workspace-write one. */
async function makeCli(boxed: boolean) {
  // Outside any sandbox: a gate that allows without one (test-support's).
  registry = boxed
    ? await sandboxedRegistry(dir, { background: false })
    : makeRegistry(dir, {}, { background: false });
  const r = registry;
  return {
    run: async (args: Record<string, unknown>) => (await r.execute('cli_based_tool', args)) as Result,
    manager: () => r.resolve<ProcessManager>(PROCESS_MANAGER),
  };
}

describe('ulimit -n 256 and 90 calls at once', () => {
  it.each([
    ['outside any sandbox', false],
    ...(findBwrap() || process.env.CI ? ([['in the workspace-write sandbox', true]] as const) : []),
  ] as const)(
    '%s: a call too many is refused alone with TOO_MANY_OPEN_FILES, the others finish with their output',
    async (_name, boxed) => {
      lowerSoftLimit(256);
      const { run, manager } = await makeCli(boxed);
      const first = await run({ command: 'echo first' });
      expect(first.stdout, JSON.stringify(first)).toBe('first\n');
      const supervisor = manager().supervisorPids();
      // Every command waits for the gate, opened once each call runs or came back refused: they
      // all hold their pipes at once.
      const gate = join(dir, 'go');
      let settled = 0;
      const calls = Array.from({ length: 90 }, (_, i) =>
        run({ command: `while [ ! -e ${gate} ]; do sleep 0.05; done; echo done-${i}` }).then((r) => {
          settled++;
          return r;
        }),
      );
      await waitFor(
        () =>
          settled +
            manager()
              .list()
              .filter((p) => p.isRunning).length >=
          90,
        {
          what: 'every call running or refused',
          timeoutMs: 60_000,
        },
      );
      writeFileSync(gate, '');
      const results = await Promise.all(calls);
      const ok = results.filter((r, i) => r.returncode === 0 && r.stdout === `done-${i}\n`);
      const refused = results.filter((r) => r.error_code === 'TOO_MANY_OPEN_FILES');
      const others = results.filter((r) => !ok.includes(r) && !refused.includes(r));
      expect(others.map((r) => JSON.stringify(r).slice(0, 600))).toEqual([]);
      expect(ok.length).toBeGreaterThan(10);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0]!.error).toMatch(
        /^Not run: too many open files: .*256 file descriptors \(ulimit -n\).*raise the limit/,
      );
      expect(refused[0]!.returncode).toBe(-1);
      // Nothing was lost: the next call runs on the same supervisor.
      expect((await run({ command: 'echo next' })).stdout).toBe('next\n');
      expect(manager().supervisorPids()).toEqual(supervisor);
    },
  );
});
