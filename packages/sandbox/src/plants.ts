import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readlinkSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, delimiter, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { configValues } from './git-config-grammar.js';
import { parseHgrc } from './hgrc-grammar.js';
import { envrcPathDirs } from './direnv.js';
import { GIT_HOOK_NAMES } from './hook-managers.js';
import { GUARD_DIR_NAMES, GUARD_FILE_NAMES, HG_CONFIG_FILES, HG_PROTECTED } from './protected-names.js';
import { lstatIf, statIf } from './stat-if.js';
import { readRegularFileSync, safeLstatSync, safeStatSync } from '@conch/core';

/**
 * Plants: files a sandboxed command leaves behind that the user's own tools would later run
 * outside any sandbox, without the user deciding to run the project's code: a git config whose
 * `core.fsmonitor` runs on the next `git status`, a hook, a `.yarnrc.yml` whose `yarnPath` any
 * `yarn` runs, a `pip.py` that `python3 -m pip` imports. The guard refuses what it can when the
 * file is created (protected names, hooks); what it cannot refuse without breaking ordinary work
 * (the config of a repository the agent made, a workspace `.npmrc`) it reports as written, and
 * this module decides which of those writes armed something: the call's result and the sandbox's
 * status list them until the human clears them.
 *
 * Each class is one entry of PLANT_CLASSES: the names it watches (the guard reports their
 * changes) and how it reads a changed file. A new class is added here and nowhere else. The list
 * comes from what the tools execute, by their documentation: git-config(1) (keys that name a
 * program or a shell command), githooks(5), yarnrc (yarnPath, plugins), pnpm (.pnpmfile.cjs,
 * pnpmfile), npm-config (script-shell, node-options, ...), Python's `-m` and site module (the
 * current directory first on sys.path; sitecustomize/usercustomize imported at start), Mercurial's
 * config (`hg help config`: hooks, extensions, aliases and the tools it starts).
 */

export type PlantKind =
  | 'git-config'
  | 'git-hook'
  | 'git-pointer'
  | 'git-history'
  | 'hg-config'
  | 'yarn'
  | 'pnpmfile'
  | 'npmrc'
  | 'python-shadow'
  | 'path-shadow';

export interface Plant {
  kind: PlantKind;
  /** The file (or repository) that carries it. */
  path: string;
  /** What would run, and when: one line for a human. */
  detail: string;
}

interface PlantClass {
  kind: PlantKind;
  /** File names whose changes the guard reports (basenames). */
  watchNames: readonly string[];
  /** Whether this class reads a changed path (true: inspect is called for it). */
  matches(path: string): boolean;
  /** The plants the file at `path` now carries (it may be gone). */
  inspect(path: string): Plant[];
}

/** A file whose blob id is computed (a hook, a config): larger ones count as unknown content. */
const MAX_BLOB_BYTES = 64 * 1024 * 1024;

function readSmall(path: string, limit = 1024 * 1024): string | undefined {
  try {
    const st = safeStatSync(path);
    if (!st.isFile() || st.size > limit) return undefined;
    // Regular when opened too: a FIFO swapped in after the stat would block the host in open().
    return readRegularFileSync(path, { maxBytes: limit, encoding: 'utf8' });
  } catch {
    return undefined;
  }
}

/* ------------------------------------------------------------------------------------------- */
/* git                                                                                         */

/**
 * Config keys (lowercase; `*` one subsection) whose value git runs as a program or a shell command,
 * or which make git read another file that could (include), or point git's work at another place.
 */
