/**
 * The sandboxed supervisor's side of the sandbox's process limit (issue 34, item 5): the kernel
 * stops a fork loop at the limit (pids.max, RLIMIT_NPROC of the sandbox's user namespace, or its
 * pid namespace's pid_max), but a fork loop does not end there — its processes keep failing and
 * forking again, holding every task the sandbox has, so nothing else in it (a concurrent command, a
 * terminal) can start a process. This watch notices the sandbox at its limit and SIGKILLs the
 * process group that holds the most tasks, after telling the host which command that was (`limit`
 * message; the command's result says PROCESS_LIMIT).
 *
 * How it notices, while anything runs in the sandbox (every WATCH_MS):
 *
 * - with cgroup v2, `pids.events`' `max` count: the kernel's own count of forks refused at
 *   pids.max (exact);
 * - otherwise the number of processes in the sandbox's pid namespace (a readdir of its /proc), and
 *   when that is a quarter of the limit or more, their threads too (`/proc/<pid>/stat`): at the
 *   limit less a margin, the limit is reached. A process that reaches the limit with threads alone
 *   while few processes run is not seen here; its pthread_create fails with EAGAIN.
 */
// eslint-disable-next-line no-restricted-imports -- reads /proc and cgroup files only (the kernel's, not a file the agent wrote)
import { readdirSync, readFileSync } from 'node:fs';
import { procStatFields, PROC_STAT } from './proc-stat.js';

/** How often the sandbox is looked at while something runs in it. */
const WATCH_MS = 250;

/** The pids.events of this process's cgroup v2 (`0::/path` in /proc/self/cgroup), if it has one. */
export function ownPidsEvents(): string | undefined {
  try {
    const line = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    return line ? `/sys/fs/cgroup${line.slice(3)}/pids.events` : undefined;
  } catch {
    return undefined;
  }
}

export interface LimitHitReport {
  /** The process group killed (its leader's pid inside the sandbox). */
  pgid: number;
  /** Tasks (processes and threads) the sandbox held when the limit was found reached. */
  tasks: number;
  /** Tasks of the group killed. */
  groupTasks: number;
  /** The env cookie of a process of the group (CONCH_PROC_COOKIE), when readable. */
  cookie?: string;
}

export interface Task {
  pid: number;
  pgrp: number;
  threads: number;
}

function stat(pid: number): Task | undefined {
  const fields = procStatFields(pid);
  if (!fields) return undefined; // gone
  return { pid, pgrp: Number(fields[PROC_STAT.pgrp]), threads: Number(fields[PROC_STAT.numThreads]) || 1 };
}

function pids(): number[] {
  const out: number[] = [];
  try {
    for (const name of readdirSync('/proc')) {
      const c = name.charCodeAt(0);
      if (c >= 48 && c <= 57) out.push(Number(name));
    }
  } catch {
    // no /proc: nothing to watch
  }
  return out;
}

/** Tasks (processes and threads) these processes hold. */
function threadsOf(tasks: readonly Task[]): number {
  return tasks.reduce((n, t) => n + t.threads, 0);
}

function cookieOf(pid: number, variable: string): string | undefined {
  try {
    const env = readFileSync(`/proc/${pid}/environ`, 'latin1');
    const at = env.indexOf(`${variable}=`);
    if (at < 0 || (at > 0 && env[at - 1] !== '\0')) return undefined;
    const end = env.indexOf('\0', at);
    return env.slice(at + variable.length + 1, end < 0 ? undefined : end);
  } catch {
    return undefined;
  }
}

/** How the watch sees and stops processes: this sandbox's /proc and kill(2), or a test's. */
export interface WatchSystem {
  pids(): number[];
  stat(pid: number): Task | undefined;
  killGroup(pgid: number): void;
}

const realSystem: WatchSystem = {
  pids,
  stat,
  killGroup(pgid) {
    // SIGKILL to a process group reaches the processes it is forking too (the kernel hands a
    // group signal to a child forked meanwhile); a few rounds catch members that changed group.
    for (let round = 0; round < 5; round++) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        break; // the group is gone
      }
    }
  },
};

export class ProcessLimitWatch {
  private readonly system: WatchSystem;
  private readonly limit: number;
  private readonly margin: number;
  private readonly pidsEvents: string | undefined;
  private readonly cookieVar: string;
  private readonly onHit: (report: LimitHitReport) => void;
  private readonly busy: () => boolean;
  private timer: NodeJS.Timeout | undefined;
  private refusedForks = 0;
  /** Processes the sandbox holds of its own (bwrap's init, the guard, this supervisor). */
  private readonly baseline: number;
  private readonly own: Set<number>;

