// Test helpers: polling and /proc checks for processes that must not survive.
import { findCookiePids, pidAlive } from '../kill-tree.js';

export async function waitFor(cond: () => boolean, timeoutMs = 20_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Live (non-zombie) processes carrying a cookie with this prefix. */
export function survivors(prefix: string): number[] {
  return findCookiePids({ prefix }).filter((pid) => pidAlive(pid));
}