const GIT_EXEC_KEYS: readonly { key: RegExp; when: string }[] = [
  { key: /^core\.fsmonitor$/, when: 'runs on every git status, diff or commit' },
  { key: /^core\.hookspath$/, when: 'makes every hook come from that directory' },
  { key: /^core\.pager$/, when: 'runs whenever git pages output' },
  { key: /^core\.editor$/, when: 'runs on git commit without -m' },
  { key: /^core\.sshcommand$/, when: 'runs on git fetch, pull and push over ssh' },
  { key: /^core\.askpass$/, when: 'runs when git asks for a password' },
  { key: /^core\.gitproxy$/, when: 'runs on git:// fetches' },
  { key: /^core\.alternaterefscommand$/, when: 'runs on fetch and push' },
  { key: /^core\.worktree$/, when: 'points the work tree outside the repository' },
  { key: /^sequence\.editor$/, when: 'runs on git rebase -i' },
  { key: /^diff\.external$/, when: 'runs on git diff' },
  { key: /^diff\.[^.]+\.(textconv|command)$/, when: 'runs on git diff and log -p' },
  { key: /^merge\.[^.]+\.driver$/, when: 'runs on merges' },
  { key: /^filter\.[^.]+\.(clean|smudge|process)$/, when: 'runs on git add, status and checkout' },
  { key: /^alias\./, when: 'shadows or adds a git command' },
  { key: /^include\.path$/, when: 'makes git read another config file' },
  { key: /^includeif\..+\.path$/, when: 'makes git read another config file' },
  { key: /^credential(\..+)?\.helper$/, when: 'runs when git needs credentials' },
  { key: /^gpg(\.[^.]+)?\.program$/, when: 'runs on signed commits and verification' },
  { key: /^pager\./, when: 'runs whenever git pages that command' },
  { key: /^(web|browser\.[^.]+)\.(browser|cmd|path)$/, when: 'runs on git help --web' },
  { key: /^(difftool|mergetool)\.[^.]+\.(cmd|path)$/, when: 'runs on git difftool and mergetool' },
  { key: /^man\.[^.]+\.(cmd|path)$/, when: 'runs on git help' },
  { key: /^remote\.[^.]+\.(uploadpack|receivepack)$/, when: 'runs on fetch and push' },
  { key: /^imap\.tunnel$/, when: 'runs on git imap-send' },
  { key: /^submodule\.[^.]+\.update$/, when: 'runs on git submodule update' },
  { key: /^uploadpack\.packobjectshook$/, when: 'runs on fetches from this repository' },
  { key: /^sendemail\..*(cmd|command|aliasesfile)$/, when: 'runs on git send-email' },
];

/** What in a git config would run a program (or change what git runs). */
export function gitConfigPlants(path: string, text: string): Plant[] {
  const plants: Plant[] = [];
  for (const { key, value } of configValues(text)) {
    const lower = key.toLowerCase();
    for (const rule of GIT_EXEC_KEYS) {
      if (!rule.key.test(lower)) continue;
      // core.fsmonitor = false / true (the built-in daemon) runs nothing of the repository's
      if (lower === 'core.fsmonitor' && /^(false|true|0|1|no|yes|off|on)?$/i.test(value)) continue;
      if (lower === 'core.pager' && /^(less|cat|more)?$/.test(value)) continue;
      plants.push({ kind: 'git-config', path, detail: `${key} = ${value.slice(0, 200)} (${rule.when})` });
      break;
    }
  }
  return plants;
}

/** The git directory a path lies in (`…/.git`, `…/.git/modules/x`, `…/.git/worktrees/x`), if any. */
function gitDirOf(path: string): string | undefined {
  const at = path.lastIndexOf(`${sep}.git${sep}`);
  if (at < 0) return undefined;
  let dir = path.slice(0, at + 5);
  const rest = path.slice(at + 6).split(sep);
  // modules/<name…> and worktrees/<name>: the innermost git dir holding the path
  for (let i = 0; i < rest.length - 1; i++) {
    if (rest[i] === 'modules' || rest[i] === 'worktrees') {
      const inner = join(dir, ...rest.slice(0, i + 2));
      const names = safeNames(inner);
      if (names.has('HEAD') || names.has('commondir') || names.has('config')) {
        dir = inner;
        i += 1;
      }
    }
  }
  return dir;
}

function safeNames(dir: string): Set<string> {
  try {
    return new Set(readdirSync(dir));
  } catch {
    return new Set();
  }
}

/** Whether a directory's entries are those of a git directory (a bare repository, a module dir). */
export function looksLikeGitDir(names: ReadonlySet<string>): boolean {
  return names.has('HEAD') && names.has('objects') && names.has('refs');
}

