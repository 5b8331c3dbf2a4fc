import { createHash } from 'node:crypto';
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  watch,
  type Dirent,
  type FSWatcher,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import type { KernelPolicy, Logger } from '@conch/core';
import {
  ENV_FILE,
  RC_FILES,
  SYSTEM_RC,
  SYSTEM_RC_DIRS,
  TOOL_CONFIG_DIRS,
  TOOL_CONFIG_FILES,
  type PathContext,
} from './paths.js';

/**
 * How the kernel is told: the sandbox policy, in one place.
 *
 * The gate decides what a command intends and needs; this module turns the permission config into
 * what bubblewrap enforces around every command (@conch/process `workspace-write` profile):
 *
 * - **writable roots**: the workspace, the host's `writableRoots`, the git directory of a
 *   repository that encloses the workspace (so `git commit` works from a package directory), and a
 *   sandbox-private cache directory per workspace that tools' caches are pointed at (npm, pip, uv,
 *   yarn, pnpm, go, XDG) — never the user's real caches, which code outside the sandbox reads;
 * - **read-only paths**, found by a bounded walk of every writable root, at any depth: `.env*`
 *   files, the files and directories the user's own tools run or read outside any sandbox
 *   (`.vscode/`, `.idea/`, `.claude/`, `.gemini/`, `.cursor/`, `.mcp.json`, `.gitmodules`,
 *   `.ripgreprc`), `.ssh/`, shell and git start-up files, `protectedFiles` (default `Gemfile`), the
 *   host's protected globs, and in **every git directory git will open** — `.git` directories,
 *   nested repositories, bare repositories, the targets of `.git` files (`gitdir:`), their
 *   `commondir`, `.git/modules/**` and `.git/worktrees/*` — the hooks, `config`,
 *   `config.worktree` and the pointer files (`commondir`, `gitdir`); plus hard links of protected
 *   files found under another name;
 * - **pinned paths**: each git directory is bound over itself, so it cannot be renamed away from
 *   the protections inside it (`mv .git x; mkdir .git/hooks`).
 *
 * Fail closed: a `gitdir:` pointer that cannot be resolved the way git resolves it makes the
 * nearest existing directory of its target read-only; a walk that runs out of budget makes every
 * directory it did not visit read-only (collapsed to parents beyond a mount budget).
 *
 * What the kernel cannot do: a protected name that does not exist when the sandbox starts (a new
 * `.env.local`, a first `.vscode/`) can be created inside the sandbox; the parser denies the
 * writes it can see, and the next sandbox protects the file (the walk is redone when a watched
 * directory changes). `node_modules` is not walked (installs rewrite it; a repository inside one
 * is not protected).
 */

/** Entries one walk reads at most before it fails closed on what is left. */
const WALK_BUDGET = 200_000;
/** Read-only and pinned mounts at most; beyond this, unvisited directories collapse to parents. */
const MOUNT_BUDGET = 4_000;
/** Directories watched for changes at most (beyond, the policy is re-walked on every call). */
const WATCH_BUDGET = 4_096;

/** Start-up files and directories in the home directory kept read-only (one list with the parser's). */
const HOME_ENTRIES = [
  ...RC_FILES,
  '.bashrc.d',
  '.zshrc.d',
  '.ssh',
  '.config/git',
  '.config/fish',
  '.config/environment.d',
];
const SYSTEM_ENTRIES = [...SYSTEM_RC, ...SYSTEM_RC_DIRS.map((dir) => dir.replace(/\/$/, ''))];
/** Files in a git directory that make git run code or open another directory. */
const GIT_PROTECTED = ['hooks', 'config', 'config.worktree', 'commondir', 'gitdir'];

export type SandboxMode = KernelPolicy['mode'];

export interface KernelPolicyOptions {
  mode: SandboxMode;
  paths: PathContext;
  /** The host's extra writable roots (resolved). */
  writableRoots?: readonly string[];
  /** The sandbox-private cache directory (default: per workspace under the user's cache dir). */
  cacheDir?: string;
  logger?: Logger;
  /** Walk budget in directory entries (tests). */
  walkBudget?: number;
}

