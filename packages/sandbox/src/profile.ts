import { existsSync, mkdirSync, realpathSync } from 'node:fs';
import { looksLikeCredential } from './env-values.js';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { InvalidSpawnOptionError } from './invalid-spawn-option-error.js';
import { needsUserNamespace } from './probe.js';
import {
  devArgs,
  normalizeSandboxResources,
  resourcesKey,
  resourcesOf,
  tmpfsArgs,
  type SandboxResources,
} from './resource-limits.js';
import { safeStatSync } from '@conch/core';

/**
 * The kernel wall around a command (bubblewrap), set up once per profile around a supervisor:
 *
 * - `none`: no sandbox.
 * - `workspace-write` (the default of a permission gate in sandbox mode): the whole filesystem
 *   read-only except `writableRoots` (the workspace, host-named extra roots, a sandbox-private
 *   cache directory); `readOnlyPaths` inside them read-only again (protected files: `.git/hooks`,
 *   `.env*`, …); `pinnedPaths` bound over themselves so they cannot be renamed away from the
 *   protections inside them; a private `/tmp`, `/var/tmp` and `/run`; its own pid namespace (a
 *   fresh `/proc` showing only the sandbox's processes: nothing inside can signal or read the host,
 *   its supervisors or other conch hosts); no network. `env` is added to every command's
 *   environment (cache locations, TMPDIR). Never falls back to running unsandboxed: where the
 *   sandbox cannot start, the spawn fails (ESANDBOX).
 * - `read-only`: the same walls with nothing writable. `required: true` fails like
 *   workspace-write where the sandbox cannot start; otherwise the command runs unsandboxed.
 * - `protected` (what a human-approved command that leaves the sandbox gets, and every command
 *   when the gate's sandbox is off): the filesystem as the user sees it, the network shared, and
 *   every `readOnlyPaths` entry bind-mounted read-only over itself. Entries that do not exist are
 *   skipped (reported by `status()`). `workspace` is accepted as its old name.
 */
export type SandboxProfile =
  | { kind: 'none' }
  | {
      kind: 'read-only';
      required?: boolean;
      visiblePaths?: readonly string[];
      /** What it may take from the machine (default: defaultSandboxResources(); see resource-limits.ts). */
      resources?: SandboxResources;
    }
  | WorkspaceWriteProfile
  | { kind: 'protected'; readOnlyPaths: readonly string[] };

export interface WorkspaceWriteProfile {
  kind: 'workspace-write';
  /** Directories commands may write (absolute; created when missing only for the cache dir). */
  writableRoots: readonly string[];
  /** Existing paths inside the writable roots that stay read-only. */
  readOnlyPaths: readonly string[];
  /** Writable directories bound over themselves (a mount point cannot be renamed or removed). */
  pinnedPaths?: readonly string[];
  /** Variables every command in the sandbox gets (cache locations, TMPDIR, …). */
  env?: Readonly<Record<string, string>>;
  /**
   * 'proxy': connections leave only through the process manager's HTTP proxy (each destination
   * decided by its `network.decide`), reached at 127.0.0.1:{@link PROXY_PORT} inside; commands get
   * HTTP(S)_PROXY / ALL_PROXY / NO_PROXY. Default 'none': no way out.
   */
  network?: 'none' | 'proxy';
  /** Paths whose content is hidden inside: directories become empty, files unreadable (secrets). */
  maskedPaths?: readonly string[];
  /**
   * Directories that read as empty inside (an empty read-only tmpfs: the user's home, other
   * homes), with `readablePaths` under them bound back read-only, and the writable roots, the
   * kept-visible runner paths and `substitutes` under them bound as usual.
   */
  closedPaths?: readonly string[];
  readablePaths?: readonly string[];
  /** Host files shown read-only in place of others (`source` at `path`): sanitized configs, snapshots. */
  substitutes?: readonly { path: string; source: string }[];
  /**
   * Host loopback ports reached inside at their own address (`127.0.0.1:<port>`), through the
   * proxy (which still decides each connection); needs `network: 'proxy'`.
   */
  hostPorts?: readonly number[];
  /**
   * The container engine through the policy socket (engine/): the policy's settings (validated by
   * parseEnginePolicy). The socket's directory is bound read-only at {@link ENGINE_DIR_IN_SANDBOX}.
   */
  engine?: Readonly<Record<string, unknown>>;
  /**
   * Environment variables the sandbox never gets — neither its commands nor its own processes
   * (bwrap's init, the supervisor: their /proc/<pid>/environ is readable inside): name globs, except
   * those matching `keptEnv`.
   */
  hiddenEnv?: readonly string[];
  keptEnv?: readonly string[];
  /**
   * Where the guard applies protected names to what appears while the sandbox lives (default: the
   * writable roots). The sandbox-private cache directory is left out by the gate's policy.
   */
  nameRoots?: readonly string[];
  /** `.env*` files under the name roots are secrets unless the sandbox made them (default true). */
  dotEnvSecrets?: boolean;
  /** false: protected names may be created and changed (the host turned that protection off). */
  protectedNames?: boolean;
  /**
   * Homes inside a writable root (a workspace that is the home, or holds it) whose configuration
   * stays read-only for the sandbox's life: every top-level `.*` entry and `bin`, existing or not
   * (the guard; mounts cover the existing ones where no guard runs), but for writable roots inside
   * them.
   */
  configHomes?: readonly string[];
  /**
   * What the sandbox may take from the machine: tmpfs sizes, memory and process limits, how long it
   * lives idle (default: defaultSandboxResources(); see resource-limits.ts).
   */
  resources?: SandboxResources;
}

