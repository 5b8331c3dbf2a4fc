// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostAddon } from './native-spawn.js';
import { procPids, procStatFields, PROC_STAT } from './proc-stat.js';

/** The environment variable every managed process (and all it starts) carries. */
export const COOKIE_VAR = 'CONCH_PROC_COOKIE';

const IS_LINUX = process.platform === 'linux';

function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EPERM') return true;
    return false; // ESRCH: no such group
  }
}

/** One process as /proc/<pid>/stat describes it. */
export interface ProcEntry {
  pid: number;
  ppid: number;
  pgrp: number;
  /** R, S, D, Z (zombie), X (dead), ... */
  state: string;
  /** The kernel's PF_* flags (field 9 of stat). */
  flags: number;
}

/** A pid's /proc/<pid>/stat entry, or undefined when it is gone (or not on Linux). */
export function procEntry(pid: number): ProcEntry | undefined {
  const fields = procStatFields(pid);
  if (!fields) return undefined;
  return {
    pid,
    state: fields[PROC_STAT.state]!,
    ppid: Number(fields[PROC_STAT.ppid]),
    pgrp: Number(fields[PROC_STAT.pgrp]),
    flags: Number(fields[PROC_STAT.flags]),
  };
}

/** The values of a `/proc/<pid>/status` line (`Uid:`, `Gid:`, `CapEff:`, ...), or undefined. */
function statusLine(status: string, key: string): string[] | undefined {
  const at = status.indexOf(`\n${key}:`);
  if (at < 0) return undefined;
  const end = status.indexOf('\n', at + 1);
  return status
    .slice(at + key.length + 2, end < 0 ? undefined : end)
    .trim()
    .split(/\s+/);
}

/** CAP_SYS_PTRACE's bit in the capability masks of /proc/<pid>/status. */
const CAP_SYS_PTRACE = 1n << 19n;

/**
 * Whether the kernel shows this process a zombie's exit code (do_task_stat prints 0 instead to a
 * reader without ptrace read access, PTRACE_MODE_READ_FSCREDS). For a task without memory, which a
 * zombie is, that access is the reader's fsuid being the task's real, effective and saved uid and
 * its fsgid the task's three gids, with the task's permitted capabilities among the reader's
 * effective ones (commoncap), or the reader holding CAP_SYS_PTRACE; both are read from the
 * world-readable status files. (Listing /proc/<pid>/fd does not tell it: a task without memory has
 * its per-process files owned by root, so that listing works for root alone.) A security module
 * that refuses more (an AppArmor or SELinux ptrace rule) is not seen here.
 */
function mayReadExitCode(pid: number): boolean {
  let own: string;
  let theirs: string;
  try {
    own = readFileSync('/proc/self/status', 'latin1');
    theirs = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return false;
  }
  const mask = (status: string, key: string): bigint | undefined => {
    const hex = statusLine(status, key)?.[0];
    return hex && /^[0-9a-f]+$/i.test(hex) ? BigInt(`0x${hex}`) : undefined;
  };
  const ownEffective = mask(own, 'CapEff');
  if (ownEffective === undefined) return false;
  if (ownEffective & CAP_SYS_PTRACE) return true;
  const [ownUid, ownGid] = [statusLine(own, 'Uid')?.[3], statusLine(own, 'Gid')?.[3]]; // fsuid, fsgid
  const uids = statusLine(theirs, 'Uid')?.slice(0, 3);
  const gids = statusLine(theirs, 'Gid')?.slice(0, 3);
  const permitted = mask(theirs, 'CapPrm');
  if (!ownUid || !ownGid || uids?.length !== 3 || gids?.length !== 3 || permitted === undefined) return false;
  return (
    uids.every((id) => id === ownUid) &&
    gids.every((id) => id === ownGid) &&
    (permitted & ~ownEffective) === 0n
  );
}

/**
 * How a process that has ended and not been reaped yet (a zombie: its parent has not called wait)
 * ended, as waitpid would say: field 52 of /proc/<pid>/stat (Linux 3.5+). Undefined while it runs,
 * once it is gone, or when this process may not read it (the kernel prints 0 there then, so that
 * access is checked first: `mayReadExitCode`). A zombie keeps its pid until it is reaped, so the
 * answer is about that process.
 */
export function zombieExit(pid: number): { code: number | null; signal: number | null } | undefined {
  if (!mayReadExitCode(pid)) return undefined;
  const fields = procStatFields(pid);
  if (!fields || fields[PROC_STAT.state] !== 'Z' || fields.length <= PROC_STAT.exitCode) return undefined;
  const status = Number(fields[PROC_STAT.exitCode]);
  if (!Number.isInteger(status) || status < 0) return undefined;
  const signal = status & 0x7f;
  // WIFEXITED: the low 7 bits are 0 and the code is bits 8-15; else killed by signal (core bit 0x80).
  return signal === 0 ? { code: (status >> 8) & 0xff, signal: null } : { code: null, signal };
}

