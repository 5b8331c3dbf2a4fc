import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdirSync,
  // eslint-disable-next-line no-restricted-imports -- reads conch's own guard binary, shipped in its package
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readRegularFileSync } from '@conch/core';
import { PLANT_WATCH_NAMES } from './plants.js';
import type { SandboxProfile } from './profile.js';
import { ENV_TEMPLATE_NAMES, GUARD_DIR_NAMES, GUARD_FILE_NAMES } from './protected-names.js';

/**
 * The sandbox's path guard (native/conch_guard.c, built into dist/conch-guard): the first process
 * inside bubblewrap, it starts the process supervisor under a seccomp filter that sends every open,
 * create, remove, rename, link, truncate and re-mode of a path to the guard, which resolves the
 * path as the kernel would, judges it by the rules below and performs the call itself.
 *
 * Why: bubblewrap's protections are mounts, and a mount on a file belongs to the file's directory
 * entry as it was when the sandbox started. When anything outside replaces that entry (git's
 * `config.lock` renamed over `.git/config` by the user's `git config`, an editor's atomic save of
 * `.env`, `sed -i`, `npm login` rewriting `~/.npmrc`), the kernel detaches the mount in the
 * sandbox's namespace and the new file is writable, or readable, inside. Mounts on directories
 * survive; names that appear later (a new `.envrc`, a nested repository's hooks) have no mount at
 * all. The guard judges each call at the moment it is made, against paths and names, so a
 * protection holds for the life of the sandbox whatever happens to the files. It was measured
 * against the alternatives (see the package README): re-mounting after inotify leaves a window a
 * polling process wins every time; a sandbox per command leaves long-lived processes unprotected;
 * the guard costs ~20 µs per open (3.6% on 500 spawns of `true`, nothing measurable on `tsc`; see
 * the package README for later figures).
 */

/** What the guard enforces in one sandbox (all paths absolute and real). */
export interface GuardRules {
  /** Paths (files or directories, with everything under them) nothing may write, create, remove or re-mode. */
  readOnly: readonly string[];
  /** Paths whose content is hidden: a file cannot be opened (EACCES), a directory reads as empty; writes refused. */
  masked: readonly string[];
  /** Where the name rules apply (the workspace and the host's writable roots; not caches, not /tmp). */
  nameRoots: readonly string[];
  /** File names that cannot be created or changed anywhere under a name root (`.envrc`, `.mcp.json`). */
  fileNames: readonly string[];
  /** Directory names under which nothing can be created or changed (`.vscode`, `.claude`). */
  dirNames: readonly string[];
  /** `.env*` files under a name root are secrets (masked, read-only) unless this sandbox made them. */
  envSecrets: boolean;
  /** `.env*` names that are not secrets (templates such as `.env.example`). */
  envTemplates?: readonly string[];
  /** `.env*` paths that are not secrets: a snapshot of a file git tracks unchanged is shown there. */
  envExposed?: readonly string[];
  /**
   * Directories that read as empty (closed homes): a change to a path that does not exist below
   * one is refused as read-only (EROFS, reported) instead of failing as a missing file.
   */
  closed?: readonly string[];
  /**
   * Homes whose configuration is read-only (a workspace that is the home): every top-level entry
   * named `.*`, and `bin`, with everything under them, existing or created later.
   */
  configHomes?: readonly string[];
  /** Paths under those entries that stay writable: writable roots the host named there. */
  configExempt?: readonly string[];
  /** No hook but a `*.sample` can be created in any repository's hooks directory under a name root. */
  hooks: boolean;
  /** File names whose successful changes are reported ('written' events): plant candidates. */
  watchNames: readonly string[];
  /** Report changes to git's own files (config, hooks, refs, index) of every repository under a name root. */
  watchGit: boolean;
  /**
   * The environment variable that tells which spawn a process descends from (@conch/process's
   * cookie): events carry its value, so the host knows which call refused or wrote what.
   */
  cookieVar?: string;
}

/** `connect`: a connect(2) to a socket by its path (refused with EACCES where the sandbox could not have made it). */
export type GuardOp = 'read' | 'write' | 'create' | 'remove' | 'chmod' | 'link' | 'connect';

export type GuardEvent =
  | { kind: 'started'; guardPid: number; supervisorPid: number; waitKillable: boolean; syncWake: boolean }
  | { kind: 'ack' }
  | { kind: 'refused'; op: GuardOp; path: string; errno: number; cookie?: string }
  | { kind: 'written'; op: GuardOp; path: string; cookie?: string }
  | { kind: 'error'; message: string };

