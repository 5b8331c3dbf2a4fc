// Test helper: small real file systems (tmpfs) that fill up or refuse writes. Needs root (mount).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
