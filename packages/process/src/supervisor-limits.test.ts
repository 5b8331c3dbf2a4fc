// Invariant: the sandbox's process-limit watch stops only a group that holds the sandbox at its limit when its processes are read: never an innocent command left biggest after the fork loop is gone, never the sandbox's own processes.
import { describe, expect, it } from 'vitest';
import { ProcessLimitWatch, type Task, type WatchSystem } from './supervisor-limits.js';

const LIMIT = 128;

/** A sandbox's /proc in a test's hands: tasks by pid, a listing that may be older than the stats. */
function fakeSystem(tasks: Task[]) {
  const live = new Map(tasks.map((t) => [t.pid, t]));
  const killed: number[] = [];
  const system: WatchSystem = {
    pids: () => [...live.keys()],
    stat: (pid) => live.get(pid),
    killGroup: (pgid) => {
      killed.push(pgid);
      for (const [pid, t] of live) if (t.pgrp === pgid) live.delete(pid);
    },
  };
  return {
    system,
    killed,
    live,
    /** The next listing shows these pids, whatever is alive when they are read. */
    listOnce(pids: number[]) {
      const real = system.pids;
      system.pids = () => {
        system.pids = real;
        return pids;
      };
    },
  };
}

/** The sandbox's own: its init (pid 1), the guard and this supervisor (their groups are never stopped). */
const own = (): Task[] => [
  { pid: 1, pgrp: 1, threads: 1 },
  { pid: process.ppid, pgrp: process.ppid, threads: 1 },
  { pid: process.pid, pgrp: process.pid, threads: 11 },
];
const group = (pgid: number, n: number, from: number): Task[] =>
  Array.from({ length: n }, (_, i) => ({ pid: i === 0 ? pgid : from + i, pgrp: pgid, threads: 1 }));

function watch(system: WatchSystem) {
  const hits: { pgid: number; groupTasks: number }[] = [];
  const w = new ProcessLimitWatch({
    limit: LIMIT,
    cookieVar: 'CONCH_PROC_COOKIE',
    onHit: (r) => hits.push({ pgid: r.pgid, groupTasks: r.groupTasks }),
    busy: () => true,
    system,
  });
  return { w, hits };
}

describe('the process-limit watch', () => {
  it('stops the group that holds the sandbox at its limit, and only it', () => {
    for (const [bomb, besides] of [
      [120, [1, 2]],
      [90, [1, 30]],
      [124, []],
    ] as const) {
      const f = fakeSystem(own());
      const { w, hits } = watch(f.system);
      for (const t of group(5000, bomb, 20_000)) f.live.set(t.pid, t);
      besides.forEach((n, i) =>
        group(6000 + i * 100, n, 30_000 + i * 1000).forEach((t) => f.live.set(t.pid, t)),
      );
      w.tick();
      expect(f.killed).toEqual([5000]);
      expect(hits).toEqual([{ pgid: 5000, groupTasks: bomb }]);
      w.stop();
    }
  });

  it('stops nothing when the fork loop is gone by the time its processes are read', () => {
    // The listing says "at the limit"; the loop was stopped (its leader's exit) before the stats.
    for (const left of [[1], [1, 1], [3, 2, 1], [40]]) {
      const f = fakeSystem(own());
      const { w, hits } = watch(f.system);
      const bomb = group(5000, 125, 20_000);
      left.forEach((n, i) =>
        group(6000 + i * 100, n, 30_000 + i * 1000).forEach((t) => f.live.set(t.pid, t)),
      );
      f.listOnce([...f.live.keys(), ...bomb.map((t) => t.pid)]);
      w.tick();
      expect({ left, killed: f.killed, hits }).toEqual({ left, killed: [], hits: [] });
      w.stop();
    }
  });

  it("a leader's exit stops its group only while the sandbox is still full", () => {
    const f = fakeSystem(own());
    const { w } = watch(f.system);
    const beside = group(6000, 1, 30_000);
    for (const t of [...group(5000, 121, 20_000).slice(1), ...beside]) f.live.set(t.pid, t);
    expect(w.leaderExited(5000)).toMatchObject({ pgid: 5000, groupTasks: 120 });
    expect(f.killed).toEqual([5000]);
    // Gone before its leader's exit is handled (listed, not there when read): nothing is stopped.
    const g = fakeSystem(own());
    const second = watch(g.system);
    g.live.set(beside[0]!.pid, beside[0]!);
    g.listOnce([...g.live.keys(), ...group(5000, 121, 20_000).map((t) => t.pid)]);
    expect(second.w.leaderExited(6000)).toBeUndefined();
    expect(g.killed).toEqual([]);
    w.stop();
    second.w.stop();
  });

  it("never stops the sandbox's own groups, however many tasks they hold", () => {
    const f = fakeSystem([
      { pid: 1, pgrp: 1, threads: 1 },
      { pid: process.ppid, pgrp: process.ppid, threads: 1 },
      { pid: process.pid, pgrp: process.pid, threads: LIMIT },
    ]);
    const { w, hits } = watch(f.system);
    w.tick();
    expect(w.leaderExited(process.pid)).toBeUndefined();
    expect({ killed: f.killed, hits }).toEqual({ killed: [], hits: [] });
    w.stop();
  });
});