function record(type: string, payload: string | Buffer = ''): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const head = Buffer.alloc(5);
  head[0] = type.charCodeAt(0);
  head.writeUInt32LE(body.length, 1);
  return Buffer.concat([head, body]);
}

/** The rules as the guard's records, ending with the commit that puts them in force (acknowledged). */
export function encodeGuardRules(rules: GuardRules): Buffer {
  const parts: Buffer[] = [];
  const add = (type: string, values: readonly string[] | undefined) => {
    for (const value of values ?? []) if (value && !value.includes('\0')) parts.push(record(type, value));
  };
  add('R', rules.readOnly);
  add('M', rules.masked);
  add('N', rules.nameRoots);
  add('F', rules.fileNames);
  add('D', rules.dirNames);
  add('X', rules.envTemplates);
  add('P', rules.envExposed);
  add('Z', rules.closed);
  add('W', rules.watchNames);
  add('O', rules.configHomes);
  add('Y', rules.configExempt);
  parts.push(record('E', rules.envSecrets ? '1' : '0'));
  parts.push(record('H', rules.hooks ? '1' : '0'));
  parts.push(record('G', rules.watchGit ? '1' : '0'));
  if (rules.cookieVar) parts.push(record('K', rules.cookieVar));
  parts.push(record('C'));
  return Buffer.concat(parts);
}

const OPS: ReadonlySet<string> = new Set(['read', 'write', 'create', 'remove', 'chmod', 'link', 'connect']);

/** Splits the guard's byte stream into events (records may arrive in any chunks). */
export class GuardEventReader {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): GuardEvent[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : Buffer.from(chunk);
    const events: GuardEvent[] = [];
    while (this.pending.length >= 5) {
      const length = this.pending.readUInt32LE(1);
      if (this.pending.length < 5 + length) break;
      const type = String.fromCharCode(this.pending[0]!);
      const fields = this.pending
        .subarray(5, 5 + length)
        .toString('utf8')
        .split('\0');
      this.pending = this.pending.subarray(5 + length);
      const event = parse(type, fields);
      if (event) events.push(event);
    }
    return events;
  }
}

function parse(type: string, fields: string[]): GuardEvent | undefined {
  switch (type) {
    case 'S': {
      const [guard, supervisor, features = ''] = (fields[0] ?? '').split(' ');
      return {
        kind: 'started',
        guardPid: Number(guard),
        supervisorPid: Number(supervisor),
        waitKillable: features.includes('wait-killable'),
        syncWake: features.includes('sync-wake'),
      };
    }
    case 'A':
      return { kind: 'ack' };
    case 'r': {
      const [op = '', path = '', errno = '0', cookie = ''] = fields;
      if (!OPS.has(op)) return undefined;
      return {
        kind: 'refused',
        op: op as GuardOp,
        path,
        errno: Number(errno),
        ...(cookie ? { cookie } : {}),
      };
    }
    case 'w': {
      const [op = '', path = '', cookie = ''] = fields;
      if (!OPS.has(op)) return undefined;
      return { kind: 'written', op: op as GuardOp, path, ...(cookie ? { cookie } : {}) };
    }
    case 'e':
      return { kind: 'error', message: fields.join(' ') };
    default:
      return undefined;
  }
}

// Under vitest this module runs from src/*.ts; the binary is built into dist/. Either way the
// package's root (prebuilds/) is one directory up (also in @conch/mcp's bundle).
const here = fileURLToPath(import.meta.url);
/** Where a build from source on this machine puts the guard (scripts/build-native.mjs). */
export const BUILT_GUARD_BINARY = here.endsWith('.ts')
  ? join(dirname(here), '..', 'dist', 'conch-guard')
  : join(dirname(here), 'conch-guard');
/**
 * The guard shipped in the package for this machine: a static executable (any libc) for Linux x64
 * and arm64 in prebuilds/linux-<arch>/, made by the repository's scripts/prebuild-native.mjs. The
 * exec server's bundle (installed in a remote target as one directory) has prebuilds/ beside its
 * code rather than one directory up.
 */
export const PREBUILT_GUARD_BINARY = ((): string => {
  const paths = [join(dirname(here), '..'), dirname(here)].map((root) =>
    join(root, 'prebuilds', `linux-${process.arch}`, 'conch-guard'),
  );
  return paths.find((path) => existsSync(path)) ?? paths[0]!;
})();

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Whether `path` is a regular file holding exactly `bytes` (anything else there: false, never a wait). */
function holds(path: string, bytes: Buffer): boolean {
  try {
    return readRegularFileSync(path, { maxBytes: bytes.length }).equals(bytes);
  } catch {
    return false;
  }
}

