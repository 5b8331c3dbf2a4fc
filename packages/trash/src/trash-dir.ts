import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, isAbsolute, join, resolve } from 'node:path';

/** `$XDG_DATA_HOME`, else `~/.local/share` (relative values are ignored, as the spec says). */
export function dataHome(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME;
  return xdg && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), '.local', 'share');
}

/**
 * The trash of a project: `$XDG_DATA_HOME/conch/trash/<name>-<hash>` (default
 * `~/.local/share/conch/trash/...`), where `<name>` is the project directory's name and `<hash>` the
 * first 12 hex digits of the SHA-256 of its real path. Outside the project (a `git clean` or a
 * `find .` never meets it) and per user; one directory per project so restore lists stay short.
 */
export function defaultTrashDir(projectRoot: string, env: NodeJS.ProcessEnv = process.env): string {
  let real = resolve(projectRoot);
  try {
    real = realpathSync.native(real);
  } catch {
    // a project that does not exist (yet): its spelling
  }
  const hash = createHash('sha256').update(real).digest('hex').slice(0, 12);
  const name = (basename(real) || 'root').replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 40);
  return join(dataHome(env), 'conch', 'trash', `${name}-${hash}`);
}