/**
 * Whether `dir` is a git directory: a `.git` (or one of its modules and worktrees), or a directory
 * git would open as a bare repository (`x.git/`, any name: HEAD, objects and refs in it). git reads
 * a bare repository's config and runs its hooks when the user works in it or pushes to it
 * (`git branch` in a terminal starts its `core.pager`; `git push` its `post-receive`).
 */
const isGitDir = (dir: string): boolean =>
  gitDirOf(join(dir, 'x')) === dir || looksLikeGitDir(safeNames(dir));

const GIT_CONFIG_NAMES = ['config', 'config.worktree'];
const isGitConfigFile = (path: string) =>
  GIT_CONFIG_NAMES.includes(basename(path)) && isGitDir(dirname(path));
const isGitHookFile = (path: string) =>
  basename(dirname(path)) === 'hooks' && (gitDirOf(path) !== undefined || isGitDir(dirname(dirname(path))));

function hookPlants(dir: string, repo: string): Plant[] {
  const plants: Plant[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return plants;
  }
  for (const name of names) {
    if (name.endsWith('.sample')) continue;
    const file = join(dir, name);
    const st = statIf(file);
    if (!st?.isFile() || (st.mode & 0o111) === 0) continue;
    plants.push({
      kind: 'git-hook',
      path: file,
      detail: `the ${name} hook of ${repo} runs when git reaches that step`,
    });
  }
  return plants;
}

/** A `.git` file: the repository it points at, and anything armed there. */
function gitPointerPlants(path: string): Plant[] {
  const text = readSmall(path, 64 * 1024);
  const st = lstatIf(path);
  if (!st) return [];
  let target: string | undefined;
  if (st.isSymbolicLink()) {
    target = resolve(dirname(path), readlinkSync(path));
  } else if (text !== undefined) {
    const m = /^gitdir:\s*(.+?)\s*$/m.exec(text);
    if (m) target = isAbsolute(m[1]!) ? m[1]! : resolve(dirname(path), m[1]!);
  }
  if (!target) return [];
  const plants: Plant[] = [];
  for (const file of ['config', 'config.worktree']) {
    const config = readSmall(join(target, file));
    if (config !== undefined) plants.push(...gitConfigPlants(join(target, file), config));
  }
  plants.push(...hookPlants(join(target, 'hooks'), target));
  const work = dirname(path);
  if (plants.length > 0)
    plants.unshift({
      kind: 'git-pointer',
      path,
      detail: `makes ${work} a repository whose git dir is ${target}; git run there would run what follows`,
    });
  return plants;
}

/* ------------------------------------------------------------------------------------------- */
/* Mercurial                                                                                    */

/**
 * Config keys (lowercase `section.name`; `*` any name) whose value hg runs, loads or starts: every
 * hook (`pre-<command>` hooks run before any command, `hg status` included), an extension given by
 * path (a bundled one named without a path is hg's own code), every alias (one may shadow a built-in
 * command, and `!` runs a shell command), and the programs hg starts for editing, merging, paging,
 * diffing, ssh and mail.
 */
const HG_EXEC_KEYS: readonly { key: RegExp; when: string }[] = [
  { key: /^hooks\./, when: 'runs when hg reaches that event (pre-<command> hooks before any command)' },
  { key: /^extensions\./, when: 'loaded by every hg command here' },
  { key: /^alias\./, when: 'shadows or adds an hg command' },
  { key: /^ui\.(editor|merge|ssh|remotecmd)$/, when: 'runs when hg edits, merges or reaches a remote' },
  { key: /^pager\.pager$/, when: 'runs whenever hg pages output' },
  { key: /^merge-tools\..+\.executable$/, when: 'runs on merges' },
  { key: /^merge-patterns\./, when: 'picks the program merges run' },
  { key: /^(extdiff|diff-tools)\./, when: 'runs on hg extdiff' },
  { key: /^fsmonitor\.watchman_exe$/, when: 'runs on every hg status' },
  { key: /^email\.method$/, when: 'runs on hg email' },
];

