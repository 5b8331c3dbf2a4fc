import { homedir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';

/** `~` and `~/x` to the home directory; relative paths from `cwd`. */
export function resolveTargetPath(path: string, cwd: string, home: string = homedir()): string {
  if (path === '~') return home;
  if (path.startsWith('~/')) return resolve(home, path.slice(2));
  return isAbsolute(path) ? resolve(path) : resolve(cwd, path);
}
