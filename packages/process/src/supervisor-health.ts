// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readdirSync, readFileSync } from 'node:fs';
import { procStatFields, PROC_STAT } from './proc-stat.js';
import { treePids } from './process-tree.js';

/** A process's scheduler state and CPU time, from /proc/<pid>/stat. */
export interface ProcSample {
  /** R running/runnable, S sleeping, D disk wait, T stopped, t traced, Z zombie, … */
  state: string;
  /** utime + stime, in clock ticks. */
  cpuTicks: number;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux this runs on). */
const TICKS_PER_SECOND = 100;

/** The process's sample, or with `tid` one of its threads' (`/proc/<pid>/task/<tid>/stat`). */
export function sampleProc(pid: number, tid?: string): ProcSample | undefined {
  const fields = procStatFields(pid, tid);
  if (!fields) return undefined;
  return {
    state: fields[PROC_STAT.state]!,
    cpuTicks: Number(fields[PROC_STAT.utime]) + Number(fields[PROC_STAT.stime]),
  };
}

/** SIGSTOP's bit in /proc's pending-signal masks (signal n is bit n-1). */
const SIGSTOP_BIT = 1n << 18n;

/**
 * Whether the process is stopped (`T`, or `t` under a tracer) or about to be, with no window once
 * a kill(SIGSTOP) has returned: the signal waits in the pending mask until one of its threads is
 * scheduled (on a busy machine, a while); the thread that takes it stops itself at that moment
 * (under the signal lock), and the others follow when they next run. So the mask is read first,
 * then every thread's state: a signal gone from the mask has left a stopped thread behind. (A
 * thread in a tracer's stop, `t`, is a debugger's passing stop, not counted: the main thread's `t`
 * is, as before.) Some 15 file reads for node's threads: for a PTY's start, not every command.
 */
export function stoppedOrStopping(pid: number): boolean {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return false;
  }
  const field = (name: string) => new RegExp(`^${name}:\\s*(\\S+)`, 'm').exec(status)?.[1];
  const stopped = (state: string | undefined) => state === 'T' || state === 't';
  if (stopped(field('State'))) return true;
  for (const mask of [field('ShdPnd'), field('SigPnd')]) {
    if (mask && /^[0-9a-f]+$/i.test(mask) && (BigInt(`0x${mask}`) & SIGSTOP_BIT) !== 0n) return true;
  }
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tids.some((tid) => sampleProc(pid, tid)?.state === 'T');
}

export interface SupervisorHealthOptions {
  /** Stalled milliseconds after which the supervisor is declared unresponsive. */
  unresponsiveMs: number;
  /** How often the check runs while the supervisor has work. Default 500 ms. */
  tickMs?: number;
  /** 'starting' (no pings yet: it boots), 'ready' (answers pings), anything else: not watched. */
  phase(): 'starting' | 'ready' | 'other';
  /** The supervisor's own (node) host pid, once ready. */
  pid(): number | undefined;
  /** The process started for it (bwrap's monitor when sandboxed): its tree is watched while starting. */
  rootPid(): number | undefined;
  /** Sends a ping with this id; the supervisor answers `pong` with it. */
  ping(id: number): void;
  /** Whether a call is past its limit while waiting for this supervisor (see ManagedProcess). */
  overdue(): boolean;
  /** Called once when the supervisor is judged unresponsive, with why. */
  onUnresponsive(reason: string): void;
}

/**
 * Tells a supervisor that does not answer from one that is slow, by the work it does, not by the
 * clock alone. While the supervisor has work (a spawn, a file operation, a running child or PTY)
 * the host pings it every tick; a ping unanswered at the next tick (after the host has read its
 * messages in between) makes the tick *stalled* only when the supervisor could have answered and
 * did not:
 *
 * - stopped (SIGSTOP, `T`) or asleep (`S`: its event loop waits, yet the ping is not read) —
 *   stalled;
 * - runnable but not getting a CPU (`R` on a busy machine) or in disk wait (`D`) — not stalled:
 *   it is slow, not dead;
 * - running and burning CPU without answering (a busy loop) — unresponsive once it has used
 *   `unresponsiveMs` of CPU time since the ping.
 *
 * While it starts (no pings yet: node and bwrap boot) only a stopped process in its tree counts.
 * A tick counts at most `tickMs`, however long the host itself was blocked. The supervisor is
 * unresponsive after `unresponsiveMs` of stalled ticks, or at once (after two stalled ticks in a
 * row) when a call waiting for it is past its time limit.
 */