/** What in a Mercurial config would run a program (or make hg read another file). */
export function hgConfigPlants(path: string, text: string): Plant[] {
  const plants: Plant[] = [];
  const { items, includes } = parseHgrc(text);
  for (const { key, name, section, value } of items) {
    if (!value) continue;
    const rule = HG_EXEC_KEYS.find((r) => r.key.test(key));
    if (!rule) continue;
    // An extension named without a path is hg's own or an installed one; `!` disables it.
    if (key.startsWith('extensions.') && (value.startsWith('!') || !/[\\/~]|\.py[co]?$/.test(value)))
      continue;
    if (key === 'pager.pager' && /^(less|cat|more)( -[A-Za-z]+)?$/.test(value)) continue;
    plants.push({
      kind: 'hg-config',
      path,
      detail: `[${section}] ${name} = ${value.slice(0, 200)} (${rule.when})`,
    });
  }
  for (const target of includes)
    plants.push({
      kind: 'hg-config',
      path,
      detail: `%include ${target.slice(0, 200)} (hg reads that file as config)`,
    });
  return plants;
}

/** An hgrc or share pointer of a `.hg` directory, and what it arms. */
function hgPlants(path: string): Plant[] {
  const name = basename(path);
  if (name !== 'sharedpath') {
    const text = readSmall(path);
    return text === undefined ? [] : hgConfigPlants(path, text);
  }
  // A share: hg uses the store, and with share-safe the config, of the repository named there.
  const target = readSmall(path, 64 * 1024)?.trim();
  if (!target) return [];
  const source = isAbsolute(target) ? target : resolve(dirname(path), target);
  const plants: Plant[] = [];
  for (const file of HG_CONFIG_FILES) {
    const text = readSmall(join(source, file));
    if (text !== undefined) plants.push(...hgConfigPlants(join(source, file), text));
  }
  if (plants.length > 0)
    plants.unshift({
      kind: 'hg-config',
      path,
      detail: `makes ${dirname(dirname(path))} a share of ${source}; hg run there would run what follows`,
    });
  return plants;
}

/* ------------------------------------------------------------------------------------------- */
/* package managers, python                                                                     */

function yarnPlants(path: string): Plant[] {
  const text = readSmall(path);
  if (text === undefined) return [];
  const plants: Plant[] = [];
  if (basename(path) === '.yarnrc.yml') {
    const yarnPath = /^\s*yarnPath\s*:\s*(.+?)\s*$/m.exec(text);
    if (yarnPath)
      plants.push({
        kind: 'yarn',
        path,
        detail: `yarnPath: ${yarnPath[1]} (every yarn run here runs that file)`,
      });
    if (/^\s*plugins\s*:/m.test(text))
      plants.push({ kind: 'yarn', path, detail: 'plugins: (every yarn run here loads them)' });
    const inject = /^\s*injectEnvironmentFiles\s*:/m.test(text);
    if (inject)
      plants.push({ kind: 'yarn', path, detail: 'injectEnvironmentFiles (yarn run loads those files)' });
  } else {
    const yarnPath = /^\s*yarn-path\s+(.+?)\s*$/m.exec(text);
    if (yarnPath)
      plants.push({
        kind: 'yarn',
        path,
        detail: `yarn-path ${yarnPath[1]} (every yarn run here runs that file)`,
      });
  }
  return plants;
}

const NPMRC_EXEC_KEYS = new Set([
  'script-shell',
  'node-options',
  'shell',
  'git',
  'editor',
  'browser',
  'viewer',
  'onload-script',
  'init-module',
  'pnpmfile',
  'global-pnpmfile',
  'globalconfig',
  'userconfig',
  'prefix',
]);

function npmrcPlants(path: string): Plant[] {
  const text = readSmall(path);
  if (text === undefined) return [];
  const plants: Plant[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const m = /^\s*([A-Za-z0-9_.-]+)\s*=\s*(.*?)\s*$/.exec(raw);
    if (!m || raw.trim().startsWith('#') || raw.trim().startsWith(';')) continue;
    const key = m[1]!.toLowerCase().replace(/_/g, '-');
    if (NPMRC_EXEC_KEYS.has(key))
      plants.push({
        kind: 'npmrc',
        path,
        detail: `${m[1]}=${m[2]!.slice(0, 200)} (npm and pnpm run here use it)`,
      });
  }
  return plants;
}

