import { readlinkSync, realpathSync, type Stats } from 'node:fs';
import { clearStaleStat, safeLstatSync, safeStatSync } from '@conch/core';

/**
 * The file system as one decision sees it. A command line names the same paths several times in
 * one analysis — the protected-paths rule, the recursive-delete rule and the sandbox's
 * writes-outside check each resolve every target, the kernel-style walk and the real path visit
 * the same directories, git discovery stats the same files — so inside `snapshot(fn)` every
 * lstat / readlink / stat / realpath answer is remembered until `fn` returns, and each path costs
 * one system call per decision.
 *
 * Nothing is remembered across decisions: a symlink or a `.git` created by one command is seen by
 * the next decision, exactly as without the snapshot (a cached resolution must never let a write
 * escape). The analysis is synchronous, so no other decision can run inside a snapshot; outside
 * one (a direct call of a path helper) every call goes to the file system.
 */
interface Snapshot {
  /** `null`: not a symlink; a string: the link's text; `undefined`: lstat or readlink failed. */
  links: Map<string, string | null | undefined>;
  stats: Map<string, Stats | undefined>;
  reals: Map<string, string | undefined>;
}

let current: Snapshot | undefined;

/** Runs `fn` with the file system's answers remembered until it returns (nested calls share one). */
export function snapshot<T>(fn: () => T): T {
  if (current) return fn();
  current = { links: new Map(), stats: new Map(), reals: new Map() };
  try {
    return fn();
  } finally {
    current = undefined;
    // A command may name a socket or FIFO (docker.sock, a named pipe): node's shared stat buffer
    // must not be left on one, or the host's next import of a symlinked package misresolves.
    clearStaleStat();
  }
}

/**
 * The text of the symlink at `path`, `null` when `path` exists and is not a symlink, or
 * `undefined` when lstat or readlink fails (missing, not a directory, no permission).
 */
export function linkAt(path: string): string | null | undefined {
  const memo = current?.links;
  if (memo?.has(path)) return memo.get(path);
  let answer: string | null | undefined;
  try {
    // No exception for a missing path (the common case of a new target): creating one costs more
    // than the system call.
    const st = safeLstatSync(path, { throwIfNoEntry: false });
    answer = st === undefined ? undefined : st.isSymbolicLink() ? readlinkSync(path) : null;
  } catch {
    answer = undefined;
  }
  memo?.set(path, answer);
  return answer;
}

/** `stat` (following symlinks), or undefined when it fails. */
export function statOf(path: string): Stats | undefined {
  const memo = current?.stats;
  if (memo?.has(path)) return memo.get(path);
  let answer: Stats | undefined;
  try {
    answer = safeStatSync(path, { throwIfNoEntry: false });
  } catch {
    answer = undefined;
  }
  memo?.set(path, answer);
  return answer;
}

/**
 * `fs.realpathSync(path)`, or undefined when it throws: the native realpath(3) (one system call
 * instead of an lstat per component); Node's own walk when the native one fails for another reason
 * than a missing component (ENOENT, ENOTDIR, which fail Node's walk too), so an answer is never
 * missing where `realpathSync` has one.
 */
export function realpathOf(path: string): string | undefined {
  const memo = current?.reals;
  if (memo?.has(path)) return memo.get(path);
  let answer: string | undefined;
  try {
    answer = realpathSync.native(path);
  } catch (error) {
    // A missing component fails Node's walk the same way; anything else gets Node's walk.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') answer = undefined;
    else
      try {
        answer = realpathSync(path);
      } catch {
        answer = undefined;
      }
  }
  memo?.set(path, answer);
  return answer;
}
