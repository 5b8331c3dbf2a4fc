import { createHash } from 'node:crypto';
import {
  accessSync,
  constants as fsConstants,
  closeSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  writeSync,
  readdirSync,
  realpathSync,
  watch,
  type Dirent,
  type FSWatcher,
} from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import type { KernelPolicy, Logger } from '@conch/core';
import {
  HG_CONFIG_FILES,
  HG_PROTECTED,
  isEnvSecretName,
  isToolConfigFileName,
  RC_FILES,
  SYSTEM_RC,
  SYSTEM_RC_DIRS,
  TOOL_CONFIG_DIRS,
} from './protected-names.js';
import {
  HOME_SANITIZED,
  HOME_SANITIZED_DIRS,
  sanitizeConfig,
  sanitizedDirFiles,
  toolchainPaths,
  trackedUnchanged,
  type SanitizeKind,
} from './home-view.js';
import { KEPT_ENV } from './env-values.js';
import { hookDelegates, type HookManagerIo } from './hook-managers.js';
import { configValues } from './git-config-grammar.js';
import { envrcLoads } from './direnv.js';
import { parseHgrc } from './hgrc-grammar.js';
import { looksLikeGitDir } from './plants.js';
import { nameGlobsRegExp } from './profile.js';
import { lstatIf, statIf } from './stat-if.js';
import { isConfigEntryPath } from './guard.js';
import { readRegularFileSync, safeStatSync } from '@conch/core';

/**
 * How the kernel is told: the sandbox policy, in one place.
 *
 * The gate decides what a command intends and needs; this module turns the permission config into
 * what bubblewrap enforces around every command (the `workspace-write` profile of profile.ts,
 * which @conch/process applies):
 *
 * - **writable roots**: the workspace, the host's `writableRoots`, and a sandbox-private cache
 *   directory per workspace that tools' caches are pointed at (npm, pip, uv, yarn, pnpm, go, XDG) —
 *   never the user's real caches, which code outside the sandbox reads. (A repository that encloses
 *   the workspace stays read-only: its history, written from here, would put files on disk outside
 *   the workspace at the user's next checkout. The host adds its git dir to writableRoots to allow it.)
 * - **read-only paths**, found by a bounded walk of every writable root, at any depth: `.env*`
 *   files, the files and directories the user's own tools run or read outside any sandbox
 *   (`.vscode/`, `.idea/`, `.claude/`, `.gemini/`, `.cursor/`, `.mcp.json`, `.gitmodules`,
 *   `.ripgreprc`), `.ssh/`, shell and git start-up files, `protectedFiles` (default `Gemfile`, `Gemfile.lock`, `.aws/`), the
 *   host's protected globs, and in **every git directory git will open** — `.git` directories,
 *   nested repositories, bare repositories, the targets of `.git` files (`gitdir:`), their
 *   `commondir`, `.git/modules/**` and `.git/worktrees/*` — the hooks, `config`,
 *   `config.worktree` and the pointer files (`commondir`, `gitdir`), and the hooks directory a
 *   config names (`core.hooksPath`, husky's `.husky/_`); in every Mercurial `.hg` directory, its
 *   `hgrc`, `hgrc-not-shared` and `sharedpath` (made or not) and the files its config includes;
 *   what an `.envrc` loads (`source_env`, `dotenv`, `source`: direnv.ts), made or not;
 *   symlinks carrying a protected name
 *   (`.claude -> shared/claude`) protect what they name; every file with more than one hard link
 *   (it shares its inode with a name the mounts cannot see: a hook, a file outside, another
 *   project's copy), and a pnpm `node_modules/.pnpm` linked into the user's package store;
 * - **pinned paths**: each git and `.hg` directory, and every directory between a writable root and a
 *   protected path, is bound over itself, so it cannot be renamed away from the protections inside
 *   it (`mv .git x; mkdir .git/hooks`, `mv sub x; cp -a x sub`).
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
  '.config/hg',
  '.config/fish',
  '.config/environment.d',
];
const SYSTEM_ENTRIES = [...SYSTEM_RC, ...SYSTEM_RC_DIRS.map((dir) => dir.replace(/\/$/, ''))];
/**
 * Credentials in the home directory, hidden inside the sandbox (directories empty, files
 * unreadable): keys, cloud and registry tokens, keyrings.
 */