/** pnpm-workspace.yaml can name a pnpmfile too (pnpm 10 reads settings there). */
function pnpmPlants(path: string): Plant[] {
  if (basename(path) === '.pnpmfile.cjs' || basename(path) === '.pnpmfile.mjs') {
    return lstatIf(path)
      ? [{ kind: 'pnpmfile', path, detail: 'pnpm install here runs this file (hooks on every package)' }]
      : [];
  }
  const text = readSmall(path);
  if (text === undefined) return [];
  const m = /^\s*(pnpmfile|globalPnpmfile)\s*:\s*(.+?)\s*$/m.exec(text);
  return m ? [{ kind: 'pnpmfile', path, detail: `${m[1]}: ${m[2]} (pnpm install here runs that file)` }] : [];
}

/** Modules that `python3 -m <name>` (the current directory first on sys.path) or site imports. */
const PYTHON_SHADOWS = [
  'pip.py',
  'ensurepip.py',
  'venv.py',
  'site.py',
  'sitecustomize.py',
  'usercustomize.py',
  'setuptools.py',
  'pkg_resources.py',
  'distutils.py',
  'pytest.py',
];

function pythonPlants(path: string): Plant[] {
  if (!lstatIf(path)) return [];
  const module = basename(path).replace(/\.py$/, '');
  return [
    {
      kind: 'python-shadow',
      path,
      detail: `python3 -m ${module} (or python started in ${dirname(path)}) imports this file instead of the real ${module}`,
    },
  ];
}

/**
 * Programs a user runs with their credentials or on their files, under names no Python or direnv
 * tooling installs into a project's bin directory (a venv gets python, pip and its packages'
 * scripts; node, npm, aws or az can come from nodeenv or pip, so they are not here).
 */
const SHADOWED_COMMANDS = [
  'git',
  'hg',
  'ssh',
  'scp',
  'sftp',
  'ssh-add',
  'ssh-keygen',
  'sudo',
  'su',
  'doas',
  'gpg',
  'gpg2',
  'pass',
  'curl',
  'wget',
  'docker',
  'podman',
  'kubectl',
  'gh',
  'make',
  'ls',
  'cat',
  'cp',
  'mv',
  'rm',
  'env',
  'sh',
  'bash',
  'zsh',
];

/**
 * Why `dir` is on the user's PATH when they work in the project, or undefined: a Python venv's
 * `bin` (its `activate` puts it first; `pyvenv.cfg` beside it, whatever the venv's name), a
 * directory on the host's PATH, one an `.envrc` above it adds (`PATH_add`, `path_add PATH`,
 * `PATH=…:$PATH`, `layout node`): direnv puts it first at every `cd`.
 */
function projectPathReason(dir: string): string | undefined {
  if (basename(dir) === 'bin' && statIf(join(dirname(dir), 'pyvenv.cfg'))?.isFile())
    return `activating the venv ${dirname(dir)} puts it first on PATH`;
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  };
  const here = real(dir);
  for (const entry of (process.env.PATH ?? '').split(delimiter))
    if (entry && isAbsolute(entry) && real(entry) === here) return 'it is on your PATH';
  const home = process.env.HOME || homedir();
  for (let d = dirname(dir), depth = 0; depth < 32; d = dirname(d), depth++) {
    const envrc = join(d, '.envrc');
    if (statIf(envrc)?.isFile()) {
      const text = readSmall(envrc);
      if (text !== undefined && envrcPathDirs(envrc, text, home).some((p) => real(p) === here))
        return `${envrc} adds it to PATH (direnv, at every cd)`;
      break;
    }
    if (dirname(d) === d) break;
  }
  return undefined;
}

/**
 * A program under a name the user types (git, ssh, sudo, …) left in a directory the user's shell
 * puts on PATH for this project: their next `git push` there runs it. A link to the program the
 * host would run anyway is not one.
 */
function pathShadowPlants(path: string): Plant[] {
  const st = statIf(path);
  if (!st?.isFile() || (st.mode & 0o111) === 0) return [];
  const reason = projectPathReason(dirname(path));
  if (!reason) return [];
  const name = basename(path);
  try {
    const target = realpathSync(path);
    for (const entry of (process.env.PATH ?? '').split(delimiter)) {
      if (!entry || !isAbsolute(entry) || entry === dirname(path)) continue;
      const host = join(entry, name);
      if (statIf(host)?.isFile()) {
        if (realpathSync(host) === target) return [];
        break;
      }
    }
  } catch {
    // unresolvable: judged as a program of its own
  }
  return [
    {
      kind: 'path-shadow',
      path,
      detail: `\`${name}\` typed in your shell runs this file instead of the real ${name} (${reason})`,
    },
  ];
}

