// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename } from 'node:path';
import { procStatFields, PROC_STAT } from '@conch/process';

/**
 * What the kernel says about a PTY's foreground job (Linux /proc; elsewhere nothing is known):
 * which process group owns the terminal, which of its processes are blocked reading it, and
 * whether the program that will receive typed input is a shell that reads commands from it.
 */

// read(2) syscall numbers of the architectures node-pty ships prebuilt binaries for.
const READ_SYSCALL: Partial<Record<string, number>> = { x64: 0, arm64: 63 };
const IS_LINUX = process.platform === 'linux';

function commOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  } catch {
    return undefined;
  }
}

function argvOf(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (raw === '') return undefined;
    return raw.replace(/\0$/, '').split('\0');
  } catch {
    return undefined;
  }
}

function exeOf(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  } catch {
    return undefined;
  }
}

/** The terminal device of the shell (`/dev/pts/N`), or undefined when unknown. */
export function ttyOf(shellPid: number): string | undefined {
  try {
    const path = readlinkSync(`/proc/${shellPid}/fd/0`);
    return path.startsWith('/dev/') ? path : undefined;
  } catch {
    return undefined;
  }
}

export interface TtyReader {
  pid: number;
  /** The fd it reads the terminal through (a shell's line editor may use its own, e.g. zsh's). */
  fd: number;
}

export interface Foreground {
  /** The foreground process group (the PTY's tpgid). */
  pgid: number;
  /** Its live members. */
  members: number[];
  /** Members blocked in read(2) on the session's terminal. */
  readers: TtyReader[];
}

/** The PTY's foreground process group, or undefined when it cannot be read (not Linux, gone). */
export function foregroundOf(shellPid: number, tty: string | undefined): Foreground | undefined {
  if (!IS_LINUX) return undefined;
  const pgid = Number(procStatFields(shellPid)?.[PROC_STAT.tpgid]);
  if (!(pgid > 0)) return undefined;
  const readNr = READ_SYSCALL[process.arch];
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return undefined;
  }
  const members: number[] = [];
  const readers: TtyReader[] = [];
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const pid = Number(name);
    const fields = procStatFields(pid);
    if (!fields) continue;
    const state = fields[PROC_STAT.state];
    if (Number(fields[PROC_STAT.pgrp]) !== pgid || state === 'Z' || state === 'X') continue;
    members.push(pid);
    if (tty === undefined || readNr === undefined) continue;
    let syscall: string;
    try {
      syscall = readFileSync(`/proc/${pid}/syscall`, 'latin1');
    } catch {
      continue;
    }
    const [nr, fdHex] = syscall.trim().split(' ');
    if (Number(nr) !== readNr || fdHex === undefined) continue;
    const fd = parseInt(fdHex, 16);
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) === tty) readers.push({ pid, fd });
    } catch {
      // fd closed meanwhile
    }
  }
  return { pgid, members, readers };
}

/** Whether the PTY's foreground job is blocked reading the terminal (Linux; elsewhere false). */
export function foregroundReadsTty(shellPid: number, tty: string | undefined): boolean {
  return (foregroundOf(shellPid, tty)?.readers.length ?? 0) > 0;
}

/**
 * What identifies one exec of a program: a fork shares all of it with its parent, a new exec of
 * the same binary gets new code and stack addresses (ASLR) and its own argv and environment.
 */
export interface ProcessImage {
  exe: string;
  argv: string;
  environ: string;
  /** startcode, endcode, startstack. */
  layout: string;
}

export function imageOf(pid: number): ProcessImage | undefined {
  const fields = procStatFields(pid);
  const exe = exeOf(pid);
  if (!fields || exe === undefined) return undefined;
  let argv = '';
  let environ = '';
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
    environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined;
  }
  return {
    exe,
    argv,
    environ,
    layout: `${fields[PROC_STAT.startcode]}:${fields[PROC_STAT.endcode]}:${fields[PROC_STAT.startstack]}`,
  };
}

export function sameImage(a: ProcessImage, b: ProcessImage): boolean {
  return a.exe === b.exe && a.argv === b.argv && a.layout === b.layout && a.environ === b.environ;
}

/** Whether `pid` is a fork of its parent that did not exec (a subshell running its parent's code). */
function isForkOfParent(pid: number): boolean {
  const ppid = Number(procStatFields(pid)?.[PROC_STAT.ppid]);
  if (!(ppid > 1)) return false;
  const own = imageOf(pid);
  const parent = imageOf(ppid);
  return own !== undefined && parent !== undefined && sameImage(own, parent);
}

const SHELLS = new Set([
  'sh',
  'bash',
  'rbash',
  'dash',
  'ash',
  'zsh',
  'ksh',
  'mksh',
  'lksh',
  'pdksh',
  'oksh',
  'posh',
  'yash',
  'hush',
  'fish',
  'csh',
  'tcsh',
]);
const BUSYBOX_SHELLS = new Set(['sh', 'ash', 'hush', 'bash']);

