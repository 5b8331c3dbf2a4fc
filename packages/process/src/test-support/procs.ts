// Test helper: /proc checks for processes that must not survive, by this package's cookies.
// Polling (waitFor) and the generic /proc helpers are in @conch/test-support.
import { findCookiePids, pidAlive } from '../kill-tree.js';

/** Live (non-zombie) processes carrying a cookie with this prefix. */
export function survivors(prefix: string): number[] {
  return findCookiePids({ prefix }).filter((pid) => pidAlive(pid));
}