/** Every plant class: the one list. */
export const PLANT_CLASSES: readonly PlantClass[] = [
  {
    kind: 'git-config',
    // Git's own files of a `.git` are watched by `watchGit`; a bare repository's, by their names.
    watchNames: GIT_CONFIG_NAMES,
    matches: isGitConfigFile,
    inspect: (path) => {
      const text = readSmall(path);
      return text === undefined ? [] : gitConfigPlants(path, text);
    },
  },
  {
    kind: 'git-hook',
    watchNames: [...GIT_HOOK_NAMES],
    matches: isGitHookFile,
    inspect: (path) => {
      const repo = gitDirOf(path) ?? dirname(dirname(path));
      return hookPlants(dirname(path), repo).filter((p) => p.path === path);
    },
  },
  {
    kind: 'git-pointer',
    watchNames: [],
    matches: (path) => basename(path) === '.git' && !statIf(path)?.isDirectory(),
    inspect: gitPointerPlants,
  },
  {
    kind: 'hg-config',
    watchNames: HG_PROTECTED,
    matches: (p) => HG_PROTECTED.includes(basename(p)) && basename(dirname(p)) === '.hg',
    inspect: hgPlants,
  },
  {
    kind: 'yarn',
    watchNames: ['.yarnrc.yml', '.yarnrc'],
    matches: (p) => /^\.yarnrc(\.yml)?$/.test(basename(p)),
    inspect: yarnPlants,
  },
  {
    kind: 'pnpmfile',
    watchNames: ['.pnpmfile.cjs', '.pnpmfile.mjs', 'pnpm-workspace.yaml'],
    matches: (p) => ['.pnpmfile.cjs', '.pnpmfile.mjs', 'pnpm-workspace.yaml'].includes(basename(p)),
    inspect: pnpmPlants,
  },
  { kind: 'npmrc', watchNames: ['.npmrc'], matches: (p) => basename(p) === '.npmrc', inspect: npmrcPlants },
  {
    kind: 'path-shadow',
    watchNames: SHADOWED_COMMANDS,
    matches: (p) => SHADOWED_COMMANDS.includes(basename(p)),
    inspect: pathShadowPlants,
  },
  {
    kind: 'python-shadow',
    watchNames: PYTHON_SHADOWS,
    matches: (p) => PYTHON_SHADOWS.includes(basename(p)) && !p.includes(`${sep}site-packages${sep}`),
    inspect: pythonPlants,
  },
];

/** The names the guard reports changes of (git's own files are watched by `watchGit`). */
export const PLANT_WATCH_NAMES: readonly string[] = [...new Set(PLANT_CLASSES.flatMap((c) => c.watchNames))];

/**
 * The plants the changed paths carry now (each path read once; a repository's hooks directory and
 * a `.git` file's target are read too). Paths that changed but armed nothing give nothing.
 */
export function inspectPlants(paths: Iterable<string>): Plant[] {
  const seen = new Set<string>();
  const plants: Plant[] = [];
  for (const path of paths) {
    if (seen.has(path)) continue;
    seen.add(path);
    for (const plantClass of PLANT_CLASSES) {
      let matched = false;
      try {
        matched = plantClass.matches(path);
      } catch {
        matched = false;
      }
      if (!matched) continue;
      try {
        plants.push(...plantClass.inspect(path));
      } catch {
        // unreadable now (gone, or changed to something else): nothing to report
      }
    }
  }
  return dedupe(plants);
}

function dedupe(plants: Plant[]): Plant[] {
  const keys = new Set<string>();
  return plants.filter((p) => {
    const key = `${p.kind}\0${p.path}\0${p.detail}`;
    if (keys.has(key)) return false;
    keys.add(key);
    return true;
  });
}