export const SECRET_HOME_PATHS: readonly string[] = [
  '.ssh',
  '.aws',
  '.azure',
  '.config/gcloud',
  '.config/gh',
  '.config/hub',
  '.netrc',
  '.npmrc',
  '.yarnrc',
  '.pypirc',
  '.docker/config.json',
  '.kube',
  '.gnupg',
  '.git-credentials',
  '.cargo/credentials',
  '.cargo/credentials.toml',
  '.gem/credentials',
  '.local/share/keyrings',
  '.password-store',
  // databases, vaults, object stores, deploy tools. (Build tools' own config files that may hold a
  // registry token — ~/.m2/settings.xml, ~/.gradle/gradle.properties, ~/.yarnrc.yml, pip.conf,
  // ~/.bundle/config — are not masked: a masked file is unreadable, and maven, gradle, yarn and
  // pip stop on an unreadable config of theirs.)
  '.pgpass',
  '.my.cnf',
  '.mylogin.cnf',
  '.vault-token',
  '.terraform.d/credentials.tfrc.json',
  '.config/rclone',
  '.s3cfg',
  '.boto',
  '.composer/auth.json',
  '.config/composer/auth.json',
  '.config/hcloud',
  '.config/doctl',
  '.fly',
  '.vercel',
  '.netlify',
  '.config/heroku',
  '.databrickscfg',
  '.snowflake',
  // other agents' credentials and their MCP servers' keys
  '.claude/.credentials.json',
  '.claude.json',
  '.codex/auth.json',
  '.config/github-copilot',
  '.gemini/oauth_creds.json',
  '.gemini/google_accounts.json',
  '.local/share/opencode/auth.json',
  '.cursor/mcp.json',
  '.codeium',
  '.continue/config.json',
  '.aider.conf.yml',
  // shell and REPL histories (tokens typed on command lines)
  '.bash_history',
  '.zsh_history',
  '.zhistory',
  '.histfile',
  '.local/share/fish/fish_history',
  '.psql_history',
  '.mysql_history',
  '.python_history',
  '.node_repl_history',
  '.rediscli_history',
  '.sqlite_history',
  '.irb_history',
  '.config/fish/fish_history',
  // browser profiles (cookies, saved logins)
  '.config/google-chrome',
  '.config/chromium',
  '.config/BraveSoftware',
  '.config/microsoft-edge',
  '.mozilla',
];

/**
 * The machine's own secrets: unreadable to an ordinary user already, readable when the host runs
 * as root (a container, CI). Masked when this process can read them.
 */
export const SYSTEM_SECRET_PATHS: readonly string[] = [
  '/etc/shadow',
  '/etc/shadow-',
  '/etc/gshadow',
  '/etc/gshadow-',
  '/etc/security/opasswd',
  '/etc/ssl/private',
  '/etc/krb5.keytab',
  '/var/lib/sss/secrets',
];

