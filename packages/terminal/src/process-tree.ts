// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  COOKIE_VAR,
  findCookiePids,
  killTree,
  killTreeSync,
  procEnviron,
  procStatFields,
  PROC_STAT,
  sigkillAllSync,
  sweepCookie,
  sweepCookieUntilGone,
} from '@conch/process';
import { ProcSnapshot } from './shell-progress.js';

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
  await sweepCookieUntilGone(cookie);
}

/** SIGKILLs a session's tree at once, synchronously (for process exit). */
export function killSessionTreeSync(shellPid: number, cookie: string): void {
  killTreeSync(shellPid, cookie);
  sweepCookie(cookie);
}

/** How long `cancelSessionTree` waits, at most, for SIGKILLed processes to be gone. */
const CANCEL_CONFIRM_MS = 100;

/**
 * Ends a session's tree for a cancel (an aborted call, `kill: true`): SIGKILL to the shell and
 * every process of its tree and cookie at once, no SIGTERM grace (the user cancelled the command:
 * nothing is asked to clean up), then waits, synchronously and at most CANCEL_CONFIRM_MS, until
 * every process signalled is gone (dead or a zombie), so a caller that learns of the cancel finds
 * no process of it running. Synchronous so it can run inside the abort event itself, before the
 * aborted call is answered. Returns the pids signalled that are still alive (normally none).
 */
export function cancelSessionTree(shellPid: number, cookie: string): number[] {
  return sigkillAllSync((execing) => scanSession(shellPid, cookie, execing), CANCEL_CONFIRM_MS);
}

/**
 * Live pids of a session in one pass over /proc: the shell's tree by parent links, and every
 * process carrying its cookie (escapees: setsid, nohup, reparented orphans).
 */
function scanSession(shellPid: number, cookie: string, execing: number[]): number[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const needle = Buffer.from(`${COOKIE_VAR}=${cookie}\0`);
  const children = new Map<number, number[]>();
  const found = new Set<number>();
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    const fields = procStatFields(pid);
    if (!fields) continue;
    const state = fields[PROC_STAT.state];
    if (state === 'Z' || state === 'X') continue;
    const ppid = Number(fields[PROC_STAT.ppid]);
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
    if (pid === shellPid) continue;
    const env = procEnviron(pid);
    if (env === 'execing') execing.push(pid);
    else if (env) {
      // Each entry ends in a NUL, the last one included; the variable must start an entry.
      const at = env.indexOf(needle);
      if (at === 0 || (at > 0 && env[at - 1] === 0)) found.add(pid);
    }
  }
  const tree = [shellPid];
  for (let i = 0; i < tree.length; i++) for (const child of children.get(tree[i]!) ?? []) tree.push(child);
  for (const pid of tree) found.add(pid);
  return [...found].filter(live);
}

function live(pid: number): boolean {
  const state = procStatFields(pid)?.[PROC_STAT.state];
  return state !== undefined && state !== 'Z' && state !== 'X';
}

/**
 * Ends what a session left behind after its shell exited on its own (`nohup x & exit`, a job still
 * running): every process carrying the cookie gets SIGTERM + SIGCONT, then SIGKILL after `graceMs`.
 * The shell's pid is not used: it is gone, and may already belong to another process.
 */
export async function sweepSessionCookie(cookie: string, graceMs: number): Promise<void> {
  const left = () => findCookiePids({ cookie }).filter(live);
  // `nohup x & exit`: the escapee may still be inside its exec (environ reads empty) when the
  // shell is gone; look again until no process is mid-exec (at most 50 looks, 2 ms apart).
  let first: number[] = [];
  for (let look = 0; look < 50; look++) {
    const execing: number[] = [];
    first = findCookiePids({ cookie }, { execing }).filter(live);
    if (first.length > 0 || execing.length === 0) break;
    await sleep(2);
  }
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
  const deadline = performance.now() + graceMs;
  while (performance.now() < deadline) {
    if (left().length === 0) break;
    await sleep(20);
  }
  // SIGKILL to what is left, and to a process caught mid-exec once its exec is done.
  await sweepCookieUntilGone(cookie);
}

/** Pids (not this process) whose environment carries one of `cookies`, by cookie; one /proc scan. */
function cookiePids(cookies: ReadonlySet<string>): Map<string, number[]> {
  const found = new Map<string, number[]>();
  if (cookies.size === 0) return found;
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return found;
  }
  const needle = Buffer.from(`${COOKIE_VAR}=`);
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    let env: Buffer;
    try {
      env = readFileSync(`/proc/${pid}/environ`);
    } catch {
      continue;
    }
    let at = env.indexOf(needle);
    while (at > 0 && env[at - 1] !== 0) at = env.indexOf(needle, at + 1);
    if (at < 0) continue;
    const start = at + needle.length;
    const end = env.indexOf(0, start);
    const cookie = env.toString('latin1', start, end < 0 ? env.length : end);
    if (!cookies.has(cookie)) continue;
    const list = found.get(cookie);
    if (list) list.push(pid);
    else found.set(cookie, [pid]);
  }
  return found;
}

/** Every live pid of the sessions' trees (by parent links) and of their cookies, shells marked. */
function sessionTargets(sessions: readonly { pid: number; cookie: string }[]): {
  shells: Set<number>;
  others: Set<number>;
} {
  const snapshot = ProcSnapshot.take();
  const shells = new Set<number>();
  const others = new Set<number>();
  for (const { pid } of sessions) {
    const tree = snapshot ? snapshot.tree(pid) : [pid];
    for (const member of tree) (member === pid ? shells : others).add(member);
  }
  for (const pids of cookiePids(new Set(sessions.map((s) => s.cookie))).values()) {
    for (const pid of pids) if (!shells.has(pid)) others.add(pid);
  }
  return { shells, others };
}

/**
 * Ends many sessions' trees at once (a pool's dispose): one look at /proc for all of them, SIGHUP
 * to the shells and SIGTERM + SIGCONT to the rest together, one shared wait of at most `graceMs`
 * polling only the pids signalled, SIGKILL to what is left, then cookie sweeps of all the sessions
 * in one scan until none is found (processes forked meanwhile). Killing them one by one, each with
 * its own grace and its own /proc scans every few milliseconds, took half a minute for 50 sessions.
 */
export async function killSessionTrees(
  sessions: readonly { pid: number; cookie: string }[],
  graceMs: number,
): Promise<void> {
  if (sessions.length === 0) return;
  const { shells, others } = sessionTargets(sessions);
  for (const pid of shells) signal(pid, 'SIGHUP');
  for (const pid of others) {
    signal(pid, 'SIGTERM');
    signal(pid, 'SIGCONT');
  }
  let left = [...shells, ...others].filter(live);
  const deadline = performance.now() + graceMs;
  while (left.length > 0 && performance.now() < deadline) {
    await sleep(25);
    left = left.filter(live);
  }
  for (const pid of left) signal(pid, 'SIGKILL');
  // Whatever the trees forked meanwhile, or escaped into (setsid, nohup): found by cookie.
  for (let round = 0; round < 5; round++) {
    const { shells: s, others: o } = sessionTargets(sessions);
    const rest = [...s, ...o].filter(live);
    if (rest.length === 0) return;
    for (const pid of rest) signal(pid, 'SIGKILL');
    await sleep(10);
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}