/** `$XDG_CACHE_HOME/conch/sandbox/<hash of the workspace>` (or under `~/.cache`). */
export function defaultSandboxCacheDir(workspaceRoot: string, home = homedir()): string {
  const base = process.env.XDG_CACHE_HOME || join(home, '.cache');
  const id = createHash('sha256').update(workspaceRoot).digest('hex').slice(0, 16);
  return join(base, 'conch', 'sandbox', id);
}

/**
 * Where tools keep caches and state outside the workspace, pointed into the sandbox's cache
 * directory: each tool works inside the sandbox without touching the user's own caches.
 */
export function sandboxEnv(cacheDir: string): Record<string, string> {
  return {
    TMPDIR: '/tmp',
    XDG_CACHE_HOME: join(cacheDir, 'xdg-cache'),
    XDG_STATE_HOME: join(cacheDir, 'xdg-state'),
    npm_config_cache: join(cacheDir, 'npm'),
    npm_config_update_notifier: 'false',
    npm_config_store_dir: join(cacheDir, 'pnpm-store'),
    YARN_CACHE_FOLDER: join(cacheDir, 'yarn'),
    PIP_CACHE_DIR: join(cacheDir, 'pip'),
    UV_CACHE_DIR: join(cacheDir, 'uv'),
    POETRY_CACHE_DIR: join(cacheDir, 'poetry'),
    GOCACHE: join(cacheDir, 'go-build'),
    GOMODCACHE: join(cacheDir, 'go-mod'),
    GOPATH: join(cacheDir, 'go'),
    CARGO_TARGET_DIR_HINT: '',
    HISTFILE: join(cacheDir, 'shell_history'),
    PYTHON_HISTORY: join(cacheDir, 'python_history'),
    NODE_REPL_HISTORY: join(cacheDir, 'node_repl_history'),
    LESSHISTFILE: '-',
  };
}

