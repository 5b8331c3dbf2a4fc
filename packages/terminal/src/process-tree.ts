import { setTimeout as sleep } from 'node:timers/promises';
import { COOKIE_VAR, findCookiePids, procTable, sweepCookie } from '@conch/process';

/**
 * Process-tree helpers for PTY sessions (Linux /proc). A PTY shell is a session leader whose jobs
 * run in their own process groups, so a group kill is not enough: the tree is found by parent
 * links and by the env cookie every process started from the shell inherits (which also finds
 * `setsid`/`nohup` escapees).
 */

/** Tagged with @conch/process's cookie variable, so its sweeps (and ours) find escapees. */
export { COOKIE_VAR };

/** Live (non-zombie) pids of `root`'s tree plus every process carrying the cookie. */
export function sessionPids(root: number, cookie: string): number[] {
  const procs = procTable().filter((p) => p.state !== 'Z' && p.state !== 'X');
  const children = new Map<number, number[]>();
  for (const p of procs) {
    const list = children.get(p.ppid);
    if (list) list.push(p.pid);
    else children.set(p.ppid, [p.pid]);
  }
  const found = new Set<number>();
  const live = new Set(procs.map((p) => p.pid));
  if (live.has(root)) found.add(root);
  const stack = [root];
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      if (!found.has(child)) {
        found.add(child);
        stack.push(child);
      }
    }
  }
  for (const pid of findCookiePids({ cookie })) if (live.has(pid)) found.add(pid);
  return [...found];
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

/**
 * Ends a PTY session's whole tree: SIGHUP to the shell (an interactive shell ignores SIGTERM),
 * SIGTERM + SIGCONT to everything else, then SIGKILL to whatever is left after `graceMs`.
 * Resolves when nothing of the tree is alive (or after a further second of SIGKILL rounds).
 */
export async function killSessionTree(shellPid: number, cookie: string, graceMs: number): Promise<void> {
  const first = sessionPids(shellPid, cookie);
  for (const pid of first) {
    if (pid === shellPid) {
      signal(pid, 'SIGHUP');
    } else {
      signal(pid, 'SIGTERM');
      signal(pid, 'SIGCONT');
    }
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (sessionPids(shellPid, cookie).length === 0) return;
    await sleep(20);
  }
  const killDeadline = Date.now() + 1000;
  do {
    for (const pid of sessionPids(shellPid, cookie)) signal(pid, 'SIGKILL');
    sweepCookie(cookie);
    await sleep(20);
  } while (Date.now() < killDeadline && sessionPids(shellPid, cookie).length > 0);
}

/** SIGKILLs a session's tree at once, synchronously (for process exit). */
export function killSessionTreeSync(shellPid: number, cookie: string): void {
  for (let round = 0; round < 3; round++) {
    const pids = sessionPids(shellPid, cookie);
    if (pids.length === 0) return;
    for (const pid of pids) signal(pid, 'SIGKILL');
    sweepCookie(cookie);
  }
}
