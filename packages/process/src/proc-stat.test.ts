// Invariant: procStatFields reads the fields of /proc/<pid>/stat after the command name wherever the name holds spaces and parentheses, for a process and for one of its threads, and says undefined once the process is gone; procPids lists live processes but this one.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { procPids, procStatFields, PROC_STAT } from './proc-stat.js';

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** `sleep` run under a file name of its own, which becomes its command name (comm). */
function sleepNamed(name: string): ChildProcess {
  const dir = mkdtempSync(join(tmpdir(), 'conch-proc-stat-'));
  dirs.push(dir);
  const file = join(dir, name);
  copyFileSync('/bin/sleep', file);
  chmodSync(file, 0o755);
  const child = spawn(file, ['60'], { stdio: 'ignore', detached: true });
  children.push(child);
  return child;
}

describe.skipIf(process.platform !== 'linux')('procStatFields', () => {
  for (const name of ['a) b (c', ') S 1 2 3 )', 'plain', 'x y z']) {
    it(`finds the fields after a command name like ${JSON.stringify(name)}`, async () => {
      const child = sleepNamed(name);
      const pid = child.pid!;
      await waitFor(() => procStatFields(pid)?.[PROC_STAT.state] === 'S', { timeoutMs: 30_000 });
      const fields = procStatFields(pid)!;
      expect(Number(fields[PROC_STAT.ppid])).toBe(process.pid);
      // detached: the child leads a new session and process group of its own.
      expect(Number(fields[PROC_STAT.pgrp])).toBe(pid);
      expect(Number(fields[PROC_STAT.session])).toBe(pid);
      expect(Number(fields[PROC_STAT.numThreads])).toBe(1);
      expect(Number(fields[PROC_STAT.starttime])).toBeGreaterThan(0);
      child.kill('SIGKILL');
      // Reaped by node, the pid is gone (a zombie for a moment before).
      await waitFor(() => procStatFields(pid) === undefined, { timeoutMs: 30_000 });
    });
  }

  it("reads one thread's fields with its tid", () => {
    const tids = readdirSync(`/proc/${process.pid}/task`);
    expect(tids.length).toBeGreaterThan(1); // node's own worker threads
    for (const tid of tids) {
      const fields = procStatFields(process.pid, tid);
      if (!fields) continue; // a thread that ended meanwhile
      expect(Number(fields[PROC_STAT.pgrp])).toBe(Number(procStatFields('self')![PROC_STAT.pgrp]));
      expect(Number(fields[PROC_STAT.numThreads])).toBeGreaterThan(1);
    }
    expect(procStatFields(process.pid, 'not-a-thread')).toBeUndefined();
  });

  it('lists live processes but this one', () => {
    const child = sleepNamed('listed');
    const pids = procPids();
    expect(pids).toContain(child.pid);
    expect(pids).toContain(1);
    expect(pids).not.toContain(process.pid);
  });
});