/** Where the network bridge listens inside a sandbox with `network: 'proxy'`. */
export const PROXY_PORT = 3128;
/** Where the container-engine policy socket's directory is bound inside the sandbox. */
export const ENGINE_DIR_IN_SANDBOX = '/run/conch-engine';

/** Where the host's proxy socket is bound inside the sandbox. */
export const PROXY_SOCKET_IN_SANDBOX = '/run/conch/proxy.sock';
/** Where the credential injector's CA bundle is bound (read-only) inside a sandbox, beside the proxy socket. */
export const CA_BUNDLE_IN_SANDBOX = '/run/conch/ca-bundle.crt';

/** What commands in a sandbox with the proxy are told. */
export function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${PROXY_PORT}`;
  // The sandbox's own loopback (a dev server it started) is reached directly.
  const noProxy = 'localhost,127.0.0.1,::1';
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    ALL_PROXY: url,
    NO_PROXY: noProxy,
    http_proxy: url,
    https_proxy: url,
    all_proxy: url,
    no_proxy: noProxy,
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    // Node 22.21+/24.5+: fetch and http(s).request honour the variables above.
    NODE_USE_ENV_PROXY: '1',
  };
}

/** Which sandbox really applied to a process. */
export type SandboxKind = SandboxProfile['kind'];

export const NO_SANDBOX: SandboxProfile = { kind: 'none' };

/** Whether a profile runs in its own pid namespace (the supervisor reports pids the host must translate). */
export function isIsolated(profile: SandboxProfile): boolean {
  return profile.kind === 'read-only' || profile.kind === 'workspace-write';
}

/** Whether a spawn must fail rather than run unsandboxed when the profile cannot be set up. */
export function isRequired(profile: SandboxProfile): boolean {
  return profile.kind === 'workspace-write' || (profile.kind === 'read-only' && profile.required === true);
}

const EXPECTED =
  "{ kind: 'none' } | { kind: 'read-only', required? } | { kind: 'workspace-write', writableRoots: string[], readOnlyPaths: string[], pinnedPaths?, env? } | { kind: 'protected', readOnlyPaths: string[] }";

function pathList(value: unknown, field: string, cwd: string, optional = false): string[] {
  if (value === undefined && optional) return [];
  if (
    !Array.isArray(value) ||
    value.some((p) => typeof p !== 'string' || p.length === 0 || p.includes('\0'))
  ) {
    throw new InvalidSpawnOptionError(field, 'an array of non-empty path strings without NUL bytes', value);
  }
  return [...new Set((value as string[]).map((p) => (isAbsolute(p) ? resolve(p) : resolve(cwd, p))))].sort();
}

function substituteList(value: unknown, field: string, cwd: string): { path: string; source: string }[] {
  if (value === undefined) return [];
  const ok = (x: unknown) => typeof x === 'string' && x.length > 0 && !x.includes('\0');
  if (
    !Array.isArray(value) ||
    value.some((e) => typeof e !== 'object' || e === null || !ok(e.path) || !ok(e.source))
  ) {
    throw new InvalidSpawnOptionError(field, 'an array of { path, source } path strings', value);
  }
  return (value as { path: string; source: string }[])
    .map((e) => ({ path: resolve(cwd, e.path), source: resolve(cwd, e.source) }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Checks a `sandbox` option; relative paths resolve against `cwd`. */
export function normalizeSandboxProfile(value: unknown, cwd: string, field = 'sandbox'): SandboxProfile {
  if (value === undefined) return NO_SANDBOX;
  if (typeof value !== 'object' || value === null) throw new InvalidSpawnOptionError(field, EXPECTED, value);
  const v = value as Record<string, unknown>;
  switch (v.kind) {
    case 'none':
      return NO_SANDBOX;
    case 'read-only': {
      const visiblePaths = pathList(v.visiblePaths, `${field}.visiblePaths`, cwd, true);
      return {
        kind: 'read-only',
        ...(v.required === true ? { required: true } : {}),
        ...(visiblePaths.length ? { visiblePaths } : {}),
        ...(v.resources !== undefined
          ? { resources: normalizeSandboxResources(v.resources, `${field}.resources`) }
          : {}),
      };
    }
    case 'workspace':
    case 'protected':
      return { kind: 'protected', readOnlyPaths: pathList(v.readOnlyPaths, `${field}.readOnlyPaths`, cwd) };
    case 'workspace-write': {
      const env = v.env;
      if (
        env !== undefined &&
        (typeof env !== 'object' ||
          env === null ||
          Object.entries(env).some(([k, x]) => typeof x !== 'string' || k.includes('=') || x.includes('\0')))
      ) {
        throw new InvalidSpawnOptionError(`${field}.env`, 'an object of string values', env);
      }
      const writableRoots = pathList(v.writableRoots, `${field}.writableRoots`, cwd);
      if (writableRoots.length === 0) {
        throw new InvalidSpawnOptionError(
          `${field}.writableRoots`,
          'at least one directory',
          v.writableRoots,
        );
      }
      if (v.network !== undefined && v.network !== 'none' && v.network !== 'proxy') {
        throw new InvalidSpawnOptionError(`${field}.network`, "'none' or 'proxy'", v.network);
      }
      const masked = pathList(v.maskedPaths, `${field}.maskedPaths`, cwd, true);
      const closed = pathList(v.closedPaths, `${field}.closedPaths`, cwd, true);
      const readable = pathList(v.readablePaths, `${field}.readablePaths`, cwd, true);
      const substitutes = substituteList(v.substitutes, `${field}.substitutes`, cwd);
      if (
        v.hostPorts !== undefined &&
        (!Array.isArray(v.hostPorts) ||
          v.hostPorts.some((p) => !Number.isInteger(p) || (p as number) < 1 || (p as number) > 65535))
      )
        throw new InvalidSpawnOptionError(
          `${field}.hostPorts`,
          'an array of port numbers (1-65535)',
          v.hostPorts,
        );
      const hostPorts = [...new Set((v.hostPorts as number[] | undefined) ?? [])].sort((a, b) => a - b);
      const names = (value: unknown, name: string) => {
        if (value === undefined) return [];
        if (!Array.isArray(value) || value.some((x) => typeof x !== 'string' || x === ''))
          throw new InvalidSpawnOptionError(`${field}.${name}`, 'an array of variable-name globs', value);
        return [...(value as string[])];
      };
      const hiddenEnv = names(v.hiddenEnv, 'hiddenEnv');
      const keptEnv = names(v.keptEnv, 'keptEnv');
      const nameRoots =
        v.nameRoots === undefined ? undefined : pathList(v.nameRoots, `${field}.nameRoots`, cwd);
      const configHomes = pathList(v.configHomes, `${field}.configHomes`, cwd, true);
      for (const flag of ['dotEnvSecrets', 'protectedNames'] as const)
        if (v[flag] !== undefined && typeof v[flag] !== 'boolean')
          throw new InvalidSpawnOptionError(`${field}.${flag}`, 'a boolean', v[flag]);
      return {
        kind: 'workspace-write',
        writableRoots,
        readOnlyPaths: pathList(v.readOnlyPaths, `${field}.readOnlyPaths`, cwd, true),
        pinnedPaths: pathList(v.pinnedPaths, `${field}.pinnedPaths`, cwd, true),
        ...(env ? { env: { ...(env as Record<string, string>) } } : {}),
        ...(v.network === 'proxy' ? { network: 'proxy' as const } : {}),
        ...(masked.length ? { maskedPaths: masked } : {}),
        ...(closed.length ? { closedPaths: closed } : {}),
        ...(readable.length ? { readablePaths: readable } : {}),
        ...(substitutes.length ? { substitutes } : {}),
        ...(hostPorts.length ? { hostPorts } : {}),
        ...(v.engine !== undefined && v.engine !== null && typeof v.engine === 'object'
          ? { engine: { ...(v.engine as Record<string, unknown>) } }
          : {}),
        ...(hiddenEnv.length ? { hiddenEnv } : {}),
        ...(keptEnv.length ? { keptEnv } : {}),
        ...(nameRoots ? { nameRoots } : {}),
        ...(configHomes.length ? { configHomes } : {}),
        ...(v.dotEnvSecrets === false ? { dotEnvSecrets: false } : {}),
        ...(v.protectedNames === false ? { protectedNames: false } : {}),
        ...(v.resources !== undefined
          ? { resources: normalizeSandboxResources(v.resources, `${field}.resources`) }
          : {}),
      };
    }
    default:
      throw new InvalidSpawnOptionError(`${field}.kind`, EXPECTED, v.kind);
  }
}

/** sandboxKey's answers by profile object (a profile is an immutable value; see ProcessManager's profileOf). */
const sandboxKeys = new WeakMap<SandboxProfile, string>();

/** One string per distinct profile (the manager keeps one supervisor per key). */
export function sandboxKey(profile: SandboxProfile): string {
  let key = sandboxKeys.get(profile);
  if (key === undefined) {
    key = computeSandboxKey(profile) + resourcesKey(profile);
    sandboxKeys.set(profile, key);
  }
  return key;
}

function computeSandboxKey(profile: SandboxProfile): string {
  switch (profile.kind) {
    case 'none':
      return 'none';
    case 'read-only':
      return `read-only:${JSON.stringify(profile.visiblePaths ?? [])}`;
    case 'protected':
      return `protected:${JSON.stringify(profile.readOnlyPaths)}`;
    case 'workspace-write':
      return `workspace-write:${JSON.stringify([
        profile.writableRoots,
        profile.readOnlyPaths,
        profile.pinnedPaths ?? [],
        Object.entries(profile.env ?? {}).sort(),
        profile.network ?? 'none',
        profile.maskedPaths ?? [],
        profile.closedPaths ?? [],
        profile.readablePaths ?? [],
        (profile.substitutes ?? []).map((e) => [e.path, e.source]),
        profile.hostPorts ?? [],
        profile.engine ?? null,
        profile.hiddenEnv ?? [],
        profile.keptEnv ?? [],
        profile.nameRoots ?? null,
        profile.configHomes ?? [],
        profile.dotEnvSecrets ?? true,
        profile.protectedNames ?? true,
      ])}`;
  }
}

export interface SandboxArgs {
  /** bwrap arguments before `--`. */
  args: string[];
  /** Paths that do not exist and so could not be bound (bwrap would create mount points on the real filesystem). */
  skipped: string[];
}

function existing(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

const under = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);

/**
 * A writable root that does not exist yet, made (mode 0755 less the umask) so that what a command
 * writes there reaches the host: skipped, the path would land in the sandbox's own tmpfs or /tmp and
 * be lost (a trash, an output directory, a build's out dir on a first run). Made only where the
 * nearest existing ancestor is reached without a symlink (a symlink could point anywhere: a root
 * under one is skipped and reported as before). The real path, or undefined when it cannot be made.
 */
export function makeWritableRoot(path: string): string | undefined {
  let ancestor = dirname(path);
  while (ancestor !== dirname(ancestor) && !existsSync(ancestor)) ancestor = dirname(ancestor);
  if (existing(ancestor) !== ancestor) return undefined;
  try {
    mkdirSync(path, { recursive: true });
  } catch {
    return undefined;
  }
  return existing(path);
}

/**
 * What must stay visible for code at `path` to load inside the read-only profile: the outermost
 * `node_modules` above its real path (a pnpm layout keeps a package's platform binaries in sibling
 * directories of that tree), else its directory. Matters when an install lives under /tmp, which
 * the profile replaces with an empty tmpfs.
 */
export function installRoot(path: string): string {
  const real = existing(path) ?? path;
  const at = real.indexOf('/node_modules/');
  if (at >= 0) return real.slice(0, at + '/node_modules'.length);
  // A workspace checkout (conch's own, or a monorepo that links it): its packages reach each other
  // and the root node_modules/.pnpm through symlinks, so the highest ancestor holding a
  // node_modules is what must stay visible (a clone under /tmp lost @conch/sandbox otherwise) —
  // never a private dir itself, nor the root.
  let root = dirname(real);
  for (let dir = dirname(real); dir !== dirname(dir); dir = dirname(dir)) {
    if ((PRIVATE_DIRS as readonly string[]).includes(dir)) break;
    if (existsSync(join(dir, 'node_modules'))) root = dir;
  }
  return root;
}

/** Parts of /proc an isolated sandbox keeps read-only (as container runtimes do). */
const PROC_KNOBS = ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus', '/proc/fs'];

/** Directories an isolated sandbox replaces with an empty private tmpfs. */
const PRIVATE_DIRS = ['/tmp', '/var/tmp', '/run'] as const;

/**
 * The common walls of the isolated profiles: the root read-only, a minimal /dev (null, zero,
 * random, tty, a private devpts for PTYs; never the host's, whose block devices would be writable
 * by root), a fresh /proc of the sandbox's own pid namespace (the host's would show every process,
 * its environment and, through /proc/<pid>/root, the host's whole writable filesystem), private
 * /tmp, /var/tmp and /run (no host sockets: docker, ssh-agent, dbus), and `keepVisible` paths under
 * those bound back read-only (node, the supervisor and node-pty when installed under /tmp).
 */
function isolatedBase(
  keepVisible: readonly string[],
  tmp?: string,
  closed?: {
    closedPaths?: readonly string[];
    readablePaths?: readonly string[];
    resources?: SandboxResources;
  },
): string[] {
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'];
  // Every private tmpfs sized (resource-limits.ts): what is written there is held in RAM.
  const tmpfsBytes = resourcesOf({ kind: 'read-only', resources: closed?.resources })!.tmpfsBytes;
  args.push(...devArgs(tmpfsBytes));
  // The kernel's knobs under the fresh /proc stay read-only: root without capabilities may still
  // write a sysctl whose only check is the file mode (kernel.core_pattern runs a program as root
  // on the next crash; sysrq-trigger reboots).
  for (const knob of PROC_KNOBS) if (existsSync(knob)) args.push('--ro-bind', knob, knob);
  for (const dir of PRIVATE_DIRS) {
    if (existing(dir) !== dir) continue;
    // /tmp from a host directory of the sandbox's own, when given: what commands leave there
    // survives a sandbox that is replaced (new protected paths), and is removed with the registry.
    const own = dir === '/tmp' && tmp !== undefined ? existing(tmp) : undefined;
    if (own) args.push('--bind', own, dir);
    else args.push(...tmpfsArgs(dir, tmpfsBytes));
  }
  const rebound = new Set<string>();
  for (const path of keepVisible) {
    const real = existing(path);
    if (!real || rebound.has(real)) continue;
    if (PRIVATE_DIRS.some((dir) => under(real, dir) && real !== dir)) {
      rebound.add(real);
      args.push('--ro-bind', real, real);
    }
  }
  if (closed?.closedPaths?.length)
    args.push(...closeDirs(closed.closedPaths, closed.readablePaths ?? [], keepVisible));
  return args;
}

/**
 * Whether a closed directory lies strictly inside one of the writable roots (real paths): the
 * root's bind, made after the base, would cover a tmpfs made before it, and the closing remount
 * would then fail on a directory that is no longer a mount point (a workspace that is the home, or
 * holds `~/.cache`: the output directory's root is closed inside it). Such a directory is closed
 * after the binds instead (the workspace-write case of sandboxArgs).
 */
function insideWritableRoot(path: string, writableRoots: readonly string[]): boolean {
  const real = existing(path);
  if (real === undefined) return false;
  return writableRoots.some((root) => {
    const r = existing(root);
    return r !== undefined && r !== real && under(real, r);
  });
}

/**
 * Directories that read as empty (the user's home, other homes): an empty tmpfs over each,
 * writable while the mounts inside it are made (bwrap creates their mount points in it) and made
 * read-only at the end (`closedTail`). Bound back inside, read-only: `readable` paths at their
 * own names (a `~/.bashrc` that is a symlink into a dotfiles repository shows the file's content
 * under `~/.bashrc`), and the kept-visible runner paths (node under `~/.nvm`, a supervisor
 * installed in a project under HOME) at their real paths.
 */
function closeDirs(
  closedPaths: readonly string[],
  readable: readonly string[],
  keepVisible: readonly string[],
): string[] {
  const dirs = closedPaths
    .map((p) => existing(p))
    .filter((d): d is string => d !== undefined && d !== '/')
    .sort((a, b) => a.split('/').length - b.split('/').length);
  if (dirs.length === 0) return [];
  const args: string[] = [];
  for (const dir of new Set(dirs)) args.push('--perms', '0755', '--tmpfs', dir);
  const isClosed = (p: string) => dirs.some((d) => under(p, d) && p !== d);
  const seen = new Set<string>();
  for (const path of [...readable].sort((a, b) => a.split('/').length - b.split('/').length)) {
    const real = existing(path);
    if (!real || seen.has(path) || !isClosed(path)) continue;
    seen.add(path);
    args.push('--ro-bind', real, path);
  }
  for (const path of keepVisible) {
    const real = existing(path);
    if (!real || seen.has(real) || !isClosed(real)) continue;
    seen.add(real);
    args.push('--ro-bind', real, real);
  }
  return args;
}

/** What ends a profile with closed directories: each made read-only (after every mount inside it). */
function closedTail(closedPaths: readonly string[] | undefined): string[] {
  const args: string[] = [];
  for (const dir of new Set((closedPaths ?? []).map((p) => existing(p)))) {
    if (dir !== undefined && dir !== '/') args.push('--remount-ro', dir);
  }
  return args;
}

/**
 * The flags every isolated profile ends with: its own pid namespace (bwrap's init is pid 1 and
 * reaps orphans; when the supervisor exits, init exits and the kernel kills whatever is left in
 * the namespace), no network, its own hostname and IPC namespaces, a new session (no TIOCSTI into
 * the host's terminal), and no capabilities: bubblewrap started by root keeps root's capabilities
 * inside unless told otherwise, and with CAP_SYS_ADMIN a command could `umount` a protected path or
 * `mount -o remount,rw /` (bwrap also sets no_new_privs: no setuid program gives them back).
 */
/** The namespaces of an isolated sandbox, with a user namespace of its own where the probe found it needed. */
function isolation(): string[] {
  return needsUserNamespace() ? ['--unshare-user', ...ISOLATION] : ISOLATION;
}

const ISOLATION = [
  '--unshare-pid',
  '--unshare-net',
  '--unshare-uts',
  '--unshare-ipc',
  '--cap-drop',
  'ALL',
  '--new-session',
];

/**
 * bwrap arguments for a profile. `keepVisible` lists paths the sandboxed supervisor and its
 * commands need (node, @conch/process and its supervisor, node-pty).
 *
 * - `protected` keeps the host's /proc and pid namespace (its commands were approved by a human to
 *   run with the user's rights: `kill` and `ps` of the user's processes work) and dev-binds the
 *   host's /dev, so PTYs live in the host's devpts.
 * - No `--die-with-parent` around a supervisor: it would SIGKILL it the moment the host dies,
 *   before it could kill what it started in a profile without a pid namespace.
 */
export function sandboxArgs(
  profile: SandboxProfile,
  keepVisible: readonly string[] = [],
  options: { tmp?: string; proxySocket?: string; engineDir?: string; caBundle?: string } = {},
): SandboxArgs {
  const skipped: string[] = [];
  switch (profile.kind) {
    case 'none':
      return { args: [], skipped };
    case 'read-only':
      // Visible paths: a runner's own files under the private /tmp (a terminal's session files).
      return {
        args: [
          ...isolatedBase([...keepVisible, ...(profile.visiblePaths ?? [])], undefined, profile),
          ...isolation(),
        ],
        skipped,
      };
    case 'protected': {
      const args = ['--bind', '/', '/', '--dev-bind', '/dev', '/dev'];
      for (const path of profile.readOnlyPaths) {
        // A symlink is protected at its target (a mount follows it); the link itself stays replaceable.
        const real = existing(path);
        if (real === undefined) skipped.push(path);
        else args.push('--ro-bind', real, real);
      }
      args.push('--new-session');
      if (needsUserNamespace()) args.push('--unshare-user');
      return { args, skipped };
    }
    case 'workspace-write': {
      // Closed directories inside a writable root are closed after its bind (insideWritableRoot).
      const inner = (profile.closedPaths ?? []).filter((p) => insideWritableRoot(p, profile.writableRoots));
      const outer = (profile.closedPaths ?? []).filter((p) => !inner.includes(p));
      const args = isolatedBase(keepVisible, options.tmp, { ...profile, closedPaths: outer });
      const bound = new Set<string>();
      const bind = (flag: '--bind' | '--ro-bind', path: string, create = false) => {
        const real = existing(path) ?? (create ? makeWritableRoot(path) : undefined);
        if (real === undefined) {
          skipped.push(path);
          return;
        }
        const key = `${flag} ${real}`;
        if (bound.has(key)) return;
        bound.add(key);
        args.push(flag, real, real);
      };
      // Parents before children, whatever their kind: a later mount lands on top of an earlier one
      // (a read-only `.git/hooks` inside the writable workspace, a writable log directory inside a
      // read-only one). At the same depth, writable first, so read-only wins on the same path.
      const mounts = [
        ...profile.writableRoots.map((path) => ({ path, flag: '--bind' as const, order: 0, create: true })),
        ...(profile.pinnedPaths ?? []).map((path) => ({ path, flag: '--bind' as const, order: 1 })),
        ...profile.readOnlyPaths.map((path) => ({ path, flag: '--ro-bind' as const, order: 2 })),
      ].sort(
        (a, b) =>
          a.path.split('/').length - b.path.split('/').length ||
          a.order - b.order ||
          // Code-unit order, not localeCompare: the same on every locale, and no ICU collator to load.
          (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
      );
      for (const m of mounts) bind(m.flag, m.path, 'create' in m && m.create === true);
      // Closed directories inside a writable root, now that the root is bound.
      if (inner.length) args.push(...closeDirs(inner, profile.readablePaths ?? [], keepVisible));
      // Secrets: a directory becomes an empty read-only tmpfs, a file reads as /dev/null.
      for (const path of profile.maskedPaths ?? []) {
        const real = existing(path);
        if (real === undefined) continue;
        if (safeStatSync(real).isDirectory())
          args.push('--perms', '0555', '--tmpfs', real, '--remount-ro', real);
        else args.push('--ro-bind', '/dev/null', real);
      }
      if (profile.network === 'proxy' && options.proxySocket) {
        // Read-only: connect() needs no write access to the mount, and a chmod 000 or an unlink
        // from inside cannot cut the sandbox's own network.
        args.push('--ro-bind', options.proxySocket, PROXY_SOCKET_IN_SANDBOX);
        // The CA bundle of the credential injector (system CAs and the session CA), beside it.
        if (options.caBundle && existing(options.caBundle))
          args.push('--ro-bind', existing(options.caBundle)!, CA_BUNDLE_IN_SANDBOX);
      }
      // The container engine's policy socket: its directory (the socket appears there once the
      // host's policy proxy listens), read-only, and the usual paths pointing at it.
      if (profile.engine && options.engineDir && existing(options.engineDir)) {
        args.push('--ro-bind', existing(options.engineDir)!, ENGINE_DIR_IN_SANDBOX);
        args.push('--symlink', `${ENGINE_DIR_IN_SANDBOX}/docker.sock`, '/run/docker.sock');
      }
      // Substitutes last but for the closing remounts: they replace whatever showed at their path.
      for (const { path, source } of profile.substitutes ?? []) {
        if (existing(source) === undefined) skipped.push(source);
        else args.push('--ro-bind', source, path);
      }
      args.push(...closedTail(profile.closedPaths));
      args.push(...isolation());
      return { args, skipped };
    }
  }
}

/** The part of a gate's kernel policy (@conch/core `KernelPolicy`) a profile is made from. */
export interface PolicyForProfile {
  mode: 'workspace-write' | 'read-only' | 'off';
  writableRoots: readonly string[];
  readOnlyPaths: readonly string[];
  pinnedPaths: readonly string[];
  env: Readonly<Record<string, string>>;
  /** 'proxy': connections through the allow-listing proxy. */
  network?: 'none' | 'proxy';
  /** Secrets hidden inside the sandbox. */
  maskedPaths?: readonly string[];
  closedPaths?: readonly string[];
  readablePaths?: readonly string[];
  substitutes?: readonly { path: string; source: string }[];
  hostPorts?: readonly number[];
  engine?: Readonly<Record<string, unknown>>;
  hiddenEnv?: readonly string[];
  keptEnv?: readonly string[];
  nameRoots?: readonly string[];
  configHomes?: readonly string[];
  dotEnvSecrets?: boolean;
  protectedNames?: boolean;
  /** What an isolated sandbox may take from the machine (default: defaultSandboxResources()). */
  resources?: SandboxResources;
}

/**
 * The profile a command runs in, from the gate's kernel policy and its decision (`sandbox`:
 * where an allowed command runs). No policy: no sandbox. (What the runners themselves need — a
 * trash, their own files under /tmp — the process manager adds to every sandbox: shareWithSandbox.)
 *
 * - 'workspace-write' → the workspace-write profile (required: never run unsandboxed);
 * - 'read-only' → the read-only profile, required unless the gate's sandbox is off (then it is the
 *   safety net behind a parser that proved the command read-only);
 * - 'outside', or no level (a gate without one) → the protected profile: the user's filesystem with
 *   the protected paths read-only.
 */
export function profileFor(
  policy: PolicyForProfile | undefined,
  level: 'workspace-write' | 'read-only' | 'outside' | undefined,
): SandboxProfile | undefined {
  if (!policy) return undefined;
  if (level === 'workspace-write' && policy.mode !== 'off') {
    return {
      kind: 'workspace-write',
      writableRoots: policy.writableRoots,
      readOnlyPaths: policy.readOnlyPaths,
      pinnedPaths: policy.pinnedPaths,
      env: policy.env,
      ...(policy.network === 'proxy' ? { network: 'proxy' as const } : {}),
      ...(policy.maskedPaths?.length ? { maskedPaths: policy.maskedPaths } : {}),
      ...(policy.closedPaths?.length ? { closedPaths: policy.closedPaths } : {}),
      ...(policy.readablePaths?.length ? { readablePaths: policy.readablePaths } : {}),
      ...(policy.substitutes?.length ? { substitutes: policy.substitutes } : {}),
      ...(policy.hostPorts?.length ? { hostPorts: policy.hostPorts } : {}),
      ...(policy.engine ? { engine: policy.engine } : {}),
      ...(policy.hiddenEnv?.length ? { hiddenEnv: policy.hiddenEnv } : {}),
      ...(policy.keptEnv?.length ? { keptEnv: policy.keptEnv } : {}),
      ...(policy.nameRoots ? { nameRoots: policy.nameRoots } : {}),
      ...(policy.configHomes?.length ? { configHomes: policy.configHomes } : {}),
      ...(policy.dotEnvSecrets === false ? { dotEnvSecrets: false } : {}),
      ...(policy.protectedNames === false ? { protectedNames: false } : {}),
      ...(policy.resources ? { resources: policy.resources } : {}),
    };
  }
  if (level === 'read-only') {
    const resources = policy.resources ? { resources: policy.resources } : {};
    return policy.mode === 'off'
      ? { kind: 'read-only', ...resources }
      : { kind: 'read-only', required: true, ...resources };
  }
  return { kind: 'protected', readOnlyPaths: policy.readOnlyPaths };
}

/** One case-insensitive regular expression for variable-name globs (`*` any run of characters). */
export function nameGlobsRegExp(globs: readonly string[]): RegExp {
  return new RegExp(
    `^(?:${globs
      .map((g) =>
        g
          .split('*')
          .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
          .join('.*'),
      )
      .join('|')})$`,
    'i',
  );
}

/** Compiled envFilter tests by their globs (a profile may be rebuilt; its globs rarely change). */
const envFilters = new Map<string, (name: string) => boolean>();
/** The same by profile object (see sandboxKey). */
const filtersByProfile = new WeakMap<SandboxProfile, (name: string) => boolean>();

/**
 * A test of variable names against a profile's `hiddenEnv` / `keptEnv` globs (one compiled regular
 * expression each, cached by the globs), or undefined when nothing is hidden.
 */
export function envFilter(profile: SandboxProfile): ((name: string, value?: string) => boolean) | undefined {
  if (profile.kind !== 'workspace-write' || !profile.hiddenEnv?.length) return undefined;
  const known = filtersByProfile.get(profile);
  if (known) return known;
  const filter = compileEnvFilter(profile.hiddenEnv, profile.keptEnv);
  filtersByProfile.set(profile, filter);
  return filter;
}

function compileEnvFilter(
  hiddenEnv: readonly string[],
  keptEnv: readonly string[] | undefined,
): (name: string, value?: string) => boolean {
  const cacheKey = JSON.stringify([hiddenEnv, keptEnv ?? []]);
  const cached = envFilters.get(cacheKey);
  if (cached) return cached;
  const hidden = nameGlobsRegExp(hiddenEnv);
  const kept = keptEnv?.length ? nameGlobsRegExp(keptEnv) : undefined;
  // Answers by name: every spawn tests every variable of the host's environment, the same names.
  const answers = new Map<string, boolean>();
  // And by value (env-values.ts): a name the patterns miss still hides a credential's value.
  const byValue = new Map<string, boolean>();
  const test = (name: string, value?: string) => {
    let answer = answers.get(name);
    if (answer === undefined) {
      answer = hidden.test(name) && !kept?.test(name);
      if (answers.size >= 4096) answers.clear();
      answers.set(name, answer);
    }
    if (answer || value === undefined) return answer;
    const key = `${name}=${value}`;
    let valued = byValue.get(key);
    if (valued === undefined) {
      valued = !kept?.test(name) && looksLikeCredential(name, value);
      if (byValue.size >= 4096) byValue.clear();
      byValue.set(key, valued);
    }
    return valued;
  };
  if (envFilters.size >= 64) envFilters.clear();
  envFilters.set(cacheKey, test);
  return test;
}
