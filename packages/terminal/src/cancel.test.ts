// Invariant: a cancel (the call's abort, or kill: true) leaves no process of the session alive by the time the caller hears of it, even one that ignores SIGTERM.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pidAlive } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { TERMINAL_SERVICE, type TerminalService } from './index.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

/** A command whose shell and child ignore SIGTERM and write their pids to `file`. */
const deaf = (file: string) => `sh -c 'trap "" TERM; sleep 300 & echo $$ $! > ${file}; wait'`;

async function treeOf(file: string, harness: Harness): Promise<number[]> {
  await waitFor(() => existsSync(file) && readFileSync(file, 'utf8').includes('\n'), {
    what: 'the command to start',
    timeoutMs: 30_000,
  });
  const shell = harness.registry.resolve<TerminalService>(TERMINAL_SERVICE).list()[0]!.pid;
  return [shell, ...readFileSync(file, 'utf8').trim().split(/\s+/).map(Number)];
}

describe('cancel', () => {
  it('an aborted command: its whole tree is gone when the call rejects', async () => {
    h = createHarness();
    const file = join(h.root, 'pids');
    const controller = new AbortController();
    const pending = h.call({ command: deaf(file) }, { signal: controller.signal });
    const pids = await treeOf(file, h);
    expect(pids.filter((pid) => pidAlive(pid))).toHaveLength(3);
    controller.abort();
    await expect(pending).rejects.toThrow(/aborted/);
    expect(pids.filter((pid) => pidAlive(pid))).toEqual([]);
    // Ended like a kill: the next call starts a new shell.
    await waitFor(() => h!.registry.resolve<TerminalService>(TERMINAL_SERVICE).list().length === 0);
    expect(await h.call({ command: 'echo fresh' })).toMatchObject({ exit_code: 0, output: 'fresh\n' });
  });

  it('kill: true of a running command: its whole tree is gone when the call returns', async () => {
    h = createHarness();
    const file = join(h.root, 'pids');
    const running = await h.call({ command: deaf(file), idle_ms: 300 });
    expect(running).toMatchObject({ state: 'waiting' });
    const pids = await treeOf(file, h);
    expect(await h.call({ session_id: running.session_id, kill: true })).toMatchObject({ killed: true });
    expect(pids.filter((pid) => pidAlive(pid))).toEqual([]);
  });
});
