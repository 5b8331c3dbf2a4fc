import {
  lstatSync,
  rmSync,
  statSync,
  type BigIntStats,
  type PathLike,
  type RmOptions,
  type StatSyncOptions,
  type Stats,
} from 'node:fs';

/*
 * Node 20 and 22 keep the result of every synchronous (l)stat in one shared buffer, and the module
 * loader's cached realpath reads that buffer to decide whether a path component it already knows is
 * a socket or FIFO, stopping the walk there when the last stat anywhere in the process was one
 * (nodejs/node#51142, fixed in Node 24). After conch lstat'ed a socket — rmSync does one for each
 * entry it removes: the proxy's socket in a temp dir, Chromium's SingletonSocket, a socket the agent
 * left in the sandbox's /tmp; the gate stats the paths a command names — the host's next import of a
 * package reached through a symlink (every package of a pnpm install, conch's plugin discovery)
 * resolved to the symlink's path instead of the package's: its dependencies were not found, or it
 * loaded a second time. Measured: @conch/permission imported after the bench's browser suite.
 */

/** Points node's shared stat buffer at `/` (a directory) again: one stat system call. */
export function clearStaleStat(): void {
  try {
    statSync('/');
  } catch {
    // nothing to reset with; nothing conch can do
  }
}

/**
 * `rmSync(path, options)` that leaves node's shared stat buffer on a directory, whatever it removed
 * (see above). Every removal of a tree or of a socket in conch goes through here.
 */
export function removeSync(path: string, options?: RmOptions): void {
  try {
    rmSync(path, options);
  } finally {
    clearStaleStat();
  }
}

/** A socket or a FIFO: what leaves node's shared stat buffer in the state the loader misreads. */
function special(stats: Stats | BigIntStats | undefined): boolean {
  return stats !== undefined && (stats.isSocket() || stats.isFIFO());
}

/**
 * `fs.statSync` that never leaves node's shared stat buffer on a socket or FIFO (see above): the
 * same arguments and answers, and a stat of `/` after one that found a socket or FIFO. Conch's
 * product code takes `statSync` and `lstatSync` only from here (eslint.config.js), so no conch work
 * — a tool call, a background task's end, a warm-up, a status check — can leave the buffer where
 * the host's next import misresolves. (`realpathSync` lstat's into node's other, bigint buffer,
 * which the loader does not read: measured harmless, a control in stale-stat.test.ts.)
 */
export const safeStatSync = resettingAfterSpecial(statSync);

/** `fs.lstatSync`, as safeStatSync. */
export const safeLstatSync = resettingAfterSpecial(lstatSync);

/** `stat` with the same signature that resets the buffer after an answer that was a socket or FIFO. */
function resettingAfterSpecial<F extends typeof statSync | typeof lstatSync>(stat: F): F {
  return ((path: PathLike, options?: StatSyncOptions) => {
    const stats = (stat as typeof statSync)(path, options as never) as Stats | BigIntStats | undefined;
    if (special(stats)) clearStaleStat();
    return stats;
  }) as F;
}