/** Private keys of the host's ssh server (`/etc/ssh/ssh_host_*_key`), when readable. */
function systemSecrets(): string[] {
  const out = [...SYSTEM_SECRET_PATHS];
  try {
    for (const name of readdirSync('/etc/ssh'))
      if (/^ssh_host_.*_key$/.test(name)) out.push(join('/etc/ssh', name));
  } catch {
    // no ssh server
  }
  return out.filter((p) => {
    try {
      accessSync(p, fsConstants.R_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * Names of environment variables that carry credentials: sandboxed commands (and the sandbox
 * itself: its pid 1 and supervisor) never get them. Globs (`*` any run of characters).
 */
export const HIDDEN_ENV: readonly string[] = [
  '*TOKEN*',
  '*SECRET*',
  '*PASSWORD*',
  '*PASSWD*',
  '*CREDENTIAL*',
  '*API_KEY*',
  '*APIKEY*',
  '*ACCESS_KEY*',
  '*PRIVATE_KEY*',
  '*_KEY',
  '*_AUTH',
  '*_AUTH_*',
  '*_DSN',
  '*DATABASE_URL',
  'AWS_*',
  'AZURE_*',
  'GOOGLE_*',
  'GCP_*',
  'GITHUB_*',
  'GH_*',
  'GITLAB_*',
  'OPENAI_*',
  'ANTHROPIC_*',
  'HF_*',
  'HUGGING_FACE_*',
  'VAULT_*',
  'SSH_AUTH_SOCK',
  'SSH_AGENT_PID',
  'GPG_AGENT_INFO',
  'KRB5CCNAME',
];

/** Names never hidden whatever a pattern says (a sandbox needs them): defined beside the value test. */
export { KEPT_ENV };

/** Files in a git directory that make git run code or open another directory. */
const GIT_PROTECTED = ['hooks', 'config', 'config.worktree', 'commondir', 'gitdir'];

export type SandboxMode = KernelPolicy['mode'];

/**
 * The paths a kernel policy is built around (@conch/permission's `PathContext` is one): the user's
 * home, the workspace, and what the host protects besides the built-in names.
 */
export interface SandboxPaths {
  home: string;
  workspaceRoot: string;
  /** The host's extra protected globs, compiled (tested on absolute and workspace-relative paths). */
  extra: readonly { test(path: string): boolean }[];
  /**
   * Names protected at any depth, a file or a directory with everything in it (config
   * `protectedFiles`, default `Gemfile`, `Gemfile.lock`, `.aws`).
   */
  names?: ReadonlySet<string>;
}

export interface KernelPolicyOptions {
  mode: SandboxMode;
  paths: SandboxPaths;
  /** The permission config's `secrets`: more variables and paths hidden, or let through. */
  secrets?: {
    hideEnv: readonly string[];
    keepEnv: readonly string[];
    maskPaths: readonly string[];
    exposeDotEnv: boolean;
    /** true: the home directory is open to reads (only the deny-list hides); default closed. */
    openHome?: boolean;
  };
  /** Paths under a closed home the sandbox may read (the host's `readableRoots`, resolved). */
  readableRoots?: readonly string[];
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
    // pnpm's store defaults to $XDG_DATA_HOME/pnpm/store (npm warns about npm_config_store_dir).
    XDG_DATA_HOME: join(cacheDir, 'xdg-data'),
    YARN_CACHE_FOLDER: join(cacheDir, 'yarn'),
    PIP_CACHE_DIR: join(cacheDir, 'pip'),
    UV_CACHE_DIR: join(cacheDir, 'uv'),
    POETRY_CACHE_DIR: join(cacheDir, 'poetry'),
    GOCACHE: join(cacheDir, 'go-build'),
    GOMODCACHE: join(cacheDir, 'go-mod'),
    GOPATH: join(cacheDir, 'go'),
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

/*
 * Every file read here may be one a sandboxed command wrote (a repository it made, its hooks, a
 * .env): read as a regular file only, never opened when a FIFO or a device took the name (a FIFO
 * would block the host in open()), and within a bound (@conch/core readRegularFileSync).
 */
/** A `.git` file's or a `commondir`'s one line. */
const MAX_POINTER_BYTES = 64 * 1024;
/** A git config, and each file it includes. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/** Reads for hook-managers.ts: a hook or a config is small; a larger file is not read. */
const HOOK_IO: HookManagerIo = {
  text: (path) => {
    const st = statIf(path);
    if (!st?.isFile() || st.size > 256 * 1024) return undefined;
    try {
      return readRegularFileSync(path, { maxBytes: 256 * 1024, encoding: 'utf8' });
    } catch {
      return undefined;
    }
  },
  names: (dir) => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  },
};

const inside = (path: string, dir: string) =>
  path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/** The repository directory `.git` file points at, as git reads it (`gitdir: <path>`, relative to the file). */
function gitFileTarget(file: string): string | undefined {
  let text: string;
  try {
    text = readRegularFileSync(file, { maxBytes: MAX_POINTER_BYTES, encoding: 'utf8' });
  } catch {
    return undefined;
  }
  const m = /^gitdir: (.+?)\s*$/m.exec(text);
  if (!m) return undefined;
  return resolve(dirname(file), m[1]!);
}

interface Walked {
  readOnly: Set<string>;
  pinned: Set<string>;
  writable: Set<string>;
  dirs: string[];
  /** Regular files seen (hard-link candidates). */
  files: string[];
  /** Git directories `.git` files point at (worktrees, submodules). */
  gitTargets: string[];
  /** `.envrc` files: what they load is protected, so an edit in place re-walks (watchFiles). */
  envrcs: string[];
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
      if (lstatIf(path)) readOnly.add(path);
    };
    for (const entry of HOME_ENTRIES) add(join(paths.home, entry));
    for (const entry of SYSTEM_ENTRIES) add(entry);
    if (mode === 'off') {
      // The parser carries the guarantee; the kernel keeps the protected paths it finds in the
      // workspace read-only behind it, for every command (approved ones included).
      const walked = this.walk([real(paths.workspaceRoot) ?? paths.workspaceRoot]);
      for (const p of walked.readOnly) readOnly.add(p);
      this.watch(walked.dirs);
      this.watchFiles(walked.envrcs);
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
    const pinned = new Set(walked.pinned);
    const writable = new Set(mode === 'workspace-write' ? roots : []);
    if (mode === 'workspace-write') {
      if (real(this.cacheDir)) writable.add(real(this.cacheDir)!);
      for (const p of walked.writable) writable.add(p);
    }
    this.watch(walked.dirs);
    this.stale = false;
    // Secrets: the home directory's credentials, the host's masks, and the workspace's .env files
    // (unreadable unless the host exposes them; read-only either way).
    const secrets = this.options.secrets;
    const view = mode === 'workspace-write' ? this.homeView(writable, walked) : undefined;
    const substitutes = new Map<string, string>();
    for (const { path, kind } of view?.sanitized ?? []) {
      const source = this.substitute(path, kind);
      if (source) substitutes.set(path, source);
    }
    // An edit of a home config (in place or by an editor's rename) rewrites its copy on the next call;
    // one of an .envrc protects what it loads now on the next call.
    this.watchFiles([...(view?.sanitized ?? []).map((e) => e.path), ...walked.envrcs]);
    const masked = new Set<string>();
    for (const entry of SECRET_HOME_PATHS) {
      const path = join(paths.home, entry);
      if (substitutes.has(path)) continue;
      if (lstatIf(path)) masked.add(path);
    }
    if (mode === 'workspace-write') for (const path of systemSecrets()) masked.add(path);
    for (const entry of secrets?.maskPaths ?? []) {
      const path = entry.startsWith('~/')
        ? join(paths.home, entry.slice(2))
        : resolve(paths.workspaceRoot, entry);
      if (lstatIf(path)) masked.add(path);
    }
    if (!secrets?.exposeDotEnv) {
      for (const p of readOnly) {
        if (!isEnvSecretName(basename(p)) || !roots.some((r) => inside(p, r))) continue;
        // A file git tracks unchanged is in the repository's objects already (readable by `git
        // show`): masking it only breaks git (`commit -a`, `stash`, `diff` exit 128) and tests that
        // load it. A snapshot is shown, so a secret the user adds to it later stays outside.
        const snapshot = mode === 'workspace-write' ? this.snapshot(p) : undefined;
        if (snapshot) substitutes.set(p, snapshot);
        else masked.add(p);
      }
    }
    // Every other name of a masked file (a hard link made outside the sandbox) is masked too.
    const maskedInodes = new Set<string>();
    for (const p of masked) {
      const st = statIf(p);
      if (st?.isFile() && st.nlink > 1) maskedInodes.add(`${st.dev}:${st.ino}`);
    }
    if (maskedInodes.size > 0) {
      for (const p of walked.files) {
        const st = lstatIf(p);
        if (st?.isFile() && maskedInodes.has(`${st.dev}:${st.ino}`)) masked.add(p);
      }
    }
    // A workspace that is the home (or holds it): what the user's shells, editors, services and
    // PATH read from it stays read-only (home-config rule, guard.ts), the existing entries by mount
    // too where no guard runs; an entry holding a writable root (~/.cache with the sandbox's cache)
    // is left to the guard, which lets that root through.
    const configHomes: string[] = [];
    const homeReal = real(paths.home) ?? paths.home;
    const writableList = [...writable];
    if (mode === 'workspace-write' && writableList.some((r) => inside(homeReal, r))) {
      configHomes.push(homeReal);
      for (const entry of entriesOf(homeReal)) {
        const path = join(homeReal, entry);
        if (!isConfigEntryPath(path, homeReal)) continue;
        if (writableList.some((r) => inside(r, path))) continue;
        readOnly.add(path);
      }
    }
    const closed = view?.closed ?? [];
    const readable = view?.readable ?? [];
    // Under a closed directory only what is bound back is seen: a protection or a mask of anything
    // else there is one mount more for nothing.
    const seen = (p: string) =>
      !closed.some((c) => inside(p, c)) ||
      [...writable, ...readable].some((r) => inside(p, r)) ||
      substitutes.has(p);
    for (const p of [...readOnly]) if (!seen(p)) readOnly.delete(p);
    for (const p of [...masked]) if (!seen(p) || substitutes.has(p)) masked.delete(p);
    const policy: KernelPolicy = {
      mode,
      writableRoots: [...writable].sort(),
      readOnlyPaths: [...readOnly].sort(),
      ...(closed.length ? { closedPaths: closed, readablePaths: readable } : {}),
      ...(substitutes.size
        ? { substitutes: [...substitutes].map(([path, source]) => ({ path, source })).sort(byPath) }
        : {}),
      pinnedPaths: mode === 'workspace-write' ? [...pinned].sort() : [],
      env,
      network: mode === 'workspace-write' ? 'proxy' : 'none',
      maskedPaths: [...masked].sort(),
      hiddenEnv: [...HIDDEN_ENV, ...(secrets?.hideEnv ?? [])],
      keptEnv: [...KEPT_ENV, ...(secrets?.keepEnv ?? [])],
      // The guard (guard.ts) applies the protected names to what appears later under these roots.
      nameRoots: mode === 'workspace-write' ? [...new Set(roots)].sort() : [],
      ...(configHomes.length ? { configHomes } : {}),
      dotEnvSecrets: !secrets?.exposeDotEnv,
    };
    if (!walked.complete)
      this.options.logger?.warn(
        { budget: this.options.walkBudget ?? WALK_BUDGET },
        'sandbox: the workspace is too large to search for protected paths in full; the directories not searched are read-only',
      );
    return policy;
  }

  /**
   * What the sandbox sees of the homes (home-view.ts): the user's home, `/home` and `/root` closed
   * — unless one of them is, or is inside, a writable root (a workspace that is the home) or the
   * host opened the home — with the toolchains' entries, the host's readable roots, the project
   * that encloses the workspace and the git directories its `.git` files name bound back; and the
   * config files shown as sanitized copies (also when the home is open: their settings without
   * their credentials).
   */
  private homeView(
    writable: ReadonlySet<string>,
    walked: Walked,
  ): { closed: string[]; readable: string[]; sanitized: { path: string; kind: SanitizeKind }[] } {
    const { paths } = this.options;
    const home = real(paths.home) ?? paths.home;
    const sanitized: { path: string; kind: SanitizeKind }[] = [];
    for (const entry of HOME_SANITIZED) {
      const path = join(home, entry.path);
      if (statIf(path)?.isFile()) sanitized.push({ path, kind: entry.kind });
    }
    for (const entry of HOME_SANITIZED_DIRS)
      for (const path of sanitizedDirFiles(join(home, entry.path)))
        sanitized.push({ path, kind: entry.kind });
    const closed: string[] = [];
    if (this.options.secrets?.openHome !== true) {
      for (const dir of new Set([home, '/home', '/root'])) {
        const r = real(dir);
        if (!r || r === '/' || !safeStatSync(r).isDirectory()) continue;
        if ([...writable].some((w) => inside(r, w))) continue;
        closed.push(r);
      }
    }
    if (closed.length === 0) return { closed, readable: [], sanitized };
    const readable = new Set<string>();
    const add = (path: string) => {
      if (lstatIf(path)) readable.add(path);
    };
    for (const path of toolchainPaths(closed, home, process.env, existsPath)) readable.add(path);
    for (const root of this.options.readableRoots ?? []) add(real(root) ?? root);
    const isClosed = (p: string) => closed.some((c) => inside(p, c) && p !== c);
    // The project around a workspace under a closed home (a package of a monorepo): its
    // repository and node_modules, up to the highest directory that holds a .git or node_modules.
    for (const root of writable) {
      if (!isClosed(root)) continue;
      let top: string | undefined;
      for (let dir = dirname(root); isClosed(dir); dir = dirname(dir)) {
        if (existsPath(join(dir, '.git')) || existsPath(join(dir, 'node_modules'))) top = dir;
      }
      if (top) readable.add(top);
    }
    // The git directories `.git` files name (a worktree's main repository elsewhere in the home).
    for (const dir of walked.gitTargets) if (isClosed(dir)) readable.add(dir);
    return { closed: closed.sort(), readable: [...readable].sort(), sanitized };
  }

  /** Where substitutes are written: beside the sandbox's cache, outside every writable root. */
  private viewsDir(): string {
    return `${this.cacheDir}.views`;
  }

  /** The sanitized copy of a config (written in place, so a sandbox that binds it sees updates). */
  private substitute(path: string, kind: SanitizeKind): string | undefined {
    let text: string;
    try {
      text = readRegularFileSync(path, { maxBytes: 1 << 20, encoding: 'utf8' });
    } catch {
      return undefined;
    }
    const hidden = nameGlobsRegExp([...HIDDEN_ENV, ...(this.options.secrets?.hideEnv ?? [])]);
    const secretName = (name: string) => !KEPT_ENV.includes(name) && hidden.test(name);
    return this.writeView(`config-${basename(path)}`, path, sanitizeConfig(kind, text, secretName));
  }

  /** A tracked, unchanged `.env` file's snapshot, or undefined (it stays masked). */
  private snapshot(path: string): string | undefined {
    const content = trackedUnchanged(path);
    return content ? this.writeView(`env-${basename(path)}`, path, content) : undefined;
  }

  private writeView(label: string, path: string, content: string | Buffer): string | undefined {
    const id = createHash('sha256').update(path).digest('hex').slice(0, 16);
    const file = join(this.viewsDir(), `${label.replace(/[^A-Za-z0-9._-]/g, '_')}-${id}`);
    const bytes = typeof content === 'string' ? Buffer.from(content) : content;
    // Unchanged: left alone (a rewrite would show a reader inside a sandbox an empty file for a moment).
    try {
      if (readRegularFileSync(file, { maxBytes: bytes.length }).equals(bytes)) return file;
    } catch {
      // not written yet
    }
    try {
      mkdirSync(this.viewsDir(), { recursive: true, mode: 0o700 });
      // In place (same inode): a sandbox that bound the file sees the new content.
      const fd = openSync(file, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW, 0o600);
      try {
        ftruncateSync(fd, 0);
        for (let done = 0; done < bytes.length;)
          done += writeSync(fd, bytes, done, bytes.length - done, done);
      } finally {
        closeSync(fd);
      }
      return file;
    } catch (error) {
      this.options.logger?.warn(
        { err: error, path },
        'sandbox: a sanitized copy could not be written; the file stays hidden',
      );
      return undefined;
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
          const common = real(
            resolve(
              gitDir,
              readRegularFileSync(path, { maxBytes: MAX_POINTER_BYTES, encoding: 'utf8' }).trim(),
            ),
          );
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
      files: [],
      gitTargets: [],
      envrcs: [],
      complete: true,
    };
    let budget = this.options.walkBudget ?? WALK_BUDGET;
    const queue: { dir: string; root: string }[] = roots.map((r) => ({ dir: r, root: r }));
    const protect = (path: string) => out.readOnly.add(path);
    const gitDir = (dir: string, worktree?: string) => {
      const sub = this.walkGitDir(dir);
      for (const p of sub.readOnly) protect(p);
      for (const p of sub.pinned) if (roots.some((r) => inside(p, r))) out.pinned.add(p);
      const work = worktree ?? dirname(dir);
      const configs = gitConfigFiles(dir, paths.home);
      // Files a config includes: whatever they say is in force as if it were in .git/config
      // (read-only, and refused where missing: git skips a missing include until it is made).
      for (const p of configs.included) if (roots.some((r) => inside(p, r))) protect(p);
      // core.hooksPath (husky: .husky/_): hooks that live in the work tree.
      const named = [...new Set(configs.hooksPaths.map((p) => (isAbsolute(p) ? p : resolve(work, p))))];
      for (const hooks of named) {
        if (existsPath(hooks)) protect(hooks);
        else this.failClosed([hooks], out, roots, { notRoot: true });
      }
      // What the installed hooks of a hook manager run from the work tree (husky 9's `.husky`,
      // pre-commit's and lefthook's configs): read-only, and refused where missing (the guard
      // judges the path, so a config made later is refused too). A bare repository has no work tree.
      if (work === dir) return;
      for (const hooks of [join(configs.common, 'hooks'), ...named])
        for (const found of hookDelegates(hooks, work, HOOK_IO))
          for (const p of [...found.files, ...found.dirs]) if (roots.some((r) => inside(p, r))) protect(p);
    };
    // A Mercurial repository: its config and share pointer, made or not (the guard refuses a new
    // one), every file its config includes, and the directory pinned. Its store is not walked.
    const hgDir = (dir: string) => {
      for (const name of HG_PROTECTED) protect(join(dir, name));
      for (const p of hgrcIncludes(dir, paths.home)) if (roots.some((r) => inside(p, r))) protect(p);
      if (roots.some((r) => inside(dir, r))) out.pinned.add(dir);
    };
    const extraMatch = (path: string) => {
      const rel = relative(paths.workspaceRoot, path);
      const relOk = !rel.startsWith('..') && !isAbsolute(rel);
      return paths.extra.some((g) => g.test(path) || (relOk && g.test(rel)));
    };
    const protectedDirName = (name: string) =>
      TOOL_CONFIG_DIRS.has(name) ||
      name === '.ssh' ||
      name === '.bashrc.d' ||
      name === '.zshrc.d' ||
      paths.names?.has(name) === true;
    const protectedFileName = (name: string) =>
      isEnvSecretName(name) ||
      isToolConfigFileName(name) ||
      RC_FILES.has(name) ||
      paths.names?.has(name) === true;
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
      if (looksLikeGitDir(names)) {
        // A bare repository (or a git dir under another name, or one the host made a writable
        // root): git opens it with `-C` or as cwd.
        gitDir(dir, dir);
        continue;
      }
      for (const e of entries) {
        const path = join(dir, e.name);
        const name = e.name;
        if (e.isDirectory()) {
          if (name === '.git') gitDir(path);
          else if (name === '.hg') hgDir(path);
          else if (protectedDirName(name) || extraMatch(path)) protect(path);
          else if (name === 'node_modules') this.packageStoreLinks(path, out);
          else queue.push({ dir: path, root });
          continue;
        }
        if (name === '.git' && (e.isFile() || e.isSymbolicLink())) {
          // A pointer to the real git dir (worktree, submodule): the pointer itself is read-only,
          // and the directory it names is protected like any git dir.
          protect(path);
          const target = e.isFile() ? gitFileTarget(path) : real(path);
          const resolved = target ? real(target) : undefined;
          if (resolved && statIf(resolved)?.isDirectory()) {
            gitDir(resolved, dir);
            out.gitTargets.push(resolved);
            const common = real(join(resolved, readTrimmed(join(resolved, 'commondir')) ?? '.'));
            if (common && common !== resolved) out.gitTargets.push(common);
          } else if (target) this.failClosed([target], out, roots);
          continue;
        }
        if (e.isFile()) out.files.push(path);
        // What an .envrc loads runs at the user's next cd like the .envrc itself (direnv.ts).
        if (name === '.envrc' && e.isFile()) {
          out.envrcs.push(path);
          const text = configText(path);
          if (text !== undefined)
            for (const p of envrcLoads(path, text, paths.home, (d) => statIf(d)?.isDirectory() === true))
              if (roots.some((r) => inside(p, r))) protect(p);
        }
        // A symlink carrying a protected name (`.claude -> shared/claude`) protects what it names.
        if (protectedFileName(name) || extraMatch(path) || (e.isSymbolicLink() && protectedDirName(name)))
          protect(path);
      }
    }
    this.protectHardLinks(out, roots);
    this.pinAncestors(out, roots);
    return out;
  }

  /**
   * A `node_modules` whose files are hard links into a package store shared by every project on
   * the machine (pnpm's content-addressable store, `node_modules/.pnpm` or its hoisted layout): a
   * write through one would change the package for all of them, outside any sandbox. It is not
   * walked file by file (installs rewrite it); a bounded sample of its files decides, and when one
   * has more than one link, `.pnpm` (or, hoisted, the whole `node_modules`) is read-only.
   */
  private packageStoreLinks(nodeModules: string, out: Walked): void {
    const pnpm = join(nodeModules, '.pnpm');
    const stack = [statIf(pnpm)?.isDirectory() ? pnpm : nodeModules];
    let files = 0;
    for (let dirs = 0; stack.length > 0 && dirs < 200 && files < 50; dirs++) {
      const dir = stack.pop()!;
      let entries: Dirent[];
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) {
        const path = join(dir, e.name);
        if (e.isDirectory()) stack.push(path);
        else if (e.isFile() && ++files <= 50 && (lstatIf(path)?.nlink ?? 1) > 1) {
          out.readOnly.add(inside(path, pnpm) ? pnpm : nodeModules);
          return;
        }
      }
    }
  }

  /**
   * Every directory between a writable root and a protected path is bound over itself: renaming
   * one (`mv sub subx; cp -a subx sub`) would carry the protected mount away and leave a writable
   * copy under the protected name.
   */
  private pinAncestors(out: Walked, roots: readonly string[]): void {
    for (const path of [...out.readOnly, ...out.pinned]) {
      const root = roots.find((r) => inside(path, r) && path !== r);
      if (!root) continue;
      for (let dir = dirname(path); dir !== root && inside(dir, root); dir = dirname(dir)) {
        if (out.pinned.has(dir)) break;
        out.pinned.add(dir);
      }
    }
  }

  /**
   * A pointer that cannot be resolved, or directories the walk could not visit: the nearest
   * existing directory of each is made read-only, collapsed towards the writable root when there
   * are more than the mount budget allows.
   */
  private failClosed(
    targets: string[],
    out: Walked,
    roots: readonly string[],
    options: { notRoot?: boolean } = {},
  ): void {
    let dirs = [...new Set(targets.map((t) => nearestExisting(t)))].filter(
      (d) => roots.some((r) => inside(d, r)) && !(options.notRoot && roots.includes(d)),
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
   * A file with more than one link shares its inode with its other names, and a write through any
   * name changes all of them: a mount cannot stop that. Every name of a multiply-linked file is
   * read-only unless the walk saw all of its names (as many as its link count) and none of them is
   * protected — then they are ordinary files. (Inside the sandbox a new link across mounts fails
   * with EXDEV, so only links made outside exist: to a hook, a file outside, another project's.)
   */
  private protectHardLinks(out: Walked, roots: readonly string[]): void {
    const byInode = new Map<string, { names: string[]; nlink: number }>();
    for (const path of out.files) {
      const st = lstatIf(path);
      if (!st?.isFile() || st.nlink < 2) continue;
      const key = `${st.dev}:${st.ino}`;
      const entry = byInode.get(key);
      if (entry) entry.names.push(path);
      else byInode.set(key, { names: [path], nlink: st.nlink });
    }
    const linked: string[] = [];
    for (const { names, nlink } of byInode.values()) {
      const ordinary = names.length >= nlink && !names.some((n) => out.readOnly.has(n));
      if (!ordinary) linked.push(...names);
    }
    if (linked.length > MOUNT_BUDGET / 2) this.failClosed(linked, out, roots, { notRoot: true });
    else for (const path of linked) out.readOnly.add(path);
  }

  /** Files watched through their directories (any event naming one marks the policy stale). */
  private watchFiles(files: readonly string[]): void {
    if (this.disposed || this.unwatched) return;
    const byDir = new Map<string, Set<string>>();
    for (const file of files.slice(0, 128)) {
      const names = byDir.get(dirname(file)) ?? new Set<string>();
      names.add(basename(file));
      byDir.set(dirname(file), names);
    }
    for (const [dir, names] of byDir) {
      try {
        const w = watch(dir, { persistent: false }, (_event, name) => {
          if (name === null || names.has(String(name))) this.stale = true;
        });
        w.on('error', () => {
          this.stale = true;
        });
        this.watchers.push(w);
      } catch {
        this.unwatched = true;
        return;
      }
    }
  }

  /** Each walked directory is watched: any change there marks the policy stale. */
  private watch(dirs: readonly string[]): void {
    this.closeWatchers();
    if (this.disposed) return;
    this.unwatched = dirs.length > WATCH_BUDGET;
    if (this.unwatched) return;
    // Entries appearing, going or renamed ('rename'), not content changes: only those can change
    // the protected set (a new link is a new entry too).
    const onChange = (event: string) => {
      if (event === 'rename') this.stale = true;
    };
    for (const dir of dirs) {
      try {
        const w = watch(dir, { persistent: false }, onChange);
        w.on('error', () => {
          this.stale = true;
        });
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

function readTrimmed(file: string): string | undefined {
  try {
    return readRegularFileSync(file, { maxBytes: MAX_POINTER_BYTES, encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

const byPath = (a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

function nearestExisting(path: string): string {
  for (let p = path; ; p = dirname(p)) {
    const r = real(p);
    if (r) return r;
    if (p === '/') return '/';
  }
}

function existsPath(path: string): boolean {
  return lstatIf(path) !== undefined;
}

/**
 * The config files git reads for a repository, read once each: its own (`config`,
 * `config.worktree`, and the common dir's for a worktree), the user's global ones, and every file
 * they include (`include.path`, `includeIf.*.path` whatever the condition, `~` expanded, relative to
 * the including file), followed through their own includes. `included`: the files reached only
 * through an include, which a command could rewrite to put any key in force (a team's
 * `../.gitconfig-shared` in the work tree). `common`: the common git dir (the repository's own, or
 * a worktree's `commondir`). `hooksPaths`: every `core.hooksPath` those files set (`~` expanded; a
 * relative one is the work tree's).
 */
function gitConfigFiles(
  gitDir: string,
  home: string,
): { included: string[]; common: string; hooksPaths: string[] } {
  const common = real(join(gitDir, readTrimmed(join(gitDir, 'commondir')) ?? '.')) ?? gitDir;
  const base = [
    ...new Set([
      join(gitDir, 'config'),
      join(gitDir, 'config.worktree'),
      join(common, 'config'),
      join(common, 'config.worktree'),
      join(home, '.gitconfig'),
      join(home, '.config', 'git', 'config'),
    ]),
  ];
  const hooksPaths = new Set<string>();
  const expand = (value: string) => (value.startsWith('~/') ? join(home, value.slice(2)) : value);
  // git follows includes 10 levels deep: a file named at the last level is read (what it sets is in
  // force), its own includes are not.
  const included = followIncludes(base, 10, (text) => {
    const targets: string[] = [];
    for (const { key, value } of configValues(text)) {
      if (!value) continue;
      if (key === 'core.hookspath') hooksPaths.add(expand(value));
      if (/^include(if\..+)?\.path$/.test(key)) targets.push(expand(value));
    }
    return targets;
  });
  return { included, common, hooksPaths: [...hooksPaths] };
}

/** A config file's text (at most MAX_CONFIG_BYTES), or undefined when it cannot be read. */
function configText(file: string): string | undefined {
  try {
    return readRegularFileSync(file, { maxBytes: MAX_CONFIG_BYTES, encoding: 'utf8' });
  } catch {
    return undefined;
  }
}

/**
 * The files that config files include, followed through their own includes (each read once; a
 * relative target is the including file's directory's): `includesOf` reads a file's text and gives
 * its include targets, expanded. A file named at level `levels` is read, its own includes are not.
 * Missing and unreadable ones are listed (a tool skips a missing include until it is made).
 */
function followIncludes(
  base: readonly string[],
  levels: number,
  includesOf: (text: string) => string[],
): string[] {
  const included = new Set<string>();
  const visit = (file: string, level: number) => {
    const text = configText(file);
    if (text === undefined) return;
    const targets = includesOf(text);
    if (level > levels) return;
    for (const expanded of targets) {
      const target = isAbsolute(expanded) ? expanded : resolve(dirname(file), expanded);
      if (included.has(target) || base.includes(target)) continue;
      included.add(target);
      visit(target, level + 1);
    }
  };
  for (const file of base) visit(file, 0);
  return [...included];
}

/**
 * The files a Mercurial repository's config includes (`%include`, relative to the including file,
 * `~` expanded), followed through their own includes as hg does (a file it includes twice is read
 * once here): whatever they set is in force as if it were in `.hg/hgrc`. Missing ones count (hg
 * skips a missing include until it is made).
 */
function hgrcIncludes(hgDir: string, home: string): string[] {
  const base = HG_CONFIG_FILES.map((name) => join(hgDir, name));
  const expand = (value: string) =>
    value === '~' ? home : value.startsWith('~/') ? join(home, value.slice(2)) : value;
  return followIncludes(base, 10, (text) => parseHgrc(text).includes.map(expand));
}

/** The names in a directory, none when it cannot be read. */
function entriesOf(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
