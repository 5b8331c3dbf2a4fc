import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { KernelPolicy } from '@conch/core';
import { protectedReason, RC_FILES, SYSTEM_RC, SYSTEM_RC_DIRS, type PathContext } from './paths.js';

/**
 * Start-up files and directories in the home directory the kernel keeps read-only: the parser's
 * rc files (one list for both walls) plus directories of start-up code.
 */
const HOME_ENTRIES = [
  ...RC_FILES,
  '.bashrc.d',
  '.ssh',
  '.config/git',
  '.config/fish',
  '.config/environment.d',
];
const SYSTEM_ENTRIES = [...SYSTEM_RC, ...SYSTEM_RC_DIRS.map((dir) => dir.replace(/\/$/, ''))];

/**
 * The second wall: the existing protected paths every command conch runs must see read-only
 * (bind-mounted read-only by the process layer where bubblewrap works). The kernel only binds
 * what exists: a protected file created later (a new `.env.local`) is covered by the parser alone
 * until the next sandbox starts. Host globs are expanded in the workspace (bounded walk).
 */
export function kernelPolicy(ctx: PathContext, options: { maxWalk?: number } = {}): KernelPolicy {
  const out = new Set<string>();
  const add = (path: string) => {
    if (statSync(path, { throwIfNoEntry: false })) out.add(path);
  };
  for (const entry of HOME_ENTRIES) add(join(ctx.home, entry));
  for (const entry of SYSTEM_ENTRIES) add(entry);
  const ws = ctx.workspaceRoot;
  add(join(ws, '.git', 'hooks'));
  add(join(ws, '.git', 'config'));
  let top: string[] = [];
  try {
    top = readdirSync(ws);
  } catch {
    // no workspace (yet)
  }
  for (const name of top) if (/^\.env($|[.\-_]|rc$)/.test(name)) out.add(join(ws, name));
  if (ctx.extra.length > 0) {
    // Host globs: literal paths as given, patterns matched in a bounded walk of the workspace.
    let budget = options.maxWalk ?? 5000;
    const walk = (dir: string, depth: number) => {
      if (depth > 4 || budget <= 0) return;
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        return;
      }
      for (const name of names) {
        if (--budget <= 0) return;
        if (name === 'node_modules' || name === '.git') continue;
        const path = join(dir, name);
        if (
          protectedReason(path, { ...ctx, extra: ctx.extra }) &&
          ctx.extra.some((g) => g.test(path) || g.test(relative(ws, path)))
        )
          out.add(path);
        const st = statSync(path, { throwIfNoEntry: false });
        if (st?.isDirectory()) walk(path, depth + 1);
      }
    };
    walk(ws, 0);
  }
  return { readOnlyPaths: [...out].sort() };
}
