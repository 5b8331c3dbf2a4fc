import { homedir } from 'node:os';
import { delimiter, resolve } from 'node:path';

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

/** (Moved to @conch/process, where the terminal's sessions outside the sandbox use it too.) */
export { pathOutside } from '@conch/process';
