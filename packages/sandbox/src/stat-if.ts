import { type Stats } from 'node:fs';
import { safeLstatSync, safeStatSync } from '@conch/core';

/**
 * A path's stats, or undefined when it cannot be read for any reason — missing, but also in a
 * directory this user may not enter (EACCES: a PATH or toolchain variable naming another user's
 * home, as `su` without `-` or `sudo -E` leaves them), a symlink loop, a name too long. Building a
 * sandbox's policy treats such a path as absent: a command running as this user cannot reach it
 * either, and one unreadable entry must not fail every sandbox.
 */
export function lstatIf(path: string): Stats | undefined {
  try {
    return safeLstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** As lstatIf, following symlinks. */
export function statIf(path: string): Stats | undefined {
  try {
    return safeStatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
