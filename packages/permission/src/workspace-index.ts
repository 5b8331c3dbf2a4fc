// Owns the one bounded walk of the workspace a grant needs: where the files are that commands an
// allow rule matches could execute (package.json files, Makefiles, repositories), so a rule with a
// wildcard (`npm run test:*`, `git commit:*`) is snapshotted over all of them when it is granted.
import { readdirSync, type Dirent } from 'node:fs';
import { posix } from 'node:path';
import { discoverRepository } from './git-config.js';

export interface WorkspaceIndex {
  /** Every package.json outside node_modules. */
  packageJsons: string[];
  /** Directories holding a GNUmakefile, makefile or Makefile. */
  makefileDirs: string[];
  /** Every repository: a `.git` directory or file (followed), or a bare repository. */
  repositories: { gitDir: string; workTree: string | undefined }[];
  /** Why the walk did not see everything (then what it did not see is not in any snapshot). */
  incomplete?: string;
}

export interface IndexLimits {
  /** Directory entries read, in all. */
  entries: number;
  /** Directories below the root. */
  depth: number;
}

export const INDEX_LIMITS: IndexLimits = { entries: 100_000, depth: 48 };

const MAKEFILES = new Set(['GNUmakefile', 'makefile', 'Makefile']);

/**
 * Walks `root` breadth first, without following symlinks into directories and without entering
 * node_modules or git dirs. What it cannot read, or what lies beyond the limits, makes the index
 * incomplete (and the escalations that would need it ask).
 */
export function indexWorkspace(root: string, limits: IndexLimits = INDEX_LIMITS): WorkspaceIndex {
  const index: WorkspaceIndex = { packageJsons: [], makefileDirs: [], repositories: [] };
  let budget = limits.entries;
  let queue: string[] = [root];
  for (let depth = 0; queue.length > 0; depth++) {
    if (depth > limits.depth) {
      index.incomplete ??= `the workspace is deeper than ${limits.depth} directories`;
      break;
    }
    const next: string[] = [];
    for (const dir of queue) {
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch (error) {
        index.incomplete ??= `${dir} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
        continue;
      }
      budget -= entries.length;
      if (budget < 0) {
        index.incomplete ??= `the workspace has more than ${limits.entries} entries`;
        return index;
      }
      const names = new Set(entries.map((e) => e.name));
      // A bare repository (committed into the workspace or made there): HEAD, objects/ and refs/.
      if (dir !== root && names.has('HEAD') && names.has('objects') && names.has('refs')) {
        index.repositories.push({ gitDir: dir, workTree: undefined });
        continue;
      }
      let makefiles = false;
      for (const e of entries) {
        const path = posix.join(dir, e.name);
        if (e.name === '.git') {
          const found = discoverRepository(dir);
          if (found && !('risk' in found) && found.workTree === dir) index.repositories.push(found);
          continue;
        }
        if (e.isDirectory()) {
          if (e.name !== 'node_modules') next.push(path);
          continue;
        }
        if (e.name === 'package.json') index.packageJsons.push(path);
        else if (MAKEFILES.has(e.name)) makefiles = true;
      }
      if (makefiles) index.makefileDirs.push(dir);
    }
    queue = next;
  }
  return index;
}
