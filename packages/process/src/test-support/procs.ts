// Test helper: /proc checks for processes that must not survive, by this package's cookies.
// Polling (waitFor) and the generic /proc helpers are in @conch/test-support.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmdirSync } from 'node:fs';
import { CHECKOUT } from '@conch/test-support';
import { onTestFinished } from 'vitest';
import { findCookiePids, pidAlive } from '../kill-tree.js';

/** Live (non-zombie) processes carrying a cookie with this prefix. */
export function survivors(prefix: string): number[] {
  return findCookiePids({ prefix }).filter((pid) => pidAlive(pid));
}

/**
 * The checkout at a path every user can walk, for a test that runs node as `nobody`: the clone may
 * sit in a directory only its owner can enter (a 0700 home), so it is bind-mounted (root only;
 * pnpm's links are relative). Unmounted when the test finishes.
 */
export function checkoutViewForAnyUser(): string {
  const view = mkdtempSync('/var/tmp/conch-clone-view-');
  execFileSync('chmod', ['755', view]);
  execFileSync('mount', ['--bind', CHECKOUT, view]);
  onTestFinished(() => {
    execFileSync('umount', [view]);
    rmdirSync(view);
  });
  return view;
}
