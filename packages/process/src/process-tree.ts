import { findCookiePids, procTable } from './kill-tree.js';

/**
 * Process trees by parent links (Linux /proc). A PTY shell is a session leader whose jobs run in
 * process groups of their own, so a group kill does not reach them: the tree is found by ppid
 * and by the env cookie (which also finds `setsid`/`nohup` escapees that were reparented).
 */

/** Live (non-zombie) pids of `root`'s tree (root included while alive) plus every process with the cookie. */
export function treePids(root: number, cookie?: string): number[] {
  const procs = procTable().filter((p) => p.state !== 'Z' && p.state !== 'X');
  const children = new Map<number, number[]>();
  for (const p of procs) {
    const list = children.get(p.ppid);
    if (list) list.push(p.pid);
    else children.set(p.ppid, [p.pid]);
  }
  const live = new Set(procs.map((p) => p.pid));
  const found = new Set<number>();
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
  if (cookie !== undefined) for (const pid of findCookiePids({ cookie })) if (live.has(pid)) found.add(pid);
  return [...found];
}

/** SIGKILLs a tree (and the cookie's escapees) at once, synchronously; a few rounds catch forks. */
export function killTreeSync(root: number, cookie?: string): void {
  for (let round = 0; round < 3; round++) {
    const pids = treePids(root, cookie);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
}

/**
 * Ends a PTY's whole tree: SIGHUP to the shell (an interactive shell ignores SIGTERM), SIGTERM +
 * SIGCONT to everything else, then SIGKILL to whatever is left after `graceMs` (and a cookie sweep).
 */
export async function killTree(root: number, cookie: string | undefined, graceMs: number): Promise<void> {
  for (const pid of treePids(root, cookie)) {
    if (pid === root) {
      signal(pid, 'SIGHUP');
    } else {
      signal(pid, 'SIGTERM');
      signal(pid, 'SIGCONT');
    }
  }
  const deadline = performance.now() + graceMs;
  while (performance.now() < deadline) {
    if (treePids(root, cookie).length === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  killTreeSync(root, cookie);
}