  constructor(options: {
    limit: number;
    /** The cgroup's pids.events (cgroup v2), else undefined: counted from /proc. */
    pidsEvents?: string | undefined;
    cookieVar: string;
    onHit(report: LimitHitReport): void;
    /** Whether commands (or their leftovers) may be running. */
    busy(): boolean;
    /** Tests: a /proc and kill of their own. */
    system?: WatchSystem;
  }) {
    this.system = options.system ?? realSystem;
    this.limit = options.limit;
    this.margin = Math.max(8, Math.floor(options.limit / 32));
    this.pidsEvents = options.pidsEvents;
    this.cookieVar = options.cookieVar;
    this.onHit = options.onHit;
    this.busy = options.busy;
    this.refusedForks = this.pidsEvents ? this.readRefused() : 0;
    // Never killed: the groups of the sandbox's init, its guard and this supervisor.
    this.own = new Set(
      [1, process.pid, process.ppid]
        .map((pid) => this.system.stat(pid)?.pgrp)
        .filter((g): g is number => !!g),
    );
    this.baseline = this.system.pids().length;
  }

  /** Something was started: watch until the sandbox is back to its own processes. */
  wake(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), WATCH_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private readRefused(): number {
    try {
      const m = /(?:^|\n)max (\d+)/.exec(readFileSync(this.pidsEvents!, 'latin1'));
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  }

  /**
   * One look: at the limit, the biggest group is killed — if the sandbox is still full when its
   * processes are read. The listing that says "at the limit" comes first; a fork loop stopped
   * meanwhile (its leader's exit, leaderExited) is gone by the time its processes are read, and
   * the biggest group left would be an innocent command of one process.
   */
  tick(): void {
    const all = this.system.pids();
    if (!this.busy() && all.length <= this.baseline) {
      this.stop();
      return;
    }
    const tasks = this.readOnce(all);
    if (this.reached(all, tasks) && this.full(tasks())) this.killBiggest(tasks());
  }

  /**
   * Whether these processes (read now, not the listing before them) hold the sandbox at its limit
   * less the margin, in tasks (every process counts at least its one thread).
   */
  private full(tasks: readonly Task[]): boolean {
    return threadsOf(tasks) >= this.limit - this.margin;
  }

  /** The tasks of these pids (those still there), read at the first call and kept. */
  private readOnce(all: readonly number[]): () => Task[] {
    let read: Task[] | undefined;
    return () => (read ??= all.map((pid) => this.system.stat(pid)).filter((t): t is Task => t !== undefined));
  }

  /**
   * Whether the sandbox is at its limit: with cgroup v2, pids.events' count of refused forks went
   * up since the last look; else its processes are at the limit less the margin, or, from a
   * quarter of the limit, their threads are (`tasks` reads them, only then).
   */
  private reached(all: readonly number[], tasks: () => Task[]): boolean {
    if (this.pidsEvents) {
      const refused = this.readRefused();
      const more = refused > this.refusedForks;
      this.refusedForks = refused;
      return more;
    }
    if (all.length >= this.limit - this.margin) return true;
    return all.length * 4 >= this.limit && this.full(tasks());
  }

  /**
   * A command's leader exited while its process group lives on (a shell whose fork at the limit
   * failed once too often, leaving the loop's children). When the sandbox is at its limit then,
   * that group is what holds it: it is killed and reported as the command's, for which the host
   * is still waiting (the leader's exit follows this). Undefined when the sandbox is not at its
   * limit (a daemon left running is not a fork loop) or the group is one of the sandbox's own.
   */
  leaderExited(pgid: number): LimitHitReport | undefined {
    if (pgid <= 1 || this.own.has(pgid)) return undefined;
    const all = this.system.pids();
    const tasks = this.readOnce(all);
    if (!this.reached(all, tasks) || !this.full(tasks())) return undefined;
    const groupTasks = threadsOf(tasks().filter((t) => t.pgrp === pgid));
    if (groupTasks === 0) return undefined;
    this.system.killGroup(pgid);
    return { pgid, tasks: threadsOf(tasks()), groupTasks };
  }

  private killBiggest(tasks: Task[]): void {
    const groups = new Map<number, number>();
    for (const t of tasks)
      if (!this.own.has(t.pgrp)) groups.set(t.pgrp, (groups.get(t.pgrp) ?? 0) + t.threads);
    let pgid = 0;
    let most = 0;
    for (const [group, n] of groups) {
      if (n > most) {
        most = n;
        pgid = group;
      }
    }
    if (pgid <= 1) return;
    const member = tasks.find((t) => t.pgrp === pgid)!.pid;
    const cookie = cookieOf(member, this.cookieVar);
    this.onHit({
      pgid,
      tasks: threadsOf(tasks),
      groupTasks: most,
      ...(cookie ? { cookie } : {}),
    });
    this.system.killGroup(pgid);
  }
}
