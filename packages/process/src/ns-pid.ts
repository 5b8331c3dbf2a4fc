// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { openSync, readdirSync, readFileSync, readlinkSync, readSync } from 'node:fs';

/**
 * Host pids of processes that live in a sandbox's own pid namespace.
 *
 * A sandboxed supervisor sees its children by their pids inside the namespace; the host kills,
 * sweeps and inspects (/proc, terminal foreground detection) by host pids. The kernel gives each
 * process one pid per namespace level, listed in `/proc/<pid>/status` as `NSpid: <host> … <inner>`.
 * Where the posix_spawn addon runs on both sides the supervisor sends each child's pidfd and the host
 * reads the child's host pid from it (supervisor-client.ts `pidfdHostPid`); this module is what is
 * left without one (node's spawn, no pidfd_open, a full fd channel, the supervisor itself). Node has
 * no pidfd or SO_PEERCRED of its own, and this kernel family may lack
 * `/proc/<pid>/task/<tid>/children`, so the host finds a child by its pid number: the kernel hands
 * out a namespace's pids in order (cyclically), so a child the supervisor forked after the host
 * sent the request has a host pid above `ns_last_pid` as read before the send (`lastPid()`) and at
 * most `ns_last_pid` as read when the reply arrives. The host reads that bracket — usually one or a
 * few pids, and a pid that is gone costs one failed readlink — and a miss there means the child has
 * ended already (a `true` is reaped before its reply is read), never a scan of /proc. Without a
 * bracket (the supervisor itself; `ns_last_pid` unreadable; more than WINDOW pids handed out
 * meanwhile) the scan walks down from `ns_last_pid` through a bounded window, then falls back to
 * every pid in /proc. A hit must be in the sandbox's namespace (`/proc/<pid>/ns/pid`), so equal
 * inner pids of different sandboxes never mix.
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

let lastPidFd: number | null | undefined;
const lastPidBuffer = Buffer.alloc(32);

/**
 * The last pid the kernel handed out in this process's pid namespace (`ns_last_pid`), or undefined
 * when it cannot be read. The file stays open (a positional read at 0 re-reads it): one syscall.
 */
export function lastPid(): number | undefined {
  if (lastPidFd === null) return undefined;
  try {
    lastPidFd ??= openSync('/proc/sys/kernel/ns_last_pid', 'r');
    const n = Number(
      lastPidBuffer.toString('latin1', 0, readSync(lastPidFd, lastPidBuffer, 0, 32, 0)).trim(),
    );
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    lastPidFd = null;
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
  // The namespace first: one readlink, failing at once for a pid nobody holds (most of a bracket).
  if ('namespace' in match && pidNamespaceOf(pid) !== match.namespace) return false;
  const ids = statusIds(pid);
  if (!ids || ids.tgid !== pid || ids.nspid.length < 2 || ids.nspid[0] !== pid) return false;
  if (ids.nspid[ids.nspid.length - 1] !== innerPid) return false;
  return 'namespace' in match || accepts(pid, ids, match);
}

/**
 * The host pid of the process whose pid in its (sandbox) namespace is `innerPid`, or undefined when
 * it is gone (a command that exits at once may be reaped before the host looks) or not readable.
 * `since`: `lastPid()` read before the request that forked it was sent; then only the pids handed
 * out since are looked at (a miss there: it is gone). Synchronous: a handful of small /proc reads.
 */
export function hostPidOf(innerPid: number, match: NamespaceMatch, since?: number): number | undefined {
  const last = lastPid();
  if (last !== undefined) pidMax ??= readNumber('/proc/sys/kernel/pid_max') ?? 4_194_304;
  if (since !== undefined && last !== undefined && pidMax !== undefined) {
    // Pids wrap from pid_max - 1 back to the bottom (300; counting from 1 only widens the bracket).
    const span = last >= since ? last - since : pidMax - 1 - since + last;
    if (span <= WINDOW) {
      let pid = since;
      for (let i = 0; i < span; i++) {
        pid = pid + 1 >= pidMax ? 1 : pid + 1;
        if (candidate(pid, innerPid, match)) return pid;
      }
      return undefined;
    }
  }
  if (last !== undefined) {
    for (let i = 0; i < WINDOW; i++) {
      let pid = last - i;
      if (pid < 2) pid += pidMax!;
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