/* ------------------------------------------------------------------------------------------- */
/* history: commits and index entries that a later checkout would write as files                */

const escapeName = (name: string) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A guard name as a pattern: `*suffix` (every name ending in suffix) as `[^/]*suffix`. */
const namePattern = (name: string) =>
  name.startsWith('*') ? `[^/]*${escapeName(name.slice(1))}` : escapeName(name);

/**
 * Paths in a tree that, checked out into a work tree, are plants or protected files: the guard's
 * protected names and directories, the plant classes' names, and husky's hooks directory.
 */
const HISTORY_NAMES = new RegExp(
  `(^|/)(${[...GUARD_FILE_NAMES, ...PLANT_CLASSES.filter((c) => c.kind !== 'path-shadow').flatMap((c) => c.watchNames)].map(namePattern).join('|')})$|(^|/)(${[...GUARD_DIR_NAMES, '.husky'].map(escapeName).join('|')})/`,
);

/**
 * git, run on the host against a repository a sandboxed command may have armed: nothing of its
 * config may run. `-c` overrides beat the repository's own config for each key git consults on
 * the way (fsmonitor, hooks, pager); system and global config are left out; only plumbing that
 * reads objects and the index is used (no diff drivers, no filters, no textconv).
 */
function safeGit(repoDir: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolveOut) => {
    execFile(
      'git',
      [
        '-c',
        'core.fsmonitor=false',
        '-c',
        'core.hooksPath=/dev/null',
        '-c',
        'core.pager=cat',
        '-c',
        'protocol.allow=never',
        '--no-pager',
        '--no-optional-locks',
        '-C',
        repoDir,
        ...args,
      ],
      {
        encoding: 'utf8',
        maxBuffer: 4 * 1024 * 1024,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          GIT_CONFIG_NOSYSTEM: '1',
          GIT_CONFIG_GLOBAL: '/dev/null',
          GIT_TERMINAL_PROMPT: '0',
          HOME: '/nonexistent',
        },
        // generous: git on a big repository on a loaded machine; a hang is bounded, not a result
        timeout: 60_000,
      },
      (error, stdout) => resolveOut(error ? undefined : stdout),
    );
  });
}

/** The blob id git gives a file's bytes (sha1, or sha256 in a repository of that format). */
function blobId(path: string, hexLength: number): string | undefined {
  let bytes: Buffer;
  try {
    const st = safeLstatSync(path);
    bytes = st.isSymbolicLink()
      ? Buffer.from(readlinkSync(path))
      : st.isFile()
        ? readRegularFileSync(path, { maxBytes: MAX_BLOB_BYTES })
        : Buffer.alloc(0);
    if (!st.isSymbolicLink() && !st.isFile()) return undefined;
  } catch {
    return undefined;
  }
  const hash = createHash(hexLength === 64 ? 'sha256' : 'sha1');
  hash.update(`blob ${bytes.length}\0`);
  hash.update(bytes);
  return hash.digest('hex');
}

/** The last reflog entry of a ref whose new value is `tip`: what the ref pointed at before. */
function previousTip(gitDir: string, ref: string, tip: string): string | undefined {
  const text = readSmall(join(gitDir, 'logs', ref), 16 * 1024 * 1024);
  if (!text) return undefined;
  const lines = text.trimEnd().split('\n');
  for (let i = lines.length - 1; i >= 0 && i >= lines.length - 50; i--) {
    const m = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64}) /.exec(lines[i]!);
    if (m && m[2] === tip) return /^0+$/.test(m[1]!) ? undefined : m[1];
  }
  return undefined;
}

/**
 * What a repository's refs and index, changed by a sandboxed command, would write into its work
 * tree at a later checkout, merge, pull, restore or stash that is a plant: a path of a planted name
 * (the guard's protected names and directories, the plant classes' files) that the change added or
 * altered. Committed through plumbing (`git hash-object -w`, `update-index --cacheinfo`,
 * `commit-tree`) such a file never touches the disk in the sandbox, where the guard would refuse
 * it; the user's checkout writes it.
 *
 * `changed` lists the paths in the git dir the guard saw written (`refs/heads/x`, `packed-refs`,
 * `HEAD`, `index`). A ref's change is read from its reflog (old -> new: what the new commits
 * add); a ref updated without one is compared with the work tree instead. Bounded: 50 refs.
 */
