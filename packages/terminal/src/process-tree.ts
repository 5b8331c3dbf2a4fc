import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { COOKIE_VAR, findCookiePids, killTree, killTreeSync, sweepCookie } from '@conch/process';

/**
 * Process-tree helpers for PTY sessions (Linux /proc), over @conch/process's tree walk: a PTY
 * shell is a session leader whose jobs run in their own process groups, so a group kill is not
 * enough; the tree is found by parent links and by the env cookie every process started from the
 * shell inherits (which also finds `setsid`/`nohup` escapees).
 */

/** Tagged with @conch/process's cookie variable, so its sweeps (and ours) find escapees. */
export { COOKIE_VAR, sweepCookie };

/**
 * Ends a PTY session's whole tree: SIGHUP to the shell (an interactive shell ignores SIGTERM),
 * SIGTERM + SIGCONT to everything else, then SIGKILL to whatever is left after `graceMs`, and a
 * cookie sweep.
 */
export async function killSessionTree(shellPid: number, cookie: string, graceMs: number): Promise<void> {
  await killTree(shellPid, cookie, graceMs);
  sweepCookie(cookie);
}

/** SIGKILLs a session's tree at once, synchronously (for process exit). */
export function killSessionTreeSync(shellPid: number, cookie: string): void {
  killTreeSync(shellPid, cookie);
  sweepCookie(cookie);
}

function live(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Ends what a session left behind after its shell exited on its own (`nohup x & exit`, a job still
 * running): every process carrying the cookie gets SIGTERM + SIGCONT, then SIGKILL after `graceMs`.
 * The shell's pid is not used: it is gone, and may already belong to another process.
 */
export async function sweepSessionCookie(cookie: string, graceMs: number): Promise<void> {
  const left = () => findCookiePids({ cookie }).filter(live);
  const first = left();
  if (first.length === 0) return;
  for (const pid of first) {
    for (const sig of ['SIGTERM', 'SIGCONT'] as const) {
      try {
        process.kill(pid, sig);
      } catch {
        // gone already
      }
    }
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (left().length === 0) return;
    await sleep(20);
  }
  const killDeadline = Date.now() + 1000;
  do {
    sweepCookie(cookie);
    await sleep(20);
  } while (Date.now() < killDeadline && left().length > 0);
}
