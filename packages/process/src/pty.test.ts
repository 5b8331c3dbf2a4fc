// Invariant: spawnPty gives a working terminal (data, input, resize, exit, signals) whose pid is the shell's and whose whole tree carries the manager's cookie and dies with dispose — through the supervisor and in-process alike.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidSpawnOptionError, PtySpawnError } from './errors.js';
import { findCookiePids } from './kill-tree.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import type { PtyExit, PtyProcess } from './pty-process.js';
import { survivors } from './test-support/procs.js';

const ptyModule = createRequire(import.meta.url).resolve('@lydell/node-pty');

/** Collects a PTY's output; `until(text)` waits for it to appear. */
function collect(pty: PtyProcess): { text: () => string; until: (needle: string) => Promise<void> } {
  let out = '';
  pty.onData((d) => (out += d));
  return {
    text: () => out,
    until: async (needle) => {
      await waitFor(() => out.includes(needle), { what: `output ${needle}`, timeoutMs: 10_000 });
    },
  };
}

function exited(pty: PtyProcess): Promise<PtyExit> {
  return new Promise((resolve) => pty.onExit(resolve));
}

describe.each([
  ['through the supervisor', {}],
  ['in-process (no supervisor)', { supervisor: false }],
] as [string, ProcessManagerOptions][])('spawnPty %s', (_name, mode) => {
  let manager: ProcessManager;
  beforeEach(() => {
    manager = new ProcessManager({ ...mode, killGraceMs: 300 });
  });
  afterEach(async () => {
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
  });

  const shell = (extra: Partial<Parameters<ProcessManager['spawnPty']>[0]> = {}) =>
    manager.spawnPty({
      file: '/bin/sh',
      args: ['-i'],
      cwd: '/',
      env: { PATH: process.env.PATH, PS1: '$ ', CONCH_TEST_VAR: 'v1', REMOVED: undefined },
      cols: 80,
      rows: 24,
      ptyModule,
      ...extra,
    });

  it('runs an interactive shell: input, output, a tty, the env, the exit code', async () => {
    const pty = shell();
    // node-pty returns right after fork(): the exec follows a moment later.
    const cmdline = () => readFileSync(`/proc/${pty.pid}/cmdline`, 'utf8');
    await waitFor(() => cmdline() === '/bin/sh\0-i\0', { what: 'the shell exec', timeoutMs: 5_000 });
    expect(pty.cookie.startsWith(manager.cookiePrefix)).toBe(true);
    expect(findCookiePids({ cookie: pty.cookie })).toEqual([pty.pid]);
    const out = collect(pty);
    pty.write('tty; echo "var=$CONCH_TEST_VAR removed=${REMOVED-unset}"; echo do""ne\n');
    await out.until('done');
    expect(out.text()).toMatch(/\/dev\/pts\/\d+/);
    expect(out.text()).toContain('var=v1 removed=unset');
    const exit = exited(pty);
    pty.write('exit 3\n');
    expect(await exit).toEqual({ exitCode: 3, signal: 0 });
  });

  it('resizes the terminal', async () => {
    const pty = shell();
    const out = collect(pty);
    pty.resize(100, 30);
    pty.write('stty size; echo si""zed\n');
    await out.until('sized');
    expect(out.text()).toContain('30 100');
  });

  it('kill() signals the shell', async () => {
    const pty = shell();
    const exit = exited(pty);
    pty.kill('SIGKILL');
    expect((await exit).signal).toBe(9);
    // onExit after the fact still answers
    expect(await exited(pty)).toEqual(await exit);
  });

  it('dispose() ends the whole tree: jobs in their own groups and setsid escapees', async () => {
    const pty = shell();
    const out = collect(pty);
    pty.write('setsid sleep 310 & sleep 311 & echo st""arted\n');
    await out.until('started');
    await waitFor(() => survivors(pty.cookie).length === 3, {
      what: 'shell and two jobs',
      timeoutMs: 10_000,
    });
    const exit = exited(pty);
    await manager.dispose();
    await exit;
    expect(survivors(pty.cookie)).toEqual([]);
  });

  it('reports a node-pty that cannot be loaded as PtySpawnError, a relative path as a bad option', () => {
    expect(() => shell({ ptyModule: '/nonexistent/node-pty/index.js' })).toThrow(PtySpawnError);
    expect(() => shell({ ptyModule: 'node-pty' })).toThrow(InvalidSpawnOptionError);
    expect(() => shell({ cols: 0 })).toThrow(/'cols': expected a positive integer; received 0/);
  });
});
