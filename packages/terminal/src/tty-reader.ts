import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Whether a PTY's foreground job is blocked reading the terminal: the kernel's own answer to "is it
 * waiting for input?", for programs that read stdin without printing a prompt (`cat`, `grep x`
 * with no file, `read` without -p). Linux only (/proc); elsewhere always false.
 */

// read(2) syscall numbers of the architectures node-pty ships prebuilt binaries for.
const READ_SYSCALL: Partial<Record<string, number>> = { x64: 0, arm64: 63 };

function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
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

export function foregroundReadsTty(shellPid: number, tty: string | undefined): boolean {
  const readNr = READ_SYSCALL[process.arch];
  if (tty === undefined || readNr === undefined || process.platform !== 'linux') return false;
  // Fields after the command name: state ppid pgrp session tty_nr tpgid ...
  const tpgid = Number(statFields(shellPid)?.[5]);
  if (!(tpgid > 0)) return false;
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return false;
  }
  for (const name of names) {
    const c = name.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const pid = Number(name);
    if (Number(statFields(pid)?.[2]) !== tpgid) continue;
    let syscall: string;
    try {
      syscall = readFileSync(`/proc/${pid}/syscall`, 'latin1');
    } catch {
      continue;
    }
    const [nr, fdHex] = syscall.trim().split(' ');
    if (Number(nr) !== readNr || fdHex === undefined) continue;
    try {
      if (readlinkSync(`/proc/${pid}/fd/${parseInt(fdHex, 16)}`) === tty) return true;
    } catch {
      // fd closed meanwhile
    }
  }
  return false;
}