/**
 * `binary` as a file this user can execute. Package managers do not keep file modes: `pnpm pack`
 * (and so a publish) writes every file but a package's `bin` as 0644, so the prebuilt guard lands
 * non-executable. It is made executable in place when this user may (a project's node_modules),
 * else copied once to `$XDG_CACHE_HOME/conch/guard/<its sha256>/` (a global install owned by root).
 * Returns `binary` unchanged when neither works (guardAvailability then says why).
 */
export function executableGuard(binary: string, env: NodeJS.ProcessEnv = process.env): string {
  if (executable(binary)) return binary;
  try {
    chmodSync(binary, 0o755);
    if (executable(binary)) return binary;
  } catch {
    // not ours to change: a copy of our own
  }
  try {
    const bytes = readFileSync(binary);
    const sum = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
    const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
    const copy = join(base, 'conch', 'guard', sum, 'conch-guard');
    // Reused only while it is byte for byte the shipped guard (anything else is written over).
    const same = executable(copy) && holds(copy, bytes);
    if (!same) {
      mkdirSync(dirname(copy), { recursive: true, mode: 0o755 });
      const tmp = `${copy}.${process.pid}.tmp`;
      writeFileSync(tmp, bytes, { mode: 0o755 });
      renameSync(tmp, copy);
    }
    return copy;
  } catch {
    return binary;
  }
}

/**
 * The guard sandboxes run under: a build from source when there is one (it follows the source),
 * else the prebuilt one, made executable (it may be missing on other platforms: see
 * guardAvailability).
 */
export const GUARD_BINARY =
  !existsSync(BUILT_GUARD_BINARY) && existsSync(PREBUILT_GUARD_BINARY)
    ? executableGuard(PREBUILT_GUARD_BINARY)
    : BUILT_GUARD_BINARY;

/** Set to `0` to run sandboxes without the guard (their mounts alone). */
export const GUARD_VAR = 'CONCH_SANDBOX_GUARD';

export type GuardAvailability =
  | { available: true; binary: string; waitKillable: boolean; syncWake: boolean }
  | { available: false; reason: string };

const probed = new Map<string, GuardAvailability>();

/**
 * Whether the guard works here, asked once per binary: it is built, and `conch-guard --probe`
 * installs a listener, reads a child's memory (Yama's ptrace scope allows a parent) and hands it a
 * file descriptor. The reason says what is missing otherwise.
 */
export function guardAvailability(
  binary = GUARD_BINARY,
  env: NodeJS.ProcessEnv = process.env,
): GuardAvailability {
  if (env[GUARD_VAR] === '0') return { available: false, reason: `${GUARD_VAR}=0` };
  const known = probed.get(binary);
  if (known) return known;
  let answer: GuardAvailability;
  if (!executable(binary)) {
    answer = {
      available: false,
      reason: `the guard is missing (${binary}: none is prebuilt for ${process.platform}-${process.arch}, and building it needs a C compiler)`,
    };
    probed.set(binary, answer);
    return answer;
  }
  // Generous: on a loaded machine a fork and a few syscalls can take a while; a working kernel
  // answers at once and a broken one fails at once, so this only bounds a hang.
  const run = spawnSync(binary, ['--probe'], { encoding: 'utf8', timeout: 30_000 });
  if (run.status === 0) {
    let features: { waitKillable?: boolean; syncWake?: boolean } = {};
    try {
      features = JSON.parse(run.stdout) as typeof features;
    } catch {
      // an older guard's output: the features are unknown
    }
    answer = {
      available: true,
      binary,
      waitKillable: features.waitKillable === true,
      syncWake: features.syncWake === true,
    };
  } else {
    const why = (run.stderr || run.error?.message || '').trim().split('\n').slice(-2).join(' | ');
    answer = {
      available: false,
      reason: `the guard does not work on this kernel (${why || `exit ${run.status ?? run.signal}`}): seccomp user notification (Linux 5.9+) and ptrace access to child processes are needed`,
    };
  }
  probed.set(binary, answer);
  return answer;
}

/**
 * What the guard enforces for a profile: the workspace-write profile's read-only and masked paths,
 * its protected names under its name roots, `.env*` secrets, hooks, and the plant candidates it
 * reports; the protected profile (a command a human let out) keeps only its read-only paths. The
 * read-only and none profiles get no guard: nothing in them is writable (or nothing is guarded).
 */
