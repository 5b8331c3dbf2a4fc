// Test helper: small real file systems (tmpfs) that fill up or refuse writes. Needs root (mount).
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Whether this process may mount (root): the tests that need a real full or read-only disk. */
export const canMount = typeof process.getuid === 'function' && process.getuid() === 0;

const mounted: { dir: string; created: boolean }[] = [];

/** Mounts a tmpfs of `size` (e.g. '2m') on a new temp dir, read-only when asked; returns the dir. */
export function mountTmpfs(size: string, options: { readOnly?: boolean; at?: string } = {}): string {
  const dir = options.at ?? mkdtempSync(join(tmpdir(), 'conch-tmpfs-'));
  execFileSync('mount', [
    '-t',
    'tmpfs',
    '-o',
    `size=${size},mode=0777${options.readOnly ? ',ro' : ''}`,
    'tmpfs',
    dir,
  ]);
  mounted.push({ dir, created: options.at === undefined });
  return dir;
}

/** Unmounts every tmpfs mounted here (lazily: a file still open in a dying process must not block it). */
export function unmountAll(): void {
  for (const { dir, created } of mounted.splice(0).reverse()) {
    try {
      execFileSync('umount', ['-l', dir]);
    } catch {
      // gone already
    }
    if (created) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Fills `dir`'s file system to its last byte (a block at a time, then smaller writes, into
 * `dir/filler`); returns the blocks still free for an unprivileged writer (0 when it worked).
 */
export function fillToTheLastByte(dir: string): number {
  const filler = join(dir, 'filler');
  for (let chunk = 64 * 1024; chunk >= 1;) {
    try {
      appendFileSync(filler, Buffer.alloc(chunk));
    } catch {
      chunk = Math.floor(chunk / 2);
    }
  }
  return statfsSync(dir).bavail;
}
