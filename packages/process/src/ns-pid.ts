import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Host pids of processes that live in a sandbox's own pid namespace.
 *
 * A sandboxed supervisor sees its children by their pids inside the namespace; the host kills,
 * sweeps and inspects (/proc, terminal foreground detection) by host pids. The kernel gives each
 * process one pid per namespace level, listed in `/proc/<pid>/status` as `NSpid: <host> … <inner>`.
 * Node has no pidfd or SO_PEERCRED, and this kernel family may lack `/proc/<pid>/task/<tid>/children`,
 * so the host finds a child by scanning: a process forked a moment ago has one of the newest host
 * pids, so the scan walks down from `ns_last_pid` (the last pid the kernel handed out) through a
 * bounded window, then falls back to every pid in /proc. A hit must be in the sandbox's namespace
 * (`/proc/<pid>/ns/pid`), so equal inner pids of different sandboxes never mix.
 */

/** How far below ns_last_pid the fast scan looks before reading all of /proc. */
const WINDOW = 512;

let pidMax: number | undefined;

function readNumber(path: string): number | undefined {
  try {
    const n = Number(readFileSync(path, 'latin1').trim());
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

interface StatusIds {
  /** Pids from the outermost namespace (the host's, as this process sees it) inwards. */
  nspid: number[];
  ppid: number;
  tgid: number;
}

function statusIds(pid: number): StatusIds | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return undefined;
  }
  const field = (name: string) => {
    const at = text.indexOf(`\n${name}:`);
    if (at < 0) return undefined;
    const end = text.indexOf('\n', at + 1);
    return text.slice(at + name.length + 2, end < 0 ? undefined : end).trim();
  };
  const nspid = field('NSpid');
  if (nspid === undefined) return undefined;
  return {
    nspid: nspid.split(/\s+/).map(Number),
    ppid: Number(field('PPid')),
    tgid: Number(field('Tgid')),
  };
}

/** The pid namespace of a host pid (`pid:[4026531836]`), or undefined when it is gone or unreadable. */
export function pidNamespaceOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Which process to accept: one in a known namespace, or (for the supervisor itself) a descendant of a host pid. */
export type NamespaceMatch = { namespace: string } | { descendantOf: number };

function accepts(pid: number, ids: StatusIds, match: NamespaceMatch): boolean {
  if ('namespace' in match) return pidNamespaceOf(pid) === match.namespace;
  // bwrap's monitor -> the namespace's init (bwrap) -> the supervisor: a few levels at most.
  let parent = ids.ppid;
  for (let depth = 0; depth < 4 && parent > 1; depth++) {
    if (parent === match.descendantOf) return true;
    parent = statusIds(parent)?.ppid ?? 0;
  }
  return false;
}

function candidate(pid: number, innerPid: number, match: NamespaceMatch): boolean {
  const ids = statusIds(pid);
  if (!ids || ids.tgid !== pid || ids.nspid.length < 2 || ids.nspid[0] !== pid) return false;
  if (ids.nspid[ids.nspid.length - 1] !== innerPid) return false;
  return accepts(pid, ids, match);
}

/**
 * The host pid of the process whose pid in its (sandbox) namespace is `innerPid`, or undefined when
 * it is gone (a command that exits at once may be reaped before the host looks) or not readable.
 * Synchronous: a handful of small /proc reads in the common case.
 */
export function hostPidOf(innerPid: number, match: NamespaceMatch): number | undefined {
  const last = readNumber('/proc/sys/kernel/ns_last_pid');
  if (last !== undefined) {
    pidMax ??= readNumber('/proc/sys/kernel/pid_max') ?? 4_194_304;
    for (let i = 0; i < WINDOW; i++) {
      let pid = last - i;
      if (pid < 2) pid += pidMax;
      if (candidate(pid, innerPid, match)) return pid;
    }
  }
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const pid = Number(name);
    if (candidate(pid, innerPid, match)) return pid;
  }
  return undefined;
}
