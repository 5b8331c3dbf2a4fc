import { rmSync, statSync, type RmOptions } from 'node:fs';

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
