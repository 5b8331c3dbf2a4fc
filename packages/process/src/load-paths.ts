import { realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, delimiter, dirname, isAbsolute, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

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
 * Variables holding a program's own options, some of which name code it loads: node's `--require`,
 * `--import`, `--loader`, `--env-file` (which may set NODE_OPTIONS again); ruby's `-r`/`-I`; perl's
 * `-I`/`-Mlib=`; a JVM's `-javaagent:`, `-agentpath:`, class and module paths. Each value is
 * judged by the option that takes it (optionVerdicts).
 */
const LOAD_OPTION_VARS: Readonly<Record<string, 'node' | 'ruby' | 'perl' | 'java'>> = {
  NODE_OPTIONS: 'node',
  RUBYOPT: 'ruby',
  PERL5OPT: 'perl',
  JAVA_TOOL_OPTIONS: 'java',
  _JAVA_OPTIONS: 'java',
  JDK_JAVA_OPTIONS: 'java',
};
/**
 * Command lines programs run for the user: git's ssh, askpass, pager and editor, less's input
 * filter, an interactive bash's PROMPT_COMMAND (a terminal session outside the sandbox). Unset when
 * a path in them is one a sandboxed command could have written (`GIT_SSH_COMMAND="ssh -F
 * ssh_config"` reads a ProxyCommand from the workspace; see commandNamesWritable); a bare program
 * name is found on PATH, which pathOutside already cleaned.
 */
const COMMAND_VARS = [
  'GIT_SSH',
  'GIT_SSH_COMMAND',
  'GIT_ASKPASS',
  'SSH_ASKPASS',
  'SUDO_ASKPASS',
  'GIT_EXTERNAL_DIFF',
  'GIT_PAGER',
  'GIT_EDITOR',
  'GIT_SEQUENCE_EDITOR',
  'EDITOR',
  'VISUAL',
  'PAGER',
  'MANPAGER',
  'SYSTEMD_PAGER',
  'LESSOPEN',
  'LESSCLOSE',
  'PROMPT_COMMAND',
];

/**
 * `~`, `$HOME` and `${HOME}` at the start of a path expanded (shells and these programs do); a path
 * that uses another variable is returned as it is, which writableBy reads as relative: not understood,
 * so left out.
 */
function expandHome(path: string): string {
  const home = process.env.HOME || homedir();
  const m = /^(?:~|\$HOME|\$\{HOME\})(?=\/|$)/.exec(path);
  return m ? home + path.slice(m[0].length) : path;
}

/** The words of an options variable: whitespace-separated, `"…"` and `'…'` kept whole (node's and the JVM's quoting). */
function optionWords(value: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < value.length) word += value[++i]!;
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word ??= '';
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else word = (word ?? '') + c;
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** A word written back into an options variable: quoted when it holds a space or a quote. */
function optionWord(word: string): string {
  return /[\s"'\\]/.test(word) ? `"${word.replace(/["\\]/g, (c) => `\\${c}`)}"` : word;
}

/** Paths inside a word that is not an option's value (`--x=./a`, `-Dfoo=/ws/b`): what follows `=`, or the word, when it holds a `/`. */
function pathsIn(word: string): string[] {
  return word.split(/[=,]/).filter((part) => part.includes('/') && !part.includes('://'));
}

/** node's options that name code it loads (or an env file, whose NODE_OPTIONS node applies). */
const NODE_CODE_OPTIONS = new Set([
  '-r',
  '--require',
  '--import',
  '--loader',
  '--experimental-loader',
  '--env-file',
  '--env-file-if-exists',
  '--openssl-config',
  '--snapshot-blob',
  '--experimental-policy',
  '--experimental-config-file',
  '--test-reporter',
]);
/** A JVM's options whose value is a list of paths (`:`) classes or modules load from. */
const JAVA_PATH_OPTIONS = new Set([
  '-cp',
  '-classpath',
  '--class-path',
  '-p',
  '--module-path',
  '--upgrade-module-path',
]);

/**
 * Which words of an options variable to leave out: an option naming code that a sandboxed command
 * could have written (a path inside the roots, a relative path, and for node a bare module name,
 * which node resolves from the workspace's node_modules), with its value when that is the next
 * word; any other word with such a path in it. Ruby's `-r json` and perl's `-MData::Dumper` name a
 * library found on load paths (RUBYLIB, PERL5LIB, cleaned above; neither includes the current
 * directory), so they stay.
 */
function optionVerdicts(
  dialect: 'node' | 'ruby' | 'perl' | 'java',
  words: readonly string[],
  writable: (path: string) => boolean,
): boolean[] {
  const out = words.map(() => false);
  const bad = (path: string) => writable(expandHome(path));
  // A node specifier: node: and data: are no files; file: URLs are.
  const nodeBad = (spec: string) => {
    if (/^(?:node|data):/.test(spec)) return false;
    if (spec.startsWith('file:')) {
      try {
        return bad(fileURLToPath(spec));
      } catch {
        return true;
      }
    }
    return bad(spec);
  };
  const rubyFeatureBad = (feature: string) =>
    feature.includes('/') || feature.startsWith('.') ? bad(feature) : false;
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    // The option and its value (`--opt=value`, `-rvalue`; or `--opt value`, `-r value`, when it
    // returns 1: the next word was the value).
    const takeValue = (value: string | undefined, judge: (v: string) => boolean): number => {
      if (value !== undefined && value !== '') {
        if (judge(value)) out[i] = true;
        return 0;
      }
      if (i + 1 >= words.length) return 0;
      if (judge(words[i + 1]!)) out[i] = out[i + 1] = true;
      return 1;
    };
    if (dialect === 'node') {
      const eq = word.indexOf('=');
      const name = eq > 0 ? word.slice(0, eq) : word;
      if (NODE_CODE_OPTIONS.has(name)) {
        i += takeValue(eq > 0 ? word.slice(eq + 1) : undefined, nodeBad);
        continue;
      }
      // node.config.json of the directory node runs in (the workspace).
      if (word === '--experimental-default-config-file') {
        out[i] = true;
        continue;
      }
    } else if (dialect === 'ruby') {
      // Flags without a value may come first in one word (`-wrfoo`).
      const m = /^-[dvwyU]*([rI])(.*)$/.exec(word);
      if (m) {
        i += takeValue(m[2], m[1] === 'r' ? rubyFeatureBad : bad);
        continue;
      }
    } else if (dialect === 'perl') {
      const m = /^-([IMm])(.*)$/.exec(word);
      if (m?.[1] === 'I') {
        i += takeValue(m[2], bad);
        continue;
      }
      if (m) {
        // -Mlib=dir,dir adds directories to @INC; other modules come from @INC.
        const lib = /^-?lib=(.*)$/.exec(m[2]!);
        if (lib && lib[1]!.split(',').some(bad)) out[i] = true;
        continue;
      }
    } else {
      const agent = /^-(?:javaagent|agentpath):([^=]*)/.exec(word);
      if (agent) {
        if (bad(agent[1]!)) out[i] = true;
        continue;
      }
      const boot = /^-Xbootclasspath(?:\/[ap])?:(.*)$/.exec(word);
      if (boot) {
        if (boot[1]!.split(':').some(bad)) out[i] = true;
        continue;
      }
      if (word.startsWith('@')) {
        if (bad(word.slice(1))) out[i] = true;
        continue;
      }
      const eq = word.indexOf('=');
      const name = eq > 0 ? word.slice(0, eq) : word;
      if (JAVA_PATH_OPTIONS.has(name)) {
        i += takeValue(eq > 0 ? word.slice(eq + 1) : undefined, (v) => v.split(':').some(bad));
        continue;
      }
      const prop = /^-Djava\.(?:library\.path|class\.path|ext\.dirs|endorsed\.dirs)=(.*)$/.exec(word);
      if (prop) {
        if (prop[1]!.split(':').some(bad)) out[i] = true;
        continue;
      }
    }
    if (pathsIn(word).some(bad)) out[i] = true;
  }
  return out;
}

/**
 * Whether a command line names a path a sandboxed command could have written. The first word of
 * each command (after `;`, `|`, `&`, parentheses) is a program: judged when it holds a `/` (a bare
 * name is found on PATH). Any other word that is not an option is an argument that may be a file
 * in the directory the command runs in (`ssh -F ssh_config`): judged as a path, so a bare word
 * counts as relative, except a number or a `%s` placeholder; of `--opt=value` and `Key=value` the
 * value, when it holds a `/`.
 */
function commandNamesWritable(value: string, writable: (path: string) => boolean): boolean {
  const bad = (path: string) => writable(expandHome(path));
  let first = true;
  for (const word of value.split(/([;|&()]+)|[\s"'`<>]+/)) {
    if (word === undefined || word === '') continue;
    if (/^[;|&()]+$/.test(word)) {
      first = true;
      continue;
    }
    if (first) {
      first = false;
      if (word.includes('/') && !word.includes('://') && bad(word)) return true;
      continue;
    }
    const eq = word.indexOf('=');
    if (word.startsWith('-') || eq > 0) {
      const v = eq > 0 ? word.slice(eq + 1) : '';
      if (v.includes('/') && !v.includes('://') && bad(v)) return true;
      continue;
    }
    if (/^\d+$/.test(word) || word.includes('%') || word.includes('://')) continue;
    if (bad(word)) return true;
  }
  return false;
}

/**
 * What PATH is to programs (pathOutside), these are to the code programs load: for a command that
 * runs outside the sandbox, an entry a sandboxed command could have written is left out of each
 * variable (`env`'s value, else `base`'s: the host's), and a variable left with nothing is unset (undefined).
 * An LD_LIBRARY_PATH or PYTHONPATH of the user's that names `./build/lib` or the workspace's `src`
 * would otherwise load a `libz.so.1` or a `sitecustomize.py` the agent wrote into the `git` or `aws`
 * a human let out; a GIT_CONFIG_GLOBAL there is a config with `core.fsmonitor`. `dropped`: each
 * variable changed, with the entries left out.
 */
export function loaderEnvOutside(
  env: Readonly<Record<string, string | undefined>>,
  roots: readonly string[],
  base: Readonly<Record<string, string | undefined>> = process.env,
): { changes: Record<string, string | undefined>; dropped: { name: string; entries: string[] }[] } {
  const writable = writableBy(roots);
  const changes: Record<string, string | undefined> = {};
  const dropped: { name: string; entries: string[] }[] = [];
  const valueOf = (name: string) => (name in env ? env[name] : base[name]);
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
    if (!value || !writable(expandHome(value))) continue;
    changes[name] = undefined;
    dropped.push({ name, entries: [value] });
  }
  for (const [name, dialect] of Object.entries(LOAD_OPTION_VARS)) {
    const value = valueOf(name);
    if (!value) continue;
    const words = optionWords(value);
    const verdicts = optionVerdicts(dialect, words, writable);
    if (!verdicts.includes(true)) continue;
    const kept = words.filter((_, i) => !verdicts[i]);
    changes[name] = kept.length > 0 ? kept.map(optionWord).join(' ') : undefined;
    dropped.push({ name, entries: words.filter((_, i) => verdicts[i]) });
  }
  for (const name of COMMAND_VARS) {
    const value = valueOf(name);
    if (!value || !commandNamesWritable(value, writable)) continue;
    changes[name] = undefined;
    dropped.push({ name, entries: [value] });
  }
  return { changes, dropped };
}

/** What envForOutside left out: PATH's entries, and each loader variable changed with its entries. */
export interface OutsideDropped {
  path: string[];
  loaders: { name: string; entries: string[] }[];
}

/**
 * The one place the cli's commands, the terminal's sessions and the supervisor get the environment
 * of a process that runs outside the sandbox from: the changes to make to `env` (its value of each
 * variable, else `base`'s, the host's by default) so that no PATH entry (pathOutside), loader entry,
 * option or command line (loaderEnvOutside) names what a sandboxed command could have written inside
 * `roots`. `undefined` in `changes`: unset the variable. Apply them with applyEnvChanges.
 */
export function envForOutside(
  env: Readonly<Record<string, string | undefined>>,
  roots: readonly string[],
  base: Readonly<Record<string, string | undefined>> = process.env,
): { changes: Record<string, string | undefined>; dropped: OutsideDropped } {
  const loaders = loaderEnvOutside(env, roots, base);
  const changes = { ...loaders.changes };
  const current = 'PATH' in env ? env.PATH : base.PATH;
  const path = current === undefined ? { path: '', dropped: [] } : pathOutside(current, roots);
  if (path.dropped.length > 0) changes.PATH = path.path;
  return { changes, dropped: { path: path.dropped, loaders: loaders.dropped } };
}

/** `env` with `changes` made (a variable whose change is `undefined` removed), as a new object. */
export function applyEnvChanges(
  env: Readonly<Record<string, string | undefined>>,
  changes: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const next: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...env, ...changes }))
    if (value !== undefined) next[key] = value;
  return next;
}
