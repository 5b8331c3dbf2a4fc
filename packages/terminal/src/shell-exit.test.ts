// A session whose shell exits on its own is swept like a killed one: nothing it started outlives it.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive, processesMentioning, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Commands that start a `sleep 300` tagged `tag` the shell does not wait for, then exit. With
 * `deaf`, the sleep ignores SIGTERM (only the sweep's SIGKILL ends it).
 */
const LEAVERS: readonly { name: string; command: (tag: string, deaf?: boolean) => string }[] = [
  {
    name: 'setsid escapee',
    command: (tag, deaf) =>
      `setsid bash -c '${deaf ? 'trap "" TERM; ' : ''}exec -a ${tag} sleep 300' & sleep 0.5; exit`,
  },
  {
    name: 'nohup job',
    command: (tag, deaf) =>
      `nohup bash -c '${deaf ? 'trap "" TERM; ' : ''}exec -a ${tag} sleep 300' >/dev/null 2>&1 & sleep 0.5; exit`,
  },
  {
    name: 'plain background job',
    command: (tag, deaf) => `(${deaf ? 'trap "" TERM; ' : ''}exec -a ${tag} sleep 300) & sleep 0.5; exit`,
  },
];

describe('a shell that exits on its own', () => {
  for (const leaver of LEAVERS) {
    it(`leaves nothing alive 3 s after the call returns: ${leaver.name}`, async () => {
      h = createHarness();
      const tag = `conch-exit-${randomBytes(4).toString('hex')}`;
      const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
      const result = await h.call({ command: `sleep 0.2; ${leaver.command(tag)}` });
      expect(result).toMatchObject({ exit_code: 0 });
      expect(service.list()).toEqual([]);
      await sleep(3000);
      expect(processesMentioning(tag)).toEqual([]);
    });
  }

  it('sweeps an escapee caught inside an exec when the shell exits (one that execs in a loop)', async () => {
    h = createHarness();
    const dir = mkdtempSync(join(tmpdir(), 'conch-exit-exec-'));
    const tag = `conch-exit-exec-${randomBytes(4).toString('hex')}`;
    // A script that execs itself for ever: much of its life is inside execve, where its environ
    // (the cookie) and its command line read empty. The shell exits at once, so the sweep runs
    // while it loops.
    const loop = join(dir, `${tag}.sh`);
    writeFileSync(loop, '#!/bin/sh\nexec /bin/sh "$0"\n');
    chmodSync(loop, 0o755);
    // Its command line also reads empty for a moment in each exec: gone means gone for 50 looks.
    const goneForGood = () => Array.from({ length: 50 }).every(() => processesMentioning(tag).length === 0);
    try {
      for (let round = 0; round < 8; round++) {
        const result = await h.call({ command: `setsid ${loop} & nohup ${loop} >/dev/null 2>&1 & exit` });
        expect(result, `round ${round}`).toMatchObject({ exit_code: 0 });
        await waitFor(goneForGood, { what: `round ${round}: the loops swept`, timeoutMs: 15_000 });
      }
    } finally {
      // A loop left behind would spin for ever and slow every later test: look until none is seen.
      for (let look = 0; look < 200; look++)
        for (const pid of processesMentioning(tag)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is swept when it exits with nobody reading it (a background command)', async () => {
    h = createHarness();
    const tag = `conch-exit-bg-${randomBytes(4).toString('hex')}`;
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const exited: string[] = [];
    h.registry.events.on('terminal.session.exited', (e) => exited.push(e.reason));
    const started = await h.call({
      command: `sleep 2.5; setsid bash -c 'exec -a ${tag} sleep 300' & sleep 0.5; exit 4`,
      background: true,
    });
    expect(started).toMatchObject({ state: 'background' });
    const shell = service.list()[0]!.pid;
    await waitFor(() => service.list().length === 0, { what: 'the shell to exit', timeoutMs: 20_000 });
    expect(exited).toEqual(['exit']);
    expect(isAlive(shell)).toBe(false);
    await sleep(3000);
    expect(processesMentioning(tag)).toEqual([]);
  });

  it('leaves nothing alive once dispose() resolves, even when the shell exited just before', async () => {
    h = createHarness({ killGraceMs: 60_000 });
    const tags = [0, 1, 2].map(() => `conch-exit-dispose-${randomBytes(4).toString('hex')}`);
    for (const [i, leaver] of LEAVERS.entries()) {
      expect(await h.call({ command: leaver.command(tags[i]!, true) })).toMatchObject({ exit_code: 0 });
    }
    await waitFor(() => tags.every((tag) => processesMentioning(tag).length === 1), {
      what: 'the leftovers',
      timeoutMs: 10_000,
    });
    await h.dispose();
    h = undefined;
    for (const tag of tags) expect(processesMentioning(tag)).toEqual([]);
  });
});
