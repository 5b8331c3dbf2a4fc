import { dirname, isAbsolute, join, resolve } from 'node:path';

/**
 * What an `.envrc` loads besides itself.
 *
 * direnv runs an `.envrc` in the user's shell on every `cd` into its directory once the user has
 * allowed it (by path and content). The files it loads are not checked: direnv's stdlib
 * `source_env` and `source_env_if_exists` run another file (or a directory's `.envrc`), `dotenv` and
 * `dotenv_if_exists` set variables from one (`PATH`, `PROMPT_COMMAND`, `BASH_ENV` run code in that
 * shell), and bash's `source` / `.` run one. Whoever can write such a file runs code at the user's
 * next `cd`, outside any sandbox, without a new approval. Measured with direnv 2.32: an allowed
 * `.envrc` with `source_env_if_exists .envrc.local` loaded a `.envrc.local` made afterwards, and an
 * edit of a file it `source_env`s ran at the next `direnv exec`, with no prompt.
 *
 * Read line by line, the way these calls are written in practice (one per line or after `;`, `&&`,
 * `||`, `then`, `else`, `do`): `$PWD` and `$HOME` (braced or not), `~` and a leading `./` resolve;
 * a target built from any other variable or a command substitution cannot be known here and is
 * left out. `dotenv` without an argument reads `.env`, which is protected by its name already.
 * What a `use nix` or `use flake` evaluates (nix files and what they import) is not followed.
 */
export function envrcLoads(
  envrc: string,
  text: string,
  home: string,
  isDir: (p: string) => boolean,
): string[] {
  const dir = dirname(envrc);
  const loads = new Set<string>();
  const call =
    /(?:^|[;&|]|\bthen\b|\belse\b|\bdo\b)\s*(source_env_if_exists|source_env|dotenv_if_exists|dotenv|source|\.)[ \t]+("[^"\n]*"|'[^'\n]*'|[^\s;&|)#]+)/g;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/(^|\s)#.*$/, '');
    for (const m of line.matchAll(call)) {
      const target = expand(m[2]!, dir, home);
      if (target === undefined) continue;
      const path = isAbsolute(target) ? target : resolve(dir, target);
      // `source_env <dir>` loads that directory's .envrc.
      loads.add(m[1]!.startsWith('source_env') && isDir(path) ? join(path, '.envrc') : path);
    }
  }
  loads.delete(envrc);
  return [...loads];
}

/**
 * The directories an `.envrc` puts on PATH (absolute): direnv's `PATH_add` (several at once) and
 * `path_add PATH`, `layout node` (`node_modules/.bin`), and `PATH=…` / `export PATH=…` parts other
 * than `$PATH` itself; relative ones from the `.envrc`'s directory. Expanded as envrcLoads does:
 * a part built from another variable is left out.
 */
export function envrcPathDirs(envrc: string, text: string, home: string): string[] {
  const dir = dirname(envrc);
  const dirs = new Set<string>();
  const add = (word: string) => {
    const target = expand(word, dir, home);
    if (target !== undefined && target !== '') dirs.add(isAbsolute(target) ? target : resolve(dir, target));
  };
  const start = String.raw`(?:^|[;&|]|\bthen\b|\belse\b|\bdo\b)\s*`;
  const word = String.raw`("[^"\n]*"|'[^'\n]*'|[^\s;&|)#]+)`;
  const pathAdd = new RegExp(String.raw`${start}(?:PATH_add|path_add\s+PATH)((?:[ \t]+${word})+)`, 'g');
  const assign = new RegExp(String.raw`${start}(?:export\s+)?PATH=${word}`, 'g');
  for (const raw of text.split('\n')) {
    const line = raw.replace(/(^|\s)#.*$/, '');
    for (const m of line.matchAll(pathAdd)) for (const w of m[1]!.match(new RegExp(word, 'g')) ?? []) add(w);
    for (const m of line.matchAll(assign)) {
      const value = m[1]!.replace(/^(["'])(.*)\1$/, '$2');
      for (const part of value.split(':')) if (!/^\$\{?PATH\}?$/.test(part)) add(part);
    }
    if (/(?:^|[;&|]|\bthen\b|\bdo\b)\s*layout\s+node\b/.test(line))
      dirs.add(join(dir, 'node_modules', '.bin'));
  }
  return [...dirs];
}

/** A word with its quotes removed and `$PWD`, `$HOME`, `~` expanded; undefined when it holds anything else dynamic. */
function expand(word: string, dir: string, home: string): string | undefined {
  const single = word.startsWith("'") && word.endsWith("'") && word.length >= 2;
  let text =
    single || (word.startsWith('"') && word.endsWith('"') && word.length >= 2) ? word.slice(1, -1) : word;
  if (single) return /[`]/.test(text) ? undefined : text;
  if (text === '~' || text.startsWith('~/')) text = home + text.slice(1);
  text = text.replace(/\$\{PWD\}|\$PWD\b/g, dir).replace(/\$\{HOME\}|\$HOME\b/g, home);
  return /[$`\\*?[]/.test(text) ? undefined : text;
}