export class SupervisorHealth {
  private readonly options: SupervisorHealthOptions;
  private readonly tickMs: number;
  private timer: NodeJS.Timeout | undefined;
  private lastTick = 0;
  private nextPing = 0;
  /** The ping waiting for its pong, with the supervisor's CPU time when it was sent. */
  private outstanding: { id: number; cpuTicks: number | undefined } | undefined;
  private stalledMs = 0;
  private stallTicks = 0;
  private lastState = '';
  private fired = false;

  constructor(options: SupervisorHealthOptions) {
    this.options = options;
    this.tickMs = options.tickMs ?? 500;
  }

  /** Watches while the supervisor has work (idempotent). */
  start(): void {
    if (this.timer || this.fired) return;
    this.lastTick = performance.now();
    this.timer = setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
  }

  /** Stops watching (no work left, or the supervisor is gone); progress so far is forgotten. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.outstanding = undefined;
    this.reset();
  }

  /** A message came from the supervisor: its event loop runs. */
  heard(pongId?: number): void {
    if (pongId !== undefined && this.outstanding?.id === pongId) this.outstanding = undefined;
    this.reset();
  }

  /**
   * Whether the supervisor has left a ping unanswered for a whole tick while it could have answered
   * (stopped, or asleep with the ping unread): not judged yet, but not answering now.
   */
  get unanswered(): boolean {
    return this.stallTicks > 0;
  }

  /** A call's limit passed while it waits for the supervisor: judge now if the evidence is there. */
  callOverdue(): void {
    if (this.stallTicks >= 2) this.fire(this.why());
  }

  private reset(): void {
    this.stalledMs = 0;
    this.stallTicks = 0;
  }

  private tick(): void {
    const now = performance.now();
    const elapsed = Math.min(now - this.lastTick, this.tickMs);
    this.lastTick = now;
    const phase = this.options.phase();
    if (phase === 'starting') {
      const root = this.options.rootPid();
      const stopped =
        root !== undefined &&
        treePids(root).some((pid) => {
          const state = sampleProc(pid)?.state;
          return state === 'T' || state === 't';
        });
      this.count(stopped ? 'T' : undefined, elapsed);
    } else if (phase === 'ready') {
      const pid = this.options.pid();
      if (pid === undefined) return;
      if (!this.outstanding) {
        const id = ++this.nextPing;
        this.outstanding = { id, cpuTicks: sampleProc(pid)?.cpuTicks };
        this.options.ping(id);
        return;
      }
      const sample = sampleProc(pid);
      if (!sample) return; // gone: its exit is reported by the client
      const spentMs =
        this.outstanding.cpuTicks === undefined
          ? 0
          : ((sample.cpuTicks - this.outstanding.cpuTicks) * 1000) / TICKS_PER_SECOND;
      if (spentMs >= this.options.unresponsiveMs) {
        this.fire(`it used ${Math.round(spentMs / 1000)} s of CPU without answering a ping (a busy loop)`);
        return;
      }
      const state = sample.state;
      this.count(state === 'T' || state === 't' || state === 'S' ? state : undefined, elapsed);
    } else {
      return;
    }
    if (this.stalledMs >= this.options.unresponsiveMs || (this.stallTicks >= 2 && this.options.overdue())) {
      this.fire(this.why());
    }
  }

  private count(stalledState: string | undefined, elapsed: number): void {
    if (stalledState === undefined) {
      // Slow (no CPU, disk wait) or booting: not evidence either way; a run of stalls is broken.
      this.stallTicks = 0;
      return;
    }
    this.lastState = stalledState;
    this.stalledMs += elapsed;
    this.stallTicks++;
  }

  private why(): string {
    const what =
      this.lastState === 'T' || this.lastState === 't'
        ? 'it is stopped (SIGSTOP)'
        : 'it is idle but does not read its channel';
    return `it did not answer for ${(this.stalledMs / 1000).toFixed(1)} s of health checks: ${what}`;
  }

  private fire(reason: string): void {
    if (this.fired) return;
    this.fired = true;
    this.stop();
    this.options.onUnresponsive(reason);
  }
}