export function guardRulesFor(profile: SandboxProfile, cookieVar?: string): GuardRules | undefined {
  if (profile.kind === 'protected') {
    return {
      readOnly: profile.readOnlyPaths,
      masked: [],
      nameRoots: [],
      fileNames: [],
      dirNames: [],
      envSecrets: false,
      hooks: false,
      watchNames: [],
      watchGit: false,
      ...(cookieVar ? { cookieVar } : {}),
    };
  }
  if (profile.kind !== 'workspace-write') return undefined;
  // With the protected-paths rule off (the host's choice), names are not kept; secrets still are.
  const names = profile.protectedNames !== false;
  return {
    readOnly: profile.readOnlyPaths,
    masked: profile.maskedPaths ?? [],
    nameRoots: profile.nameRoots ?? profile.writableRoots,
    fileNames: names ? GUARD_FILE_NAMES : [],
    dirNames: names ? GUARD_DIR_NAMES : [],
    envSecrets: profile.dotEnvSecrets !== false,
    envTemplates: ENV_TEMPLATE_NAMES,
    envExposed: (profile.substitutes ?? []).map((s) => s.path),
    closed: profile.closedPaths ?? [],
    ...(profile.configHomes?.length
      ? {
          configHomes: profile.configHomes,
          configExempt: profile.writableRoots.filter((root) =>
            profile.configHomes!.some((home) => isConfigEntryPath(root, home)),
          ),
        }
      : {}),
    hooks: names,
    watchNames: PLANT_WATCH_NAMES,
    watchGit: true,
    ...(cookieVar ? { cookieVar } : {}),
  };
}

/**
 * The rules of a sandbox that keeps running while the policy changed: everything the older rules
 * protected stays protected (a protection belongs to a path for the sandbox's life), and what the
 * newer ones add applies at once.
 */
export function mergeGuardRules(older: GuardRules, newer: GuardRules): GuardRules {
  const union = (a: readonly string[], b: readonly string[]) => [...new Set([...a, ...b])];
  return {
    readOnly: union(older.readOnly, newer.readOnly),
    masked: union(older.masked, newer.masked),
    nameRoots: union(older.nameRoots, newer.nameRoots),
    fileNames: union(older.fileNames, newer.fileNames),
    dirNames: union(older.dirNames, newer.dirNames),
    envSecrets: older.envSecrets || newer.envSecrets,
    envTemplates: (older.envTemplates ?? []).filter((n) => (newer.envTemplates ?? []).includes(n)),
    // A file exposed by both (a snapshot then and now); one that changed since is a secret again.
    envExposed: (older.envExposed ?? []).filter((n) => (newer.envExposed ?? []).includes(n)),
    closed: union(older.closed ?? [], newer.closed ?? []),
    ...mergeConfigHomes(older, newer),
    hooks: older.hooks || newer.hooks,
    watchNames: union(older.watchNames, newer.watchNames),
    watchGit: older.watchGit || newer.watchGit,
    ...((newer.cookieVar ?? older.cookieVar) ? { cookieVar: (newer.cookieVar ?? older.cookieVar)! } : {}),
  };
}

/**
 * Whether `path` is (or lies under) a configuration entry of `home` as the guard judges it (its
 * `in_config_home`): a top-level entry whose name starts with '.' (not `.` or `..`), or `bin`.
 */
export function isConfigEntryPath(path: string, home: string): boolean {
  if (!path.startsWith(`${home}/`)) return false;
  const first = path.slice(home.length + 1).split('/')[0]!;
  return first === 'bin' || (first.startsWith('.') && first !== '.' && first !== '..');
}

/**
 * Config homes of merged rules: each home either set protects stays protected; a path stays
 * writable under one only where every set that protects that home lets it.
 */
function mergeConfigHomes(
  older: GuardRules,
  newer: GuardRules,
): Pick<GuardRules, 'configHomes' | 'configExempt'> {
  const homes = [...new Set([...(older.configHomes ?? []), ...(newer.configHomes ?? [])])];
  if (homes.length === 0) return {};
  const exempt = [...new Set([...(older.configExempt ?? []), ...(newer.configExempt ?? [])])].filter((path) =>
    [older, newer].every(
      (rules) =>
        !(rules.configHomes ?? []).some((home) => isConfigEntryPath(path, home)) ||
        (rules.configExempt ?? []).includes(path),
    ),
  );
  return { configHomes: homes, configExempt: exempt };
}
