import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** The last PATH bwrap was found on, and where (asked on every sandboxed spawn). */
let found: { pathEnv: string; bwrap: string } | undefined;

/**
 * Finds `bwrap` on PATH, or undefined. A hit is remembered for the same PATH (one that disappears
 * later fails its supervisor's start, which forgets it: forgetBwrap); a miss is looked for again.
 */
export function findBwrap(pathEnv = process.env.PATH ?? ''): string | undefined {
  if (found?.pathEnv === pathEnv) return found.bwrap;
  for (const dir of pathEnv.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'bwrap');
    try {
      accessSync(candidate, constants.X_OK);
      found = { pathEnv, bwrap: candidate };
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** Forgets the remembered bwrap (it failed to start: it may have moved, or gone and come back). */
export function forgetBwrap(): void {
  found = undefined;
}
