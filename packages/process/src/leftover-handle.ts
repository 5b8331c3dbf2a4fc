import { setTimeout as sleep } from 'node:timers/promises';
import { carriesCookie, findCookiePids, pidAlive, procEntry, sweepCookie } from './kill-tree.js';
import type { ManagedProcess } from './managed-process.js';

/**
 * The processes a finished command left running (same env cookie), taken over by a caller — e.g.
 * as a background task. Shaped like core's BackgroundRun, so wiring one to the other is direct.
 */
export interface LeftoverHandle {
  /** Their env cookie. */
  readonly cookie: string;
  /** Pids still alive (as of the last check, at most `pollMs` old). */
  pids(): number[];
  /** Resolves when no process with the cookie is alive (and the output pipes closed). Never rejects. */
  readonly done: Promise<void>;
  /** SIGTERM to each (and their process group), SIGKILL after the grace time, then a cookie sweep. */
  kill(): Promise<void>;
  /** Bytes at `offset` of the command's output — everything it and the leftovers wrote. */
  readOutput(offset: number, limit: number): Promise<Uint8Array>;
  outputBytes(): number;
  /** The file holding the full output, once there is one. */
  outputFile(): string | undefined;
  /** The last non-empty output line so far. */
  lastLine(): string | undefined;
}

const alive = (pids: Iterable<number>) => [...pids].filter((pid) => pidAlive(pid));

/**
 * Watches the leftovers cheaply: every `pollMs` it checks only the pids it knows (one kill(0) and
 * one /proc/<pid>/stat read each); when they are all gone, one full cookie scan confirms (a
 * leftover may have forked), and the watch ends. Nothing runs once `done` resolved.
 */
export class ProcessLeftovers implements LeftoverHandle {
  readonly cookie: string;
  readonly done: Promise<void>;
  private readonly proc: ManagedProcess;
  private readonly pollMs: number;
  private readonly graceMs: number;
  private known: number[];
  private finished = false;
  private wake: (() => void) | undefined;

  constructor(proc: ManagedProcess, options: { pollMs?: number; graceMs: number }) {
    this.proc = proc;
    this.cookie = proc.cookie;
    this.pollMs = options.pollMs ?? 250;
    this.graceMs = options.graceMs;
    this.known = alive(findCookiePids({ cookie: this.cookie }));
    this.done = this.watch();
  }

  pids(): number[] {
    return this.finished ? [] : [...this.known];
  }

  async kill(): Promise<void> {
    if (this.finished) return;
    const pids = alive(findCookiePids({ cookie: this.cookie }));
    const groups = new Set<number>();
    for (const pid of pids) {
      const entry = procEntry(pid);
      // Only groups one of our processes is in: a group id is never reused while it has members.
      if (entry) groups.add(entry.pgrp);
      signal(pid, 'SIGTERM');
      signal(pid, 'SIGCONT');
    }
    for (const pgrp of groups) signal(-pgrp, 'SIGTERM');
    const deadline = performance.now() + this.graceMs;
    while (performance.now() < deadline && alive(findCookiePids({ cookie: this.cookie })).length > 0) {
      await sleep(25);
    }
    for (const pgrp of groups) signal(-pgrp, 'SIGKILL');
    sweepCookie(this.cookie);
    this.wake?.();
    await this.done;
  }

  readOutput(offset: number, limit: number): Promise<Uint8Array> {
    const sink = this.sink();
    return sink ? sink.read(offset, limit) : Promise.resolve(new Uint8Array(0));
  }

  outputBytes(): number {
    return this.sink()?.totalBytes ?? 0;
  }

  outputFile(): string | undefined {
    return this.sink()?.path;
  }

  lastLine(): string | undefined {
    return this.proc.lastLine();
  }

  private sink() {
    return this.proc.combined ?? this.proc.stdout.sink;
  }

  private async watch(): Promise<void> {
    for (;;) {
      // A known pid that no longer carries the cookie has left the command (an `env -i setsid`
      // escapee that still had it when the command ended): like any process outside the cookie it
      // is not ours to wait for (waiting would hold the call as long as it runs) nor to kill.
      this.known = alive(this.known).filter((pid) => carriesCookie(pid, this.cookie) !== false);
      if (this.known.length === 0) {
        this.known = alive(findCookiePids({ cookie: this.cookie }));
        if (this.known.length === 0) break;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.pollMs);
        // The pipes (if kept open) hold the host's event loop, not this poll.
        timer.unref();
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
    // Every writer is gone, so the pipes reach end-of-file now; bounded in case a process outside
    // the cookie (one that cleared its environment) still holds them.
    const closed = this.proc.lingeringClosed();
    const timer = setTimeout(() => this.proc.closeLingering(), 1000);
    await closed;
    clearTimeout(timer);
    this.finished = true;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}
