import { realpathSync } from 'node:fs';
import { basename, delimiter, dirname, isAbsolute, join, sep } from 'node:path';

/**
 * Whether a sandboxed command could have written what a path names: a relative path (it depends on
 * the directory the command runs in, the workspace), or one inside `roots`, also through a symlink.
 */
export function writableBy(roots: readonly string[]): (path: string) => boolean {
  // libc's realpath (.native): the same answers as node's own walk in JavaScript, in ~40% of its
  // time (11 entries: 60 against 140 us here), and this runs on every call outside the sandbox.
  // A path that does not exist yet is resolved through its deepest existing directory: a
  // sandboxed command can make `x` later where `/elsewhere/link/x` leads into the workspace.
  const real = (p: string): string => {
    try {
      return realpathSync.native(p);
    } catch {
      const parent = dirname(p);
      return parent === p ? p : join(real(parent), basename(p));
    }
  };
  const bases = [...new Set(roots.flatMap((r) => [r, real(r)]))];
  const inside = (p: string) => bases.some((r) => p === r || p.startsWith(r.endsWith(sep) ? r : r + sep));
  return (path) => !isAbsolute(path) || inside(path) || inside(real(path));
}

/**
 * Variables whose entries say where programs load code or read what runs: the dynamic loader's
 * libraries, interpreters' module paths, git's programs. Lists (`:`; LD_PRELOAD also spaces).
 */
const LOAD_PATH_LISTS = [
  'LD_LIBRARY_PATH',
  'LD_PRELOAD',
  'PYTHONPATH',
  'NODE_PATH',
  'PERL5LIB',
  'PERLLIB',
  'RUBYLIB',
  'GEM_PATH',
  'CLASSPATH',
  'GIT_EXEC_PATH',
];
/** One path each: a file a shell or git reads at start, a directory whose contents run. */
const LOAD_PATH_FILES = [
  'BASH_ENV',
  'ENV',
  'ZDOTDIR',
  'PYTHONSTARTUP',
  'PYTHONUSERBASE',
  'GEM_HOME',
  'GIT_CONFIG_GLOBAL',
  'GIT_CONFIG_SYSTEM',
  'GIT_TEMPLATE_DIR',
];

/**
 * What PATH is to programs (pathOutside), these are to the code programs load: for a command that
 * runs outside the sandbox, an entry a sandboxed command could have written is left out of each
 * variable (`env`'s value, else the host's), and a variable left with nothing is unset (undefined).
 * An LD_LIBRARY_PATH or PYTHONPATH of the user's that names `./build/lib` or the workspace's `src`
 * would otherwise load a `libz.so.1` or a `sitecustomize.py` the agent wrote into the `git` or `aws`
 * a human let out; a GIT_CONFIG_GLOBAL there is a config with `core.fsmonitor`. `dropped`: each
 * variable changed, with the entries left out.
 */
export function loaderEnvOutside(
  env: Readonly<Record<string, string | undefined>>,
  roots: readonly string[],
): { changes: Record<string, string | undefined>; dropped: { name: string; entries: string[] }[] } {
  const writable = writableBy(roots);
  const changes: Record<string, string | undefined> = {};
  const dropped: { name: string; entries: string[] }[] = [];
  const valueOf = (name: string) => (name in env ? env[name] : process.env[name]);
  for (const name of LOAD_PATH_LISTS) {
    const value = valueOf(name);
    if (!value) continue;
    const preload = name === 'LD_PRELOAD';
    const entries = value.split(preload ? /[:\s]+/ : delimiter);
    // An empty entry means the current directory to most of these (the workspace, where a command runs).
    const empty = !preload && entries.includes('');
    const kept: string[] = [];
    const out: string[] = [];
    for (const entry of entries) if (entry !== '') (writable(entry) ? out : kept).push(entry);
    if (out.length === 0 && !empty) continue;
    changes[name] = kept.length > 0 ? kept.join(preload ? ' ' : delimiter) : undefined;
    dropped.push({ name, entries: empty ? [...out, ''] : out });
  }
  for (const name of LOAD_PATH_FILES) {
    const value = valueOf(name);
    if (!value || !writable(value)) continue;
    changes[name] = undefined;
    dropped.push({ name, entries: [value] });
  }
  return { changes, dropped };
}
