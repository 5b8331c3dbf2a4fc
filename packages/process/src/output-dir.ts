import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { removeSync, safeStatSync } from '@conch/core';

/** Files handed to a model are kept this long (pruned when a new one is written). */
export const OUTPUT_FILE_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
/** A directory is pruned at most this often per process. */
const PRUNE_EVERY_MS = 10 * 60 * 1000;
const lastPruned = new Map<string, number>();

/**
 * Where output files handed to a model live: `$XDG_CACHE_HOME/conch/output`, else
 * `~/.cache/conch/output`, and in it one directory per `workspace` when one is given. Per user,
 * outside any registry's temp dir, so a model can read a file it was given in a later turn, after
 * the host restarted; files older than 7 days are pruned.
 */
export function defaultOutputDir(env: NodeJS.ProcessEnv = process.env, workspace?: string): string {
  const xdg = env.XDG_CACHE_HOME;
  const cache = xdg && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), '.cache');
  const root = join(cache, 'conch', 'output');
  // One directory per workspace: a sandbox sees its own workspace's files (a model reads the
  // output_file it was given with `cat`), never another project's.
  return workspace ? join(root, `ws-${workspaceKey(workspace)}`) : root;
}

/** sha256 of each workspace path, short, made once: the directory is asked for on every command. */
const workspaceKeys = new Map<string, string>();
function workspaceKey(workspace: string): string {
  let key = workspaceKeys.get(workspace);
  if (key === undefined) {
    key = createHash('sha256').update(workspace).digest('hex').slice(0, 16);
    // A host with many workspaces keeps the last few hundred, not all.
    if (workspaceKeys.size >= 256) workspaceKeys.clear();
    workspaceKeys.set(workspace, key);
  }
  return key;
}

/**
 * Creates the output directory (mode 0700) and prunes files older than 7 days from it (at most
 * every 10 minutes per directory and process; errors are ignored: another process may prune the
 * same file). Returns the directory. Called when a file is about to be written there.
 */
export function prepareOutputDir(dir: string, now = Date.now()): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const last = lastPruned.get(dir);
  if (last === undefined || now - last >= PRUNE_EVERY_MS) {
    lastPruned.set(dir, now);
    pruneOutputDir(dir, now);
  }
  return dir;
}

/** Removes files older than `maxAgeMs` from `dir`; returns how many went. */
export function pruneOutputDir(dir: string, now = Date.now(), maxAgeMs = OUTPUT_FILE_MAX_AGE_MS): number {
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    const path = join(dir, name);
    try {
      const st = safeStatSync(path);
      if (st.isFile() && now - st.mtimeMs > maxAgeMs) {
        removeSync(path, { force: true });
        removed++;
      }
    } catch {
      // gone already
    }
  }
  return removed;
}

/** A file name for output handed to a model: sortable by time, unique across processes. */
export function outputFileName(tag: string, ext = 'txt'): string {
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${stamp}-${tag.replace(/[^A-Za-z0-9._-]/g, '_')}-${randomBytes(3).toString('hex')}.${ext}`;
}