function real(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

const inside = (path: string, dir: string) =>
  path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/** The repository directory `.git` file points at, as git reads it (`gitdir: <path>`, relative to the file). */
function gitFileTarget(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const m = /^gitdir: (.+?)\s*$/m.exec(text);
  if (!m) return undefined;
  return resolve(dirname(file), m[1]!);
}

/** Whether a directory's entries are those of a git directory (a bare repository, a module dir). */
function looksLikeGitDir(names: ReadonlySet<string>): boolean {
  return names.has('HEAD') && names.has('objects') && names.has('refs');
}

interface Walked {
  readOnly: Set<string>;
  pinned: Set<string>;
  writable: Set<string>;
  dirs: string[];
  complete: boolean;
}

/**
 * Builds the kernel policy, caches it, and watches the directories it walked: a change in any of
 * them (a new `.env`, a nested repository cloned) marks it stale, and the next call walks again.
 */
export class KernelPolicyBuilder {
  private readonly options: KernelPolicyOptions;
  private readonly cacheDir: string;
  private cached: KernelPolicy | undefined;
  private watchers: FSWatcher[] = [];
  private stale = true;
  private unwatched = false;
  private disposed = false;

  constructor(options: KernelPolicyOptions) {
    this.options = options;
    this.cacheDir =
      options.cacheDir ?? defaultSandboxCacheDir(options.paths.workspaceRoot, options.paths.home);
  }

  /** The policy now (walks again only after a change in a walked directory). */
  policy(): KernelPolicy {
    if (this.cached && !this.stale && !this.unwatched) return this.cached;
    this.cached = this.build();
    return this.cached;
  }

  dispose(): void {
    this.disposed = true;
    this.closeWatchers();
  }

  private closeWatchers(): void {
    for (const w of this.watchers) w.close();
    this.watchers = [];
  }

  private build(): KernelPolicy {
    const { mode, paths } = this.options;
    const readOnly = new Set<string>();
    const add = (path: string) => {
      if (lstatSync(path, { throwIfNoEntry: false })) readOnly.add(path);
    };
    for (const entry of HOME_ENTRIES) add(join(paths.home, entry));
    for (const entry of SYSTEM_ENTRIES) add(entry);
    if (mode === 'off') {
      // The parser carries the guarantee; the kernel keeps the protected paths it finds in the
      // workspace read-only behind it, for every command (approved ones included).
      const walked = this.walk([real(paths.workspaceRoot) ?? paths.workspaceRoot]);
      for (const p of walked.readOnly) readOnly.add(p);
      this.watch(walked.dirs);
      this.stale = false;
      return { mode, writableRoots: [], readOnlyPaths: [...readOnly].sort(), pinnedPaths: [], env: {} };
    }
    const env = sandboxEnv(this.cacheDir);
    if (mode === 'workspace-write') {
      try {
        mkdirSync(this.cacheDir, { recursive: true, mode: 0o700 });
        for (const key of ['XDG_CACHE_HOME', 'XDG_STATE_HOME', 'npm_config_cache', 'PIP_CACHE_DIR'] as const)
          mkdirSync(env[key]!, { recursive: true, mode: 0o700 });
      } catch (error) {
        this.options.logger?.warn(
          { err: error, cacheDir: this.cacheDir },
          'sandbox: the private cache directory could not be made; tools that cache outside the workspace will fail',
        );
      }
    }
    const roots =
      mode === 'workspace-write'
        ? [paths.workspaceRoot, ...(this.options.writableRoots ?? [])].map((r) => real(r) ?? r)
        : [paths.workspaceRoot].map((r) => real(r) ?? r);
    const walked = this.walk(roots);
    for (const p of walked.readOnly) readOnly.add(p);
    const enclosing = mode === 'workspace-write' ? this.enclosingGitDir(roots[0]!) : undefined;
    const pinned = new Set(walked.pinned);
    const writable = new Set(mode === 'workspace-write' ? roots : []);
    if (mode === 'workspace-write') {
      if (real(this.cacheDir)) writable.add(real(this.cacheDir)!);
      if (enclosing) {
        // Writable (objects, index, refs) with its hooks and config read-only, like any git dir.
        writable.add(enclosing);
        const sub = this.walkGitDir(enclosing);
        for (const p of sub.readOnly) readOnly.add(p);
        for (const p of sub.pinned) pinned.add(p);
      }
      for (const p of walked.writable) writable.add(p);
    }
    this.watch(walked.dirs);
    this.stale = false;
    const policy: KernelPolicy = {
      mode,
      writableRoots: [...writable].sort(),
      readOnlyPaths: [...readOnly].sort(),
      pinnedPaths: mode === 'workspace-write' ? [...pinned].sort() : [],
      env,
    };
    if (!walked.complete)
      this.options.logger?.warn(
        { budget: this.options.walkBudget ?? WALK_BUDGET },
        'sandbox: the workspace is too large to search for protected paths in full; the directories not searched are read-only',
      );
    return policy;
  }

  /** A git directory of a repository above the workspace (the workspace is one of its subdirectories). */
  private enclosingGitDir(workspace: string): string | undefined {
    for (let dir = dirname(workspace); ; dir = dirname(dir)) {
      const dotGit = join(dir, '.git');
      const st = lstatSync(dotGit, { throwIfNoEntry: false });
      if (st?.isDirectory()) return real(dotGit);
      if (st?.isFile()) {
        const target = gitFileTarget(dotGit);
        return target ? real(target) : undefined;
      }
      if (dir === '/' || dir === this.options.paths.home) return undefined;
    }
  }

  /** The protected entries of one git directory (and of the module and worktree git dirs inside it). */
  private walkGitDir(gitDir: string, depth = 0): { readOnly: string[]; pinned: string[] } {
    const readOnly: string[] = [];
    const pinned = [gitDir];
    let entries: Dirent[];
    try {
      entries = readdirSync(gitDir, { withFileTypes: true });
    } catch {
      return { readOnly, pinned: [] };
    }
    for (const e of entries) {
      const path = join(gitDir, e.name);
      if (GIT_PROTECTED.includes(e.name)) readOnly.push(path);
      if (e.name === 'commondir' && e.isFile() && depth < 4) {
        // A worktree's private git dir: hooks and config live in the common dir it names.
        try {
          const common = real(resolve(gitDir, readFileSync(path, 'utf8').trim()));
          if (common) {
            const sub = this.walkGitDir(common, depth + 1);
            readOnly.push(...sub.readOnly);
            pinned.push(...sub.pinned);
          }
        } catch {
          // unreadable: the pointer itself is read-only
        }
      }
      if ((e.name === 'modules' || e.name === 'worktrees') && e.isDirectory() && depth < 8) {
        // Every git dir below (modules nest: modules/a/modules/b).
        const stack = [path];
        while (stack.length > 0) {
          const dir = stack.pop()!;
          let inner: Dirent[];
          try {
            inner = readdirSync(dir, { withFileTypes: true });
          } catch {
            continue;
          }
          const names = new Set(inner.map((x) => x.name));
          if (looksLikeGitDir(names) || names.has('commondir') || names.has('gitdir')) {
            const sub = this.walkGitDir(dir, depth + 1);
            readOnly.push(...sub.readOnly);
            pinned.push(...sub.pinned);
            if (!names.has('modules')) continue;
          }
          for (const x of inner) if (x.isDirectory()) stack.push(join(dir, x.name));
        }
      }
    }
    return { readOnly, pinned };
  }

  /** Walks the writable roots for protected entries (bounded; fails closed on what it did not visit). */
  private walk(roots: readonly string[]): Walked {
    const { paths } = this.options;
    const out: Walked = {
      readOnly: new Set(),
      pinned: new Set(),
      writable: new Set(),
      dirs: [],
      complete: true,
    };
    let budget = this.options.walkBudget ?? WALK_BUDGET;
    const queue: { dir: string; root: string }[] = roots.map((r) => ({ dir: r, root: r }));
    const protect = (path: string) => out.readOnly.add(path);
    const gitDir = (dir: string) => {
      const sub = this.walkGitDir(dir);
      for (const p of sub.readOnly) protect(p);
      for (const p of sub.pinned) if (roots.some((r) => inside(p, r))) out.pinned.add(p);
    };
    const extraMatch = (path: string) => {
      const rel = relative(paths.workspaceRoot, path);
      const relOk = !rel.startsWith('..') && !isAbsolute(rel);
      return paths.extra.some((g) => g.test(path) || (relOk && g.test(rel)));
    };
    for (let next = 0; next < queue.length; next++) {
      const { dir, root } = queue[next]!;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      budget -= entries.length;
      if (budget < 0) {
        out.complete = false;
        this.failClosed([dir, ...queue.slice(next + 1).map((q) => q.dir)], out, roots);
        break;
      }
      out.dirs.push(dir);
      const names = new Set(entries.map((e) => e.name));
      if (dir !== root && looksLikeGitDir(names)) {
        // A bare repository (or a git dir under another name): git opens it with `-C` or as cwd.
        gitDir(dir);
        continue;
      }
      for (const e of entries) {
        const path = join(dir, e.name);
        const name = e.name;
        if (e.isDirectory()) {
          if (name === '.git') gitDir(path);
          else if (
            TOOL_CONFIG_DIRS.has(name) ||
            name === '.ssh' ||
            name === '.bashrc.d' ||
            name === '.zshrc.d'
          )
            protect(path);
          else if (extraMatch(path)) protect(path);
          else if (name !== 'node_modules') queue.push({ dir: path, root });
          continue;
        }
        const protectedName =
          ENV_FILE.test(name) ||
          TOOL_CONFIG_FILES.has(name) ||
          RC_FILES.has(name) ||
          paths.names?.has(name) === true ||
          extraMatch(path);
        if (name === '.git' && (e.isFile() || e.isSymbolicLink())) {
          // A pointer to the real git dir (worktree, submodule): the pointer itself is read-only,
          // and the directory it names is protected like any git dir.
          protect(path);
          const target = e.isFile() ? gitFileTarget(path) : real(path);
          const resolved = target ? real(target) : undefined;
          if (resolved && statSync(resolved, { throwIfNoEntry: false })?.isDirectory()) gitDir(resolved);
          else if (target) this.failClosed([target], out, roots);
          continue;
        }
        if (protectedName) protect(path);
      }
    }
    this.protectHardLinks(out, roots);
    return out;
  }

  /**
   * A pointer that cannot be resolved, or directories the walk could not visit: the nearest
   * existing directory of each is made read-only, collapsed towards the writable root when there
   * are more than the mount budget allows.
   */
  private failClosed(targets: string[], out: Walked, roots: readonly string[]): void {
    let dirs = [...new Set(targets.map((t) => nearestExisting(t)))].filter((d) =>
      roots.some((r) => inside(d, r)),
    );
    while (dirs.length > MOUNT_BUDGET / 2) {
      const parents = new Set(dirs.map((d) => (roots.includes(d) ? d : dirname(d))));
      dirs = [...parents].filter((d, _, all) => !all.some((o) => o !== d && inside(d, o)));
    }
    for (const d of dirs) out.readOnly.add(d);
    if (dirs.length > 0)
      this.options.logger?.warn(
        { paths: dirs.slice(0, 10) },
        'sandbox: made read-only because what is inside could not be checked (an unresolvable gitdir: pointer, or a walk over budget)',
      );
  }

  /**
   * A file inside the workspace that is a hard link of a protected file (made outside the sandbox:
   * inside, a link across mounts fails with EXDEV) would let writes through to it. Only when some
   * protected file has more than one link are the workspace's files stat'ed to find its twin.
   */
  private protectHardLinks(out: Walked, roots: readonly string[]): void {
    const linked = new Set<string>();
    const candidates = [
      ...HOME_ENTRIES.map((e) => join(this.options.paths.home, e)),
      ...listDir(join(this.options.paths.home, '.ssh')),
      ...out.readOnly,
    ];
    for (const path of candidates) {
      const st = statSync(path, { throwIfNoEntry: false });
      if (st?.isFile() && st.nlink > 1) linked.add(`${st.dev}:${st.ino}`);
    }
    if (linked.size === 0) return;
    let budget = this.options.walkBudget ?? WALK_BUDGET;
    for (const dir of out.dirs) {
      if (!roots.some((r) => inside(dir, r))) continue;
      for (const name of listNames(dir)) {
        if (--budget < 0) return;
        const path = join(dir, name);
        const st = lstatSync(path, { throwIfNoEntry: false });
        if (st?.isFile() && st.nlink > 1 && linked.has(`${st.dev}:${st.ino}`)) out.readOnly.add(path);
      }
    }
  }

  /** Each walked directory is watched: any change there marks the policy stale. */
  private watch(dirs: readonly string[]): void {
    this.closeWatchers();
    if (this.disposed) return;
    this.unwatched = dirs.length > WATCH_BUDGET;
    if (this.unwatched) return;
    const onChange = () => {
      this.stale = true;
    };
    for (const dir of dirs) {
      try {
        const w = watch(dir, { persistent: false }, onChange);
        w.on('error', onChange);
        this.watchers.push(w);
      } catch {
        // ENOSPC (inotify limit) or gone: fall back to walking on every call
        this.unwatched = true;
        this.closeWatchers();
        return;
      }
    }
  }
}

function nearestExisting(path: string): string {
  for (let p = path; ; p = dirname(p)) {
    const r = real(p);
    if (r) return r;
    if (p === '/') return '/';
  }
}

function listDir(dir: string): string[] {
  return listNames(dir).map((n) => join(dir, n));
}

function listNames(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
