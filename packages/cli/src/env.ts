import { homedir } from 'node:os';
import { delimiter, resolve } from 'node:path';
import { writableBy } from '@conch/process';

/** Variables that keep commands from waiting on a human: pagers, editors, credential prompts. */
export const NON_INTERACTIVE_ENV: Readonly<Record<string, string>> = {
  PAGER: 'cat',
  GIT_PAGER: 'cat',
  MANPAGER: 'cat',
  SYSTEMD_PAGER: '',
  LESS: 'FRX',
  GIT_TERMINAL_PROMPT: '0',
  GCM_INTERACTIVE: 'never',
  GIT_EDITOR: 'true',
  EDITOR: 'true',
  VISUAL: 'true',
  DEBIAN_FRONTEND: 'noninteractive',
  PIP_NO_INPUT: '1',
  CONDA_ALWAYS_YES: 'true',
  HOMEBREW_NO_AUTO_UPDATE: '1',
  TERM: 'dumb',
};

/** `~` and `~/x` expanded to the home directory (default this machine's); relative paths resolved from `cwd`. */
export function expandPath(path: string, cwd: string, home: string = homedir()): string {
  if (path === '~') return home;
  if (path.startsWith('~/')) return resolve(home, path.slice(2));
  return resolve(cwd, path);
}

/**
 * The environment additions of one command: non-interactive defaults, then the config's `env`,
 * then the call's; PATH gets `extraPaths` prepended. (The process manager merges these over the
 * host environment.)
 */
export function commandEnv(options: {
  extraPaths: readonly string[];
  configEnv: Readonly<Record<string, string>>;
  callEnv?: Readonly<Record<string, string>> | undefined;
  cwd: string;
  /** Where the command runs is another machine: its home (for `~` in extraPaths) ... */
  home?: string;
  /** ... and its PATH, which extraPaths go in front of (instead of this machine's). */
  basePath?: string;
}): Record<string, string> {
  const env: Record<string, string> = { ...NON_INTERACTIVE_ENV };
  if (!process.env.GIT_SSH_COMMAND) env.GIT_SSH_COMMAND = 'ssh -o BatchMode=yes';
  Object.assign(env, options.configEnv, options.callEnv);
  if (options.extraPaths.length > 0) {
    const base = env.PATH ?? options.basePath ?? process.env.PATH ?? '';
    const extra = options.extraPaths.map((p) => expandPath(p, options.cwd, options.home));
    env.PATH = [...extra, ...(base ? [base] : [])].join(delimiter);
  }
  return env;
}

/**
 * A PATH for a command that runs outside the sandbox (a human let it out, a host rule allows it,
 * or the sandbox is off): without the entries a sandboxed command could have written, those inside
 * `roots` (the workspace and the other writable roots, also when reached through a symlink), and
 * without the entries that depend on the directory the command runs in (empty, `.`, relative).
 * Through any of them a program the agent left (`.venv/bin/git`, `node_modules/.bin/ls`, a
 * direnv `PATH_add bin`) would run under the name of the command a human approved. `dropped`: the
 * entries left out, in order.
 */
export function pathOutside(path: string, roots: readonly string[]): { path: string; dropped: string[] } {
  const writable = writableBy(roots);
  const kept: string[] = [];
  const dropped: string[] = [];
  for (const entry of path.split(delimiter)) {
    if (writable(entry)) dropped.push(entry);
    else kept.push(entry);
  }
  return { path: kept.join(delimiter), dropped };
}
