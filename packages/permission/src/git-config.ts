import { readdirSync, type Stats } from 'node:fs';
import { readRegularFileSync } from '@conch/core';
import { statOf } from './fs-snapshot.js';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parseGitConfig, type ConfigEntry } from '@conch/sandbox';
import { GIT_EXEC_KEYS } from './commands/git.js';

/**
 * Whether a repository a git read would open has a config that makes git run programs. `git
 * status` runs `core.fsmonitor`, `git diff` and `git log -p` run textconv and external diff drivers,
 * filters run on status, a submodule's own config runs when status recurses into it: a hostile
 * config turns an allowed read into code execution. The user's own global and system configs are
 * trusted; every repository config git will read is read here, with git's own grammar
 * (`parseGitConfig`): the repository git finds from the working directory the way git finds it
 * (a `.git` directory or file, or a bare repository: a directory that is itself a git dir), or the
 * one `--git-dir` / `--bare` names; its common dir (a worktree's); `config.worktree`; every
 * submodule's git dir (`modules/**` and the `.gitmodules` paths of the work tree); and every file
 * they include (`include.path`, `includeIf.*.path`, whatever the condition).
 */
export function gitConfigRisk(
  startDir: string,
  repository?: { gitDir: string } | { bare: true },
): string | undefined {
  let found: { gitDir: string; workTree: string | undefined } | undefined;
  if (repository && 'gitDir' in repository)
    found = { gitDir: resolve(startDir, repository.gitDir), workTree: undefined };
  else if (repository) found = { gitDir: resolve(startDir), workTree: undefined };
  else {
    const discovered = discover(startDir);
    if (discovered && 'risk' in discovered) return discovered.risk;
    found = discovered;
  }
  if (!found) return undefined;
  const budget = { dirs: 256 };
  const risk = gitDirRisk(found.gitDir, budget, 0);
  if (risk) return risk;
  if (found.workTree) return submoduleRisk(found.workTree, budget);
  return undefined;
}

/*
 * Every file here is one a sandboxed command may have written (a repository it made, a hook it
 * set): read as a regular file only, never opened when a FIFO or a device took the name between
 * the stat and the read (@conch/core readRegularFileSync), and within a bound.
 */
/** A `.git` or `commondir` pointer: one line. */
const MAX_POINTER_BYTES = 64 * 1024;
/** A git config (and each file it includes): far above any real one. */
const MAX_CONFIG_BYTES = 1024 * 1024;

const readPointer = (path: string): string =>
  readRegularFileSync(path, { maxBytes: MAX_POINTER_BYTES, encoding: 'utf8' });

/** stat, remembered for the rest of the decision (fs-snapshot.ts). */
const stat = (path: string): Stats | undefined => statOf(path);

/** git's is_git_directory: HEAD, and objects/ and refs/ (here or in the common dir). */
function isGitDir(dir: string): boolean {
  if (!stat(join(dir, 'HEAD'))?.isFile()) return false;
  const commondir = join(dir, 'commondir');
  let common = dir;
  if (stat(commondir)?.isFile()) {
    try {
      common = resolve(dir, readPointer(commondir).trim());
    } catch {
      return true;
    }
  }
  return !!stat(join(common, 'objects'))?.isDirectory() && !!stat(join(common, 'refs'))?.isDirectory();
}

/**
 * The repository git finds from `start`, walking up: at each directory a `.git` that is a git dir
 * (or a `gitdir:` file pointing at one), else the directory itself when it is a git dir (a bare
 * repository, committed or not). A `.git` file whose pointer cannot be read asks.
 */
function discover(
  start: string,
): { gitDir: string; workTree: string | undefined } | { risk: string } | undefined {
  let dir = resolve(start);
  for (let i = 0; i < 256; i++) {
    const candidate = join(dir, '.git');
    // No exceptions on the common path: this runs for every git read.
    const st = stat(candidate);
    if (st?.isDirectory() && isGitDir(candidate)) return { gitDir: candidate, workTree: dir };
    if (st?.isFile()) {
      let text: string;
      try {
        text = readPointer(candidate);
      } catch {
        return { risk: `${candidate} cannot be read, so the gate cannot tell which repository git opens` };
      }
      const m = /^gitdir: *(.+?)\r?\n?$/.exec(text.split('\n')[0] ?? '');
      if (!m) return { risk: `${candidate} is not a gitdir: pointer the gate can read` };
      const target = isAbsolute(m[1]!) ? m[1]! : resolve(dir, m[1]!);
      return { gitDir: target, workTree: dir };
    }
    if (isGitDir(dir)) return { gitDir: dir, workTree: undefined };
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
  return undefined;
}

/** A git dir's configs, its common dir's, the hook a read can run, and its submodules' git dirs. */
function gitDirRisk(gitDir: string, budget: { dirs: number }, depth: number): string | undefined {
  if (--budget.dirs < 0) return `${gitDir} has more submodules than the gate reads`;
  const dirs = [gitDir];
  const commondir = join(gitDir, 'commondir');
  if (stat(commondir)?.isFile()) {
    try {
      const common = readPointer(commondir).trim();
      if (common) dirs.push(resolve(gitDir, common));
    } catch {
      return `${commondir} cannot be read`;
    }
  }
  for (const dir of dirs) {
    for (const name of ['config', 'config.worktree']) {
      const risk = fileRisk(join(dir, name), 0);
      if (risk) return risk;
    }
    // git status may rewrite the index, which runs this hook.
    const hook = join(dir, 'hooks', 'post-index-change');
    const st = stat(hook);
    if (st && st.mode & 0o111) return `${hook} is a hook git runs when a read refreshes the index`;
  }
  // Submodule git dirs (absorbed into modules/, nested as deep as the submodules are).
  if (depth < 8) {
    for (const dir of dirs) {
      const modules = join(dir, 'modules');
      if (!stat(modules)?.isDirectory()) continue;
      const risk = modulesRisk(modules, budget, depth);
      if (risk) return risk;
    }
  }
  return undefined;
}

/** Every git dir under `modules/` (a submodule named `a/b` lives in `modules/a/b`). */
function modulesRisk(dir: string, budget: { dirs: number }, depth: number): string | undefined {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return `${dir} cannot be read, so the gate cannot check its submodules' configs`;
  }
  for (const name of entries) {
    const path = join(dir, name);
    if (!stat(path)?.isDirectory()) continue;
    if (--budget.dirs < 0) return `${dir} has more submodules than the gate reads`;
    const risk = isGitDir(path) ? gitDirRisk(path, budget, depth + 1) : modulesRisk(path, budget, depth + 1);
    if (risk) return risk;
  }
  return undefined;
}

