// /proc helpers for the per-call suite's cancel rows: find the processes running a command by a
// unique argument, and tell when they are gone (a zombie counts as gone: it runs nothing).
import { readdirSync, readFileSync } from 'node:fs';

/** Pids of the processes whose command line contains `marker` (one of their arguments, whole). */
export function pidsWith(marker) {
  const pids = [];
  const needle = `${marker}\0`;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline;
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'latin1');
    } catch {
      continue;
    }
    if (cmdline.includes(needle) && alive(Number(entry))) pids.push(Number(entry));
  }
  return pids;
}

/** Whether `pid` still runs: it exists and is neither a zombie nor dead. */
export function alive(pid) {
  let stat;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** Kills what is left of a failed trial, so the bench leaves nothing running. */
export function killAll(pids) {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

/** Resolves with the pids running `marker` once there are some; throws after `timeoutMs`. */
export async function waitForPids(marker, timeoutMs, settled) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const pids = pidsWith(marker);
    if (pids.length > 0) return pids;
    if (settled()) throw new Error(`the call returned before \`${marker}\` ran: ${settled()}`);
    if (performance.now() > deadline) throw new Error(`\`${marker}\` did not start within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Resolves with performance.now() when none of `pids` (nor a new process with `marker`) runs. */
export async function whenGone(pids, marker, timeoutMs) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    // The known pids every millisecond; a /proc scan (a child that started late) once they are gone.
    if (!pids.some(alive)) {
      const at = performance.now();
      const late = pidsWith(marker);
      if (late.length === 0) return at;
      pids = late;
    }
    if (performance.now() > deadline) {
      killAll([...pids, ...pidsWith(marker)]);
      throw new Error(`\`${marker}\` still ran ${timeoutMs} ms after the cancel`);
    }
    await tick();
  }
}
