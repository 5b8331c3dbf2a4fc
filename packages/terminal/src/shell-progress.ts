import { readdirSync } from 'node:fs';
import { procStatFields, PROC_STAT } from '@conch/process';

/**
 * Whether a shell is getting anywhere: the watchdogs of a session's start-up (its rc files) and of
 * a typed command's begin marker judge a shell by its progress, never by a fixed few seconds of
 * wall time, so a slow machine (or a slow rc file: nvm, pyenv, conda, oh-my-zsh, a lock several
 * shells queue on) is told apart from a stuck shell.
 *
 * A shell progresses when, between two looks, its process tree (the shell and its descendants)
 * used CPU time, gained or lost a process, or the session received output — or when a process of
 * the tree (or the PTY's owner, which relays typed input) is runnable or in disk wait at the look:
 * it wants the CPU or the disk, so the machine is slow, not the shell stuck. Linux reads /proc;
 * elsewhere only output counts.
 */

const IS_LINUX = process.platform === 'linux';

interface ProcStat {
  ppid: number;
  /** R, S, D, Z, T, ... */
  state: string;
  /** utime + stime + cutime + cstime, in clock ticks. */
  cpu: number;
}

/** One look at every process (Linux /proc), shared by all the shells judged in one tick. */
export class ProcSnapshot {
  private readonly stats = new Map<number, ProcStat>();
  private readonly children = new Map<number, number[]>();

  private constructor() {}

  /** The processes now, or undefined where there is no /proc. */
  static take(): ProcSnapshot | undefined {
    if (!IS_LINUX) return undefined;
    let names: string[];
    try {
      names = readdirSync('/proc');
    } catch {
      return undefined;
    }
    const snapshot = new ProcSnapshot();
    for (const name of names) {
      const c = name.charCodeAt(0);
      if (c < 48 || c > 57) continue;
      const pid = Number(name);
      const stat = readStat(pid);
      if (!stat) continue;
      snapshot.stats.set(pid, stat);
      const list = snapshot.children.get(stat.ppid);
      if (list) list.push(pid);
      else snapshot.children.set(stat.ppid, [pid]);
    }
    return snapshot;
  }

  /** The tree of `root` (root first), live processes only. */
  tree(root: number): number[] {
    if (!this.stats.has(root)) return [];
    const out = [root];
    for (let i = 0; i < out.length; i++) {
      for (const child of this.children.get(out[i]!) ?? []) out.push(child);
    }
    return out;
  }

  stat(pid: number): ProcStat | undefined {
    return this.stats.get(pid);
  }
}

function readStat(pid: number): ProcStat | undefined {
  const fields = procStatFields(pid);
  if (!fields) return undefined;
  const state = fields[PROC_STAT.state] ?? '?';
  if (state === 'Z' || state === 'X') return undefined;
  return {
    state,
    ppid: Number(fields[PROC_STAT.ppid]),
    cpu:
      Number(fields[PROC_STAT.utime]) +
      Number(fields[PROC_STAT.stime]) +
      Number(fields[PROC_STAT.cutime]) +
      Number(fields[PROC_STAT.cstime]),
  };
}

/** What one look saw of a shell. */
export interface ShellLook {
  /** Changes whenever the shell made progress of its own (CPU time, processes, output). */
  signature: string;
  /** A process of its tree, or the PTY's owner, waits for the CPU or the disk right now. */
  busy: boolean;
  /** The shell process is gone. */
  gone: boolean;
}

/** Looks at a shell: its tree in `snapshot` (when there is one) and the output it produced so far. */
export function lookAt(snapshot: ProcSnapshot | undefined, shellPid: number, outputChars: number): ShellLook {
  if (!snapshot) return { signature: `o${outputChars}`, busy: false, gone: false };
  const tree = snapshot.tree(shellPid);
  if (tree.length === 0) return { signature: `o${outputChars}`, busy: false, gone: true };
  let cpu = 0;
  let busy = false;
  for (const pid of tree) {
    const stat = snapshot.stat(pid)!;
    cpu += stat.cpu;
    if (stat.state === 'R' || stat.state === 'D') busy = true;
  }
  // The PTY's owner (node-pty's host: this process or the supervisor) relays typed input.
  const owner = snapshot.stat(snapshot.stat(shellPid)!.ppid);
  if (owner && owner.state === 'R' && snapshot.stat(shellPid)!.ppid !== process.pid) busy = true;
  // Sorted pids: a process that came and went between looks still changes the cpu sum or the set.
  const pids =
    tree.length > 1
      ? tree
          .slice(1)
          .sort((a, b) => a - b)
          .join(',')
      : '';
  return { signature: `o${outputChars};c${cpu};p${pids}`, busy, gone: false };
}

/**
 * Stall time of one shell, accumulated over looks that saw no progress. Each look adds the time
 * since the previous one, but at most `maxStepMs`: when this process itself was starved (a busy
 * machine delays its timers, and the shell's output waits unread in the PTY), the time it did not
 * look is not counted against the shell.
 */
export class StallClock {
  private signature: string | undefined;
  private lastLook: number;
  /** Milliseconds without progress, as counted. */
  stalledMs = 0;

  constructor(
    private readonly maxStepMs: number,
    now = performance.now(),
  ) {
    this.lastLook = now;
  }

  /** Records a look; returns whether the shell progressed since the previous one. */
  observe(look: ShellLook, now = performance.now()): boolean {
    const step = Math.min(Math.max(0, now - this.lastLook), this.maxStepMs);
    this.lastLook = now;
    const progressed = look.busy || look.signature !== this.signature;
    this.signature = look.signature;
    if (progressed) this.stalledMs = 0;
    else this.stalledMs += step;
    return progressed;
  }

  /** Progress seen elsewhere that counts for this shell too (a sibling shell of the same start-up queue). */
  reset(): void {
    this.stalledMs = 0;
  }
}