/** `bash`, `bash5.2`, `ksh93`, `zsh-5.9` -> the shell's family name; undefined for a non-shell. */
export function shellFamily(programName: string): string | undefined {
  const name = programName.replace(/^-/, '').replace(/[-.\d]+$/, '');
  return SHELLS.has(name) ? name : undefined;
}

/** POSIX-family long options that take the next word as their value. */
const LONG_WITH_VALUE = new Set(['rcfile', 'init-file', 'emulate']);

/**
 * Whether a shell started with `args` (argv without argv[0]) reads its commands from its standard
 * input — interactively or not — rather than from `-c` text or a script file. Shell option
 * grammars: POSIX family (`-c`, `-s`, `-o name`, `-O name`, `--rcfile file`, `--`), fish
 * (`-c`/`--command`, `-C`/`--init-command` take a value), csh (`-c`, `-s`).
 */
export function readsCommands(family: string, args: readonly string[]): boolean {
  let command = false;
  let stdin = false;
  let i = 0;
  if (family === 'fish') {
    for (; i < args.length; i++) {
      const a = args[i]!;
      if (a === '--') {
        i++;
        break;
      }
      if (a.startsWith('--')) {
        const name = a.slice(2).split('=')[0]!;
        if (name === 'command') return false;
        if (name === 'init-command' && !a.includes('=')) i++;
        continue;
      }
      if (a.startsWith('-') && a.length > 1) {
        if (a.includes('c')) return false;
        if (a.endsWith('C')) i++;
        continue;
      }
      break;
    }
    return i >= args.length;
  }
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--' || a === '-') {
      i++;
      break;
    }
    if (a.startsWith('--')) {
      if (!a.includes('=') && LONG_WITH_VALUE.has(a.slice(2))) i++;
      continue;
    }
    if ((a[0] === '-' || a[0] === '+') && a.length > 1) {
      let takesValue = false;
      for (const ch of a.slice(1)) {
        if (a[0] === '-' && ch === 'c') command = true;
        if (a[0] === '-' && ch === 's') stdin = true;
        if (ch === 'o' || ch === 'O' || (family === 'mksh' && ch === 'T')) takesValue = true;
      }
      if (takesValue) i++;
      continue;
    }
    break;
  }
  if (command) return false;
  if (stdin) return true;
  return i >= args.length;
}

/** The shell `pid` runs and whether it reads commands from its terminal; undefined for a non-shell. */
export function shellOf(pid: number): { family: string; readsCommands: boolean } | undefined {
  const exe = exeOf(pid);
  const argv = argvOf(pid) ?? [];
  let program = exe !== undefined ? basename(exe) : commOf(pid);
  if (program === undefined) return undefined;
  let args = argv.slice(1);
  if (program === 'busybox') {
    // busybox runs the applet its argv[0] names (a symlink), or argv[1] when called as busybox.
    let applet = basename(argv[0] ?? '');
    if (applet === 'busybox') {
      applet = argv[1] ?? '';
      args = argv.slice(2);
    }
    if (!BUSYBOX_SHELLS.has(applet)) return undefined;
    program = applet;
  }
  const family = shellFamily(program);
  if (family === undefined) return undefined;
  return { family, readsCommands: readsCommands(family, args) };
}

/**
 * Whether text typed into this PTY now would reach a shell that runs it as commands: the
 * foreground job's terminal readers (or, when none reads yet, its leader) are checked. A shell
 * that reads commands from the terminal counts (`bash`, `sh`, `sh -s`, `exec zsh`), a shell running
 * `-c` text or a script does not (its reads are data, e.g. `read -p`), and neither does a fork of
 * a shell (a subshell runs code that was already judged). The session's own shell (`session`,
 * identified by its image) counts only when it reads through another fd than 0 — zsh's line
 * editor uses its own tty fd, its `read` builtin fd 0 — or when it was replaced by `exec`.
 */
export function commandReaderOf(
  shellPid: number,
  tty: string | undefined,
  session: ProcessImage | undefined,
): { pid: number; shell: string } | undefined {
  const fg = foregroundOf(shellPid, tty);
  if (!fg) return undefined;
  let candidates = fg.readers.map((r) => r.pid);
  if (candidates.length === 0) candidates = fg.members.includes(fg.pgid) ? [fg.pgid] : fg.members;
  for (const pid of new Set(candidates)) {
    if (pid === shellPid) {
      const image = imageOf(pid);
      if (image !== undefined && session !== undefined && sameImage(image, session)) {
        if (fg.readers.some((r) => r.pid === pid && r.fd !== 0)) {
          return { pid, shell: shellOf(pid)?.family ?? 'shell' };
        }
        continue;
      }
    }
    const shell = shellOf(pid);
    if (!shell || !shell.readsCommands) continue;
    if (pid !== shellPid && isForkOfParent(pid)) continue;
    return { pid, shell: shell.family };
  }
  return undefined;
}