export async function historyPlants(workTree: string, changed: readonly string[]): Promise<Plant[]> {
  const gitDir = join(workTree, '.git');
  const plants: Plant[] = [];
  const refs = new Set<string>();
  let checkIndex = false;
  for (const path of changed) {
    const inner = path.startsWith(`${gitDir}${sep}`) ? path.slice(gitDir.length + 1) : undefined;
    if (!inner) continue;
    if (inner === 'index') checkIndex = true;
    else if (inner === 'HEAD') refs.add('HEAD');
    else if (inner.startsWith(`refs${sep}`) && !inner.endsWith('.lock')) refs.add(inner.split(sep).join('/'));
    else if (inner === 'packed-refs') {
      const all = await safeGit(workTree, [
        'for-each-ref',
        '--count=50',
        '--format=%(refname)',
        'refs/heads',
        'refs/tags',
      ]);
      for (const name of (all ?? '').split('\n').filter(Boolean)) refs.add(name);
    }
  }
  for (const ref of [...refs].slice(0, 50)) {
    const tip = (await safeGit(workTree, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]))?.trim();
    if (!tip) continue;
    const before = previousTip(gitDir, ref, tip);
    const shortRef = ref.replace(/^refs\/(heads|tags)\//, '');
    if (before) {
      const names = await safeGit(workTree, [
        'diff-tree',
        '-r',
        '-z',
        '--name-only',
        '--no-renames',
        '--diff-filter=AMT',
        before,
        tip,
      ]);
      for (const name of (names ?? '').split('\0').filter((n) => n && HISTORY_NAMES.test(n)))
        plants.push({
          kind: 'git-history',
          path: join(workTree, name),
          detail: `${shortRef} (${tip.slice(0, 12)}) now adds or changes ${name}: a checkout, merge or pull of it writes that file`,
        });
      continue;
    }
    const listing = await safeGit(workTree, ['ls-tree', '-r', '-z', '--full-tree', tip]);
    for (const entry of (listing ?? '').split('\0')) {
      const m = /^\d+ blob ([0-9a-f]{40,64})\t(.+)$/s.exec(entry);
      if (!m || !HISTORY_NAMES.test(m[2]!) || blobId(join(workTree, m[2]!), m[1]!.length) === m[1]) continue;
      plants.push({
        kind: 'git-history',
        path: join(workTree, m[2]!),
        detail: `${shortRef} (${tip.slice(0, 12)}) holds a ${m[2]} that differs from the work tree's: a checkout, merge or pull of it writes it`,
      });
    }
  }
  if (checkIndex) {
    const staged = await safeGit(workTree, ['ls-files', '--stage', '-z']);
    for (const entry of (staged ?? '').split('\0')) {
      const m = /^\d+ ([0-9a-f]{40,64}) \d\t(.+)$/s.exec(entry);
      if (!m || !HISTORY_NAMES.test(m[2]!) || blobId(join(workTree, m[2]!), m[1]!.length) === m[1]) continue;
      plants.push({
        kind: 'git-history',
        path: join(workTree, m[2]!),
        detail: `the index stages a ${m[2]} that differs from the work tree's: git checkout, restore or stash writes it`,
      });
    }
  }
  return dedupe(plants);
}

/** The work tree of a git dir reported as changed (`…/x/.git/refs/heads/main` -> `…/x`), if it has one. */
export function workTreeOf(path: string): string | undefined {
  const at = path.lastIndexOf(`${sep}.git${sep}`);
  if (at < 0) return undefined;
  const rest = path.slice(at + 6);
  // a submodule's or worktree's own git dir keeps history in the main repository's object store:
  // the work tree whose .git this is
  if (rest.startsWith(`modules${sep}`) || rest.startsWith(`worktrees${sep}`)) return undefined;
  return path.slice(0, at);
}

/** Whether a change to this path can change what a checkout would write (refs, the index, HEAD). */
export function changesHistory(path: string): boolean {
  return /[\\/]\.git[\\/](refs[\\/].+|packed-refs|HEAD|index)$/.test(path);
}
