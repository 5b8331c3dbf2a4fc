// Invariant: pai's ProcessManager contract (seed 002) holds on conch's ProcessManager with real
// processes — a caller's process_id is honoured and never shared, kill(id, timeout) escalates
// SIGTERM -> SIGKILL after `timeout` seconds and resolves a boolean once the whole tree is gone,
// kill_all ends everything, a killed process's exit_code is asyncio's (-15 / -9), and ProcessInfo
// has pai's field names — through the supervisor and in-process alike, leaving nothing running.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConchError } from '@conch/core';
import { waitFor } from '@conch/test-support';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DuplicateProcessIdError, InvalidProcessArgumentError, InvalidSpawnOptionError } from './errors.js';
import { pidAlive } from './kill-tree.js';
import type { ManagedProcess } from './managed-process.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import { survivors } from './test-support/procs.js';

const prefixes: string[] = [];
afterAll(() => {
  for (const prefix of prefixes) expect(survivors(prefix)).toEqual([]);
});

/** Whether `process.kill(pid, 0)` says the pid is gone (ESRCH). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Resolves with the first output line matching `pattern` (output events, not sleeps). */
function line(proc: ManagedProcess, pattern: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let text = '';
    const off = proc.onOutput((e) => {
      text += e.text;
      const match = pattern.exec(text);
      if (match) {
        off();
        resolve(match);
      }
    });
    void proc.result.then(() => reject(new Error(`exited before printing ${pattern}: ${text}`)));
  });
}

/** A shell that ignores SIGTERM with a child (also ignoring it) and says both pids once set up. */
const STUBBORN = `trap '' TERM; sleep 60 & echo "child=$! shell=$$"; wait`;

async function startStubborn(m: ProcessManager, options: { process_id?: string } = {}) {
  const proc = m.spawn(STUBBORN, [], { shell: '/bin/bash', ...options });
  const match = await line(proc, /child=(\d+) shell=(\d+)/);
  return { proc, child: Number(match[1]), shell: Number(match[2]) };
}

const MODES: [string, ProcessManagerOptions][] = [
  ['through the supervisor', {}],
  ['in-process (no supervisor)', { supervisor: false }],
];