/** Every process but this one (Linux /proc; empty elsewhere). */
export function procTable(): ProcEntry[] {
  const out: ProcEntry[] = [];
  for (const pid of procPids()) {
    const entry = procEntry(pid);
    if (entry) out.push(entry);
  }
  return out;
}

/** `[state, pgrp]` of a pid, or undefined when gone. */
function procStat(pid: number): [string, number] | undefined {
  const entry = procEntry(pid);
  return entry && [entry.state, entry.pgrp];
}

/**
 * Whether a process group still has a member that is not a zombie. (A zombie keeps `kill(-pgid, 0)`
 * succeeding until its parent reaps it; in containers whose init never reaps, that is forever.)
 */
export function groupAlive(pgid: number): boolean {
  if (!signalGroup(pgid, 0)) return false;
  if (!IS_LINUX) return true;
  for (const pid of procPids()) {
    const stat = procStat(pid);
    if (stat && stat[1] === pgid && stat[0] !== 'Z' && stat[0] !== 'X') return true;
  }
  return false;
}

/** Whether a pid is alive and not a zombie. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (!IS_LINUX) return true;
  const stat = procStat(pid);
  return stat !== undefined && stat[0] !== 'Z' && stat[0] !== 'X';
}

export interface KillTreeOptions {
  /** Time between SIGTERM and SIGKILL. Default 2000 ms. */
  graceMs?: number;
  /** Poll interval while waiting. Default 25 ms. */
  pollMs?: number;
  /** How long SIGKILL is repeated while a member is still alive. Default 30 s. */
  killWaitMs?: number;
}

/**
 * Kills the process group led by `pid` (a child spawned with `detached: true`): SIGTERM to the
 * group, SIGKILL after `graceMs` if any member is still alive. Resolves when no live member is
 * left: a SIGKILLed process is certain to die, but on a loaded machine its exit (tearing down a
 * large memory, say) can take well over a second, so SIGKILL is repeated until then, at most
 * `killWaitMs` (for a member blocked in uninterruptible I/O). Returns whether anything was signalled.
 */
export async function killProcessTree(pid: number, options: KillTreeOptions = {}): Promise<boolean> {
  const graceMs = options.graceMs ?? 2000;
  const pollMs = options.pollMs ?? 25;
  if (!signalGroup(pid, 'SIGTERM')) {
    // Not a group leader (or already gone): signal the pid alone.
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return false;
    }
  }
  // A stopped process never handles SIGTERM; wake it so it can.
  signalGroup(pid, 'SIGCONT');
  const deadline = performance.now() + graceMs;
  // Looks again after 1 ms, then doubling up to pollMs: most trees die at SIGTERM within a few ms,
  // and a cancel answers only once they are gone (ManagedProcess.finish waits for this).
  for (let wait = 1; performance.now() < deadline; wait = Math.min(wait * 2, pollMs)) {
    await sleep(wait);
    if (!groupAlive(pid) && !pidAlive(pid)) return true;
  }
  const killDeadline = performance.now() + (options.killWaitMs ?? 30_000);
  do {
    signalGroup(pid, 'SIGKILL');
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
    await sleep(pollMs);
  } while (performance.now() < killDeadline && (groupAlive(pid) || pidAlive(pid)));
  return true;
}

/**
 * Whether a process group has any member, zombies included (one `kill(-pgid, 0)`: cheap, no /proc
 * scan). False means certainly empty; true may still be zombies only (see groupAlive).
 */
export function groupExists(pgid: number): boolean {
  // The addon's answer where it loaded: process.kill throws for the usual one (ESRCH, gone), and
  // building that error costs more than the system call (the supervisor asks at every exit).
  const alive = pgid > 1 ? hostAddon()?.groupAlive : undefined;
  return alive ? alive(pgid) : signalGroup(pgid, 0);
}

/** A process's command line from /proc/<pid>/cmdline (arguments joined by spaces), or undefined. */
export function processCommand(pid: number, maxChars = 200): string | undefined {
  let raw: Buffer;
  try {
    raw = readFileSync(`/proc/${pid}/cmdline`);
  } catch {
    return undefined;
  }
  const text = raw.toString('utf8').replace(/\0+$/, '').split('\0').join(' ');
  return text.length > maxChars ? text.slice(0, maxChars) : text;
}

