// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Where a field of `/proc/<pid>/stat` sits in what `procStatFields` returns: proc(5)'s field n is
 * at [n - 3], counted after the command name.
 */
export const PROC_STAT = {
  /** R, S, D, T (stopped), t (tracing stop), Z (zombie), X (dead), ... */
  state: 0,
  ppid: 1,
  pgrp: 2,
  session: 3,
  ttyNr: 4,
  /** The foreground process group of the process's controlling terminal. */
  tpgid: 5,
  /** The kernel's PF_* flags. */
  flags: 6,
  /** CPU time in clock ticks: the process's own user and system time, then its waited-for children's. */
  utime: 11,
  stime: 12,
  cutime: 13,
  cstime: 14,
  numThreads: 17,
  /** Clock ticks after boot at which the process started. */
  starttime: 19,
  /** Where the program's code starts and ends and its stack starts (new with each exec: ASLR). */
  startcode: 23,
  endcode: 24,
  startstack: 25,
  /** How a zombie ended, as waitpid says (Linux 3.5+; 0 for a reader without ptrace read access). */
  exitCode: 49,
} as const;

/**
 * The fields of `/proc/<pid>/stat` (with `tid`, of `/proc/<pid>/task/<tid>/stat`) after the command
 * name, split on spaces (index with `PROC_STAT`), or undefined when the process is gone or /proc cannot
 * be read (not Linux). The command name is skipped up to the last `)`: it may hold spaces and
 * parentheses of its own.
 */
export function procStatFields(pid: number | 'self', tid?: number | string): string[] | undefined {
  let text: string;
  try {
    text = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** Every pid in /proc but this process's (empty off Linux and where /proc cannot be read). */
export function procPids(): number[] {
  if (process.platform !== 'linux') return [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const name of entries) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const pid = Number(name);
    if (pid !== process.pid) out.push(pid);
  }
  return out;
}