describe.each(MODES)("pai's ProcessManager, %s", (_name, mode) => {
  let dir: string;
  let manager: ProcessManager;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'conch-pai-'));
    // A long own grace: the tests below prove the per-call `timeout` is what escalates.
    manager = new ProcessManager({
      ...mode,
      tempDir: () => dir,
      cwd: dir,
      killGraceMs: 60_000,
      drainMs: 300,
    });
    prefixes.push(manager.cookiePrefix);
  });
  afterEach(async () => {
    await manager.kill_all(0);
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('spawn(process_id)', () => {
    it("honours a caller's process_id (and processId) in get, list and events", async () => {
      const proc = manager.spawn('echo', ['hi'], { process_id: 'web-server' });
      expect(proc.id).toBe('web-server');
      expect(proc.process_id).toBe('web-server');
      expect(manager.get_process('web-server')).toBe(proc);
      expect(manager.get('web-server')).toBe(proc);
      const camel = manager.spawn('echo', ['ho'], { processId: 'worker' });
      expect(camel.id).toBe('worker');
      await Promise.all([proc.result, camel.result]);
      expect(manager.list_processes().map((p) => p.process_id)).toEqual(['web-server', 'worker']);
      expect((await proc.result).id).toBe('web-server');
    });

    it('null/undefined process_id is auto-generated, and auto ids skip ids callers took', async () => {
      const taken = manager.spawn('true', [], { process_id: 'p2' });
      const a = manager.spawn('true', [], { process_id: null });
      const b = manager.spawn('true');
      expect(taken.id).toBe('p2');
      expect(a.id).toMatch(/^p\d+$/);
      expect(b.id).toMatch(/^p\d+$/);
      expect(new Set([taken.id, a.id, b.id]).size).toBe(3);
      // Cookies stay distinct (the caller's id never goes into one).
      expect(new Set([taken.cookie, a.cookie, b.cookie]).size).toBe(3);
      await Promise.all([taken.result, a.result, b.result]);
    });

    it('refuses the id of a running process and of a finished one still listed, naming the field', async () => {
      const { proc } = await startStubborn(manager, { process_id: 'dup' });
      let error: unknown;
      try {
        manager.spawn('true', [], { process_id: 'dup' });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(DuplicateProcessIdError);
      expect(ConchError.isInstance(error) && error.code).toBe('DUPLICATE_PROCESS_ID');
      expect((error as Error).message).toMatch(/^spawn option 'process_id': expected an id no process/);
      expect((error as Error).message).toContain('"dup"');
      expect((error as Error).message).toContain('running process');
      expect(() => manager.spawn('true', [], { processId: 'dup' })).toThrow(/spawn option 'processId'/);
      // Nothing was started by the refused calls; the first process is untouched.
      expect(manager.list().filter((p) => p.process_id === 'dup')).toHaveLength(1);
      expect(proc.is_running).toBe(true);
      expect(await manager.kill('dup', 0)).toBe(true);
      expect(() => manager.spawn('true', [], { process_id: 'dup' })).toThrow(/finished process still listed/);
    });

    it('refuses an invalid process_id naming the field', () => {
      for (const [options, field] of [
        [{ process_id: '' }, 'process_id'],
        [{ process_id: '   ' }, 'process_id'],
        [{ process_id: 42 }, 'process_id'],
        [{ process_id: { id: 'x' } }, 'process_id'],
        [{ process_id: 'a\0b' }, 'process_id'],
        [{ process_id: 'x'.repeat(201) }, 'process_id'],
        [{ processId: '' }, 'processId'],
        [{ process_id: 'a', processId: 'b' }, 'processId'],
      ] as const) {
        let error: unknown;
        try {
          manager.spawn('true', [], options as never);
        } catch (e) {
          error = e;
        }
        expect(error, JSON.stringify(options)).toBeInstanceOf(InvalidSpawnOptionError);
        expect((error as Error).message).toContain(`spawn option '${field}': expected`);
      }
      // The same id in both fields is one id.
      expect(manager.spawn('true', [], { process_id: 'same', processId: 'same' }).id).toBe('same');
      expect(manager.list().map((p) => p.process_id)).toEqual(['same']);
    });
  });

  describe('kill(process_id, timeout)', () => {
    it('SIGTERM, then SIGKILL after `timeout` s to a tree ignoring SIGTERM: true, the tree gone, exit_code -9', async () => {
      const { proc, child, shell } = await startStubborn(manager, { process_id: 'stubborn' });
      expect(pidAlive(child) && pidAlive(shell)).toBe(true);
      const t0 = performance.now();
      const killed = await manager.kill('stubborn', 0.5);
      const elapsed = performance.now() - t0;
      expect(killed).toBe(true);
      // It waited for the grace (SIGTERM was ignored), far less than the manager's own 60 s.
      expect(elapsed).toBeGreaterThanOrEqual(450);
      expect(elapsed).toBeLessThan(30_000);
      // No live process of the tree is left when kill resolves; the kernel drops the pids once reaped.
      expect(pidAlive(shell)).toBe(false);
      expect(pidAlive(child)).toBe(false);
      await waitFor(() => gone(shell) && gone(child), { what: 'ESRCH for the shell and its child' });
      const result = await proc.result;
      expect(result.killed).toBe(true);
      expect(result.signal).toBe('SIGKILL');
      expect(proc.is_running).toBe(false);
      expect(proc.exit_code).toBe(-9);
      expect(proc.exitCode).toBeNull();
      const info = manager.list_processes().find((p) => p.process_id === 'stubborn')!;
      expect(info).toMatchObject({ is_running: false, exit_code: -9, exitCode: null });
    });

    it('a process that honours SIGTERM ends by it: exit_code -15', async () => {
      const proc = manager.spawn('sleep', ['60'], { process_id: 'polite' });
      await proc.spawned;
      expect(await manager.kill('polite', 5)).toBe(true);
      expect((await proc.result).signal).toBe('SIGTERM');
      expect(proc.exit_code).toBe(-15);
      expect(manager.get_process('polite')!.to_info().exit_code).toBe(-15);
      expect(gone(proc.pid!) || !pidAlive(proc.pid!)).toBe(true);
    });

    it('resolves false for an unknown id; true (as pai) for a known finished one', async () => {
      expect(await manager.kill('no-such-process')).toBe(false);
      expect(await manager.kill('no-such-process', 1)).toBe(false);
      const proc = manager.spawn('sh', ['-c', 'exit 3'], { process_id: 'done' });
      await proc.result;
      expect(await manager.kill('done')).toBe(true);
      // A finished process keeps its own exit code.
      expect(proc.exit_code).toBe(3);
      expect((await proc.result).killed).toBe(false);
    });

    it('kill(id) without a timeout keeps working (the grace the process was spawned with)', async () => {
      const proc = manager.spawn('sleep', ['60'], { killGraceMs: 200 });
      await proc.spawned;
      expect(await manager.kill(proc.id)).toBe(true);
      expect(proc.is_running).toBe(false);
    });

    it('refuses a bad timeout naming the field', async () => {
      for (const timeout of [-1, Number.NaN, Number.POSITIVE_INFINITY, '5' as never]) {
        await expect(manager.kill('x', timeout)).rejects.toBeInstanceOf(InvalidProcessArgumentError);
        await expect(manager.kill('x', timeout)).rejects.toThrow(
          /^kill\(\) 'timeout': expected a number of seconds/,
        );
      }
      await expect(manager.kill_all(-1)).rejects.toThrow(/^kill_all\(\) 'timeout': expected/);
    });
  });

  describe('kill_all(timeout)', () => {
    it('ends every process, a SIGTERM-ignoring tree included, after `timeout` s', async () => {
      const a = await startStubborn(manager, { process_id: 'a' });
      const b = manager.spawn('sleep', ['60'], { process_id: 'b' });
      await b.spawned;
      const done = manager.spawn('true', [], { process_id: 'c' });
      await done.result;
      await manager.kill_all(0.3);
      expect(manager.list_processes().filter((p) => p.is_running)).toEqual([]);
      expect(a.proc.exit_code).toBe(-9);
      expect(b.exit_code).toBe(-15);
      expect(done.exit_code).toBe(0);
      for (const pid of [a.child, a.shell, b.pid!]) expect(pidAlive(pid)).toBe(false);
      await waitFor(() => [a.child, a.shell, b.pid!].every(gone), { what: 'ESRCH for every killed pid' });
      expect(survivors(manager.cookiePrefix)).toEqual([]);
    });

    it('killAll() (camelCase) and killAll(timeout) are the same call', async () => {
      const a = await startStubborn(manager);
      await manager.killAll(0.2);
      expect(a.proc.exit_code).toBe(-9);
      const b = manager.spawn('sleep', ['60']);
      await b.spawned;
      await manager.killAll();
      expect(b.exit_code).toBe(-15);
    });
  });

  describe('ProcessInfo', () => {
    it("has pai's field names (and core's), started_at a Date", async () => {
      const before = Date.now();
      const proc = manager.spawn('sleep', ['60'], { process_id: 'info' });
      await proc.spawned;
      const info = manager.list_processes()[0]!;
      expect(Object.keys(info).sort()).toEqual(
        [
          'process_id',
          'command',
          'args',
          'pid',
          'started_at',
          'is_running',
          'exit_code',
          'id',
          'startedAt',
          'isRunning',
          'exitCode',
        ].sort(),
      );
      expect(info).toMatchObject({
        process_id: 'info',
        id: 'info',
        command: 'sleep 60',
        args: ['60'],
        pid: proc.pid,
        is_running: true,
        isRunning: true,
        exit_code: null,
        exitCode: null,
      });
      expect(info.started_at).toBeInstanceOf(Date);
      expect(info.started_at.getTime()).toBe(info.startedAt);
      expect(info.started_at.getTime()).toBeGreaterThanOrEqual(before);
      expect(proc.started_at).toBeInstanceOf(Date);
      expect(proc.to_info()).toEqual(info);
      expect(await manager.kill('info', 5)).toBe(true);
      expect(manager.list_processes()[0]).toMatchObject({ is_running: false, exit_code: -15 });
      expect(manager.get_process('nope')).toBeUndefined();
    });

    it('a normal exit reports its status in exit_code and exitCode alike', async () => {
      const proc = manager.spawn('sh', ['-c', 'exit 7']);
      await proc.result;
      expect(proc.to_info()).toMatchObject({ exit_code: 7, exitCode: 7, is_running: false });
    });
  });
});