/** SIGKILLs a group at once, synchronously (for `process.on('exit')`). */
export function killGroupSync(pid: number): void {
  if (!signalGroup(pid, 'SIGKILL')) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/**
 * Pids whose environment carries the cookie: `{ cookie }` matches `CONCH_PROC_COOKIE=<cookie>`
 * exactly, `{ prefix }` matches every cookie starting with it. Linux only (reads /proc/<pid>/environ;
 * processes of other users are unreadable and skipped). A process that re-execs with a cleared
 * environment is not found; its process group is killed separately. `execing`: see findEnvPids.
 */
export function findCookiePids(
  match: { cookie: string } | { prefix: string },
  options: { execing?: number[] } = {},
): number[] {
  return 'cookie' in match
    ? findEnvPids(COOKIE_VAR, match.cookie, options)
    : findEnvPids(COOKIE_VAR, match.prefix, { ...options, prefix: true });
}

/**
 * Pids (not this process) whose environment has `name=value` as an entry — or, with `prefix`, an
 * entry `name=` followed by `value` and anything. Linux only (reads /proc/<pid>/environ).
 *
 * A process in the middle of `execve` cannot be matched: from the moment the kernel gives it its new
 * memory until it has laid out the new image's stack, its environ (and its command line) read empty.
 * On a busy machine that lasts long enough for a sweep to pass it by (an escapee's `setsid sleep`
 * caught between `setsid` and `sleep`, seen in this package's tests). With `execing`, the scan
 * collects such processes there (empty environ and command line, not a zombie, not a kernel thread)
 * so a caller that must not miss one can look again once their exec is done.
 */
export function findEnvPids(
  name: string,
  value: string,
  options: { prefix?: boolean; execing?: number[] } = {},
): number[] {
  const needle = Buffer.from(options.prefix ? `${name}=${value}` : `${name}=${value}\0`);
  const out: number[] = [];
  for (const pid of procPids()) {
    const env = procEnviron(pid);
    if (env === undefined) continue;
    if (env === 'execing') {
      options.execing?.push(pid);
      continue;
    }
    if (hasEntry(env, needle)) out.push(pid);
  }
  return out;
}

/** Whether an environ block has `needle` (`NAME=value`...) at the start of one of its entries. */
function hasEntry(env: Buffer, needle: Buffer): boolean {
  // The variable must start an entry (start of the block or after a NUL).
  for (let at = env.indexOf(needle); at >= 0; at = env.indexOf(needle, at + 1)) {
    if (at === 0 || env[at - 1] === 0) return true;
  }
  return false;
}

/**
 * Whether `pid` still carries the process cookie `cookie`: false once it is gone or has replaced
 * its environment (an `env -i` exec), `'execing'` while its environ reads empty inside an exec.
 */
export function carriesCookie(pid: number, cookie: string): boolean | 'execing' {
  const env = procEnviron(pid);
  if (env === undefined) return false;
  if (env === 'execing') return 'execing';
  return hasEntry(env, Buffer.from(`${COOKIE_VAR}=${cookie}\0`));
}

function readEnviron(pid: number): Buffer | undefined {
  try {
    return readFileSync(`/proc/${pid}/environ`);
  } catch {
    return undefined;
  }
}

/** PF_KTHREAD in /proc/<pid>/stat's flags: a kernel thread, whose environ always reads empty. */
export const PF_KTHREAD = 0x00200000;

/**
 * A process's environment block; 'execing' for a user process between exec and its new stack;
 * undefined when it is gone or unreadable. An empty read is a kernel thread, a zombie, a process
 * with an empty environment, a process mid-exec, or a read whose opened memory an exec just
 * replaced (the read then finds it gone): the state and the command line tell which. The kernel
 * sets the command line and the environment of a new image together.
 */
export function procEnviron(pid: number): Buffer | 'execing' | undefined {
  let env = readEnviron(pid);
  if (env === undefined || env.length > 0) return env;
  const entry = procEntry(pid);
  if (!entry || entry.state === 'Z' || entry.state === 'X' || (entry.flags & PF_KTHREAD) !== 0)
    return undefined;
  try {
    // Twice: a process that execs again at once (a loop of execs) may be mid-exec once more.
    for (let attempt = 0; attempt < 2; attempt++) {
      if (readFileSync(`/proc/${pid}/cmdline`).length === 0) return 'execing';
      env = readEnviron(pid);
      if (env === undefined || env.length > 0) return env;
    }
    return env;
  } catch {
    return undefined;
  }
}

/**
 * sweepCookie, then waits (polling) until no process with the cookie is alive: a SIGKILLed process
 * on a busy machine stays in /proc, not yet a zombie, for a moment (its environ already reads empty
 * once its memory is being torn down, which can take a while for a large one). A process caught in
 * the middle of an exec (see findEnvPids) is looked at again once its exec is done, and killed if it
 * carries the cookie. Resolves whether they are all gone.
 *
 * The wait is bounded by work, not by the clock alone: past `timeoutMs` it goes on while every
 * process it still waits for is one it SIGKILLed (certain to die: it only wants CPU time on a
 * loaded machine, and a process sleeping when the signal came still reads S until it runs) or is
 * runnable (an exec finishing), and stops after `hardCapMs` whatever happens (a killed process
 * blocked in uninterruptible I/O may take that long or longer).
 */
export async function sweepCookieUntilGone(
  match: string | { cookie: string } | { prefix: string },
  timeoutMs = 1000,
  hardCapMs = 30_000,
): Promise<boolean> {
  const start = performance.now();
  const killed = new Set<number>();
  for (;;) {
    const execing: number[] = [];
    const round = sweep(match, execing);
    for (const pid of round.killed) killed.add(pid);
    // Killed earlier and not dead yet: its environ may read empty while it exits, and not as
    // 'execing' once its command line is gone too, so the scan alone cannot be trusted for it.
    // (Forgotten once dead, so a later process given the same pid is not waited for.)
    for (const pid of killed) if (!pidAlive(pid)) killed.delete(pid);
    const waiting = [...new Set([...execing, ...killed])].filter((pid) => pidAlive(pid));
    if (round.clear && waiting.length === 0) return true;
    const elapsed = performance.now() - start;
    const dying = waiting.every((pid) => killed.has(pid) || procEntry(pid)?.state === 'R');
    if (elapsed >= hardCapMs || (elapsed >= timeoutMs && !dying)) return false;
    await new Promise((resolve) => setTimeout(resolve, round.clear ? 2 : 10));
  }
}

/**
 * Kills (SIGKILL) every process carrying the cookie, including escapees that left the process
 * group (`setsid`, `nohup`, `disown`, double fork). Rescans until a scan finds none (at most 5
 * rounds) so processes forked during the sweep are caught. Returns the pids killed. Synchronous, so
 * it cannot wait for a process caught mid-exec: sweepCookieUntilGone does.
 */
export function sweepCookie(match: string | { cookie: string } | { prefix: string }): number[] {
  return sweep(match).killed;
}

/**
 * sweepCookie's rounds. `clear`: the last scan found no live carrier (false after 5 rounds that
 * each found one); `execing` receives the processes that last scan saw mid-exec.
 */
function sweep(
  match: string | { cookie: string } | { prefix: string },
  execing: number[] = [],
): { killed: number[]; clear: boolean } {
  const m = typeof match === 'string' ? { cookie: match } : match;
  const killed: number[] = [];
  for (let round = 0; round < 5; round++) {
    execing.length = 0;
    const pids = findCookiePids(m, { execing }).filter((pid) => {
      const stat = procStat(pid);
      return stat !== undefined && stat[0] !== 'Z';
    });
    if (pids.length === 0) return { killed, clear: true };
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
        killed.push(pid);
      } catch {
        // already gone
      }
    }
  }
  return { killed, clear: false };
}