/** Submodules checked out with a `.git` of their own, at the paths `.gitmodules` names. */
function submoduleRisk(workTree: string, budget: { dirs: number }): string | undefined {
  const file = join(workTree, '.gitmodules');
  if (!stat(file)?.isFile()) return undefined;
  const parsed = parsedFile(file);
  if (!parsed) return undefined;
  if ('error' in parsed) return `${file}: ${parsed.error}`;
  for (const e of parsed.entries) {
    if (e.key !== 'path' || !e.section.startsWith('submodule.') || e.value === null) continue;
    const discovered = discover(resolve(workTree, e.value));
    if (!discovered || 'risk' in discovered) {
      if (discovered) return discovered.risk;
      continue;
    }
    if (discovered.workTree !== resolve(workTree, e.value)) continue;
    const risk = gitDirRisk(discovered.gitDir, budget, 1);
    if (risk) return risk;
  }
  return undefined;
}

// git's config grammar lives in @conch/sandbox (the kernel policy and the plant detector read configs
// too); it is re-exported here as before.
export { parseGitConfig, type ConfigEntry };

const parseCache = new Map<
  string,
  { mtimeMs: number; size: number; ino: number; parsed: ReturnType<typeof parseGitConfig> | undefined }
>();

/** A config file parsed (cached by its stat); undefined when it does not exist. */
function parsedFile(path: string): ReturnType<typeof parseGitConfig> | undefined {
  const st = stat(path);
  if (!st) return undefined;
  if (!st.isFile()) return { error: `${path} is not a file` };
  const hit = parseCache.get(path);
  if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size && hit.ino === st.ino) return hit.parsed;
  let parsed: ReturnType<typeof parseGitConfig>;
  try {
    parsed = parseGitConfig(readRegularFileSync(path, { maxBytes: MAX_CONFIG_BYTES, encoding: 'latin1' }));
  } catch {
    parsed = { error: `${path} cannot be read` };
  }
  if (parseCache.size > 512) parseCache.clear();
  parseCache.set(path, { mtimeMs: st.mtimeMs, size: st.size, ino: st.ino, parsed });
  return parsed;
}

/** The first risk of a config file and the files it includes (git follows up to 10 levels). */
function fileRisk(path: string, depth: number): string | undefined {
  const parsed = parsedFile(path);
  if (!parsed) return undefined;
  if ('error' in parsed) return `${path}: ${parsed.error}`;
  for (const e of parsed.entries) {
    const risk = entryRisk(e, path);
    if (risk) return risk;
    if (e.key === 'path' && (e.section === 'include' || e.section.startsWith('includeif.'))) {
      if (e.value === null) return `${path} includes a config without a path`;
      if (depth >= 10) return `${path} includes configs nested deeper than git reads them`;
      const target = includeTarget(e.value, path);
      if (!target) return `${path} includes ${e.value}, a path the gate cannot resolve`;
      const inner = fileRisk(target, depth + 1);
      if (inner) return inner;
    }
  }
  return undefined;
}

/** Where an include path points, resolved as git resolves it (relative to the including file). */
function includeTarget(value: string, from: string): string | undefined {
  if (value.startsWith('~/')) return join(process.env.HOME ?? homedir(), value.slice(2));
  if (value.startsWith('%(prefix)/') || value.startsWith('~')) return undefined;
  return isAbsolute(value) ? value : resolve(dirname(from), value);
}

function entryRisk(e: ConfigEntry, path: string): string | undefined {
  const key = `${e.section}.${e.key}`;
  const value = e.value ?? 'true';
  if (key === 'core.fsmonitor' && /^(false|no|off|0|)$/i.test(value.trim())) return undefined;
  if (key === 'log.showsignature' && /^(false|no|off|0)$/i.test(value.trim())) return undefined;
  // git never lets an alias shadow a built-in command, and only built-in reads are allowed.
  if (/^alias\./i.test(key)) return undefined;
  // An include is followed (fileRisk), not a risk of its own.
  if (e.key === 'path' && (e.section === 'include' || e.section.startsWith('includeif.'))) return undefined;
  if (GIT_EXEC_KEYS.test(key)) return `${path} sets ${key}, which makes git run a program`;
  return undefined;
}

/** The first key of a git config text that makes git run a program, as a reason (includes not followed). */
export function configRisk(text: string, path = 'the repository config'): string | undefined {
  const parsed = parseGitConfig(text);
  if ('error' in parsed) return `${path}: ${parsed.error}`;
  for (const e of parsed.entries) {
    const risk = entryRisk(e, path);
    if (risk) return risk;
  }
  return undefined;
}

// What a command executes (executed-files.ts) finds repositories and their includes the same way.
export { discover as discoverRepository, includeTarget };