/**
 * SIGKILLs at once every live pid `scan` finds, scans again for what they forked meanwhile (at
 * most 5 rounds), and waits, synchronously and at most `budgetMs` per round, until every process
 * signalled is gone (dead or a zombie). A scan that finds nothing while it saw a process mid-exec
 * (it fills `execing`; see findEnvPids) is repeated within `budgetMs`: that process may be one to
 * kill. For a cancel that must be complete before the cancelled call is answered (the terminal's
 * and a command template's). Returns the pids signalled that are still alive (normally none).
 */
export function sigkillAllSync(scan: (execing: number[]) => number[], budgetMs: number): number[] {
  const signalled = new Set<number>();
  let left: number[] = [];
  const execDeadline = performance.now() + budgetMs;
  for (let round = 0; round < 5;) {
    const execing: number[] = [];
    const fresh = scan(execing).filter((pid) => !signalled.has(pid) && pidAlive(pid));
    if (fresh.length === 0) {
      if (execing.length > 0 && performance.now() < execDeadline) continue;
      break;
    }
    round++;
    for (const pid of fresh) {
      try {
        process.kill(pid, 'SIGKILL');
        signalled.add(pid);
      } catch {
        // gone already
      }
    }
    left = [...signalled].filter(pidAlive);
    const deadline = performance.now() + budgetMs;
    // SIGKILL takes effect when the kernel next schedules the process: microseconds, rarely more.
    while (left.length > 0 && performance.now() < deadline) left = left.filter(pidAlive);
    if (left.length > 0) break;
  }
  return left;
}
