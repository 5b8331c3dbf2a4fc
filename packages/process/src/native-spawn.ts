/**
 * The supervisor's spawner: glibc's posix_spawn through a small Node-API addon
 * (native/conch_spawn.c, built into dist/conch_spawn.node by scripts/build-native.mjs), else node's
 * child_process.spawn.
 *
 * Why our own addon: node's spawn forks (libuv's fork(), a clone without CLONE_VM), so the kernel
 * copies the page tables of the whole node process on every spawn, and it is most of what a cheap
 * command costs: 41% of a small node process's CPU went to `_Fork` under perf, and `true` cost
 * 2.6x a C `posix_spawn` when spawned by node. posix_spawn clones with CLONE_VM | CLONE_VFORK and
 * costs the same from any process size. No npm package does posix_spawn with pipes that node can
 * then pass as handles; node-pty and the like start PTYs, not pipes.
 *
 * The addon only starts processes and reports their exits; everything else (the env sent by the
 * host, handle passing, the exit message) stays in supervisor-children.ts, the same for both.
 */
// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What dist/conch_spawn.node exports. */
export interface NativeSpawnModule {
  /**
   * Starts `file` (looked up on `envp`'s PATH when it has no slash) with `argv` (argv[0] first),
   * in its own session. Returns `[pid, stdinFd, stdoutFd, stderrFd, pidfd]`: the host's ends of
   * unix socketpairs, -1 for a stream not asked for (then /dev/null); `pidfd` (when `pidfd` is
   * asked, and the kernel has pidfd_open) a pidfd of the child, else -1 (absent from addons built
   * before it). Throws node's spawn error (`code`: ENOENT, EACCES, ...) when the program could not
   * be started.
   */
  spawn(
    file: string,
    argv: readonly string[],
    cwd: string,
    envp: readonly string[],
    stdinPipe: boolean,
    capture: boolean,
    pidfd?: boolean,
  ): [number, number, number, number, number?];
  /**
   * waitpid(pid, WNOHANG): null while it runs, else `[code, null]` or `[null, signalNumber]`, once
   * (it is reaped then); `[null, null]` for a pid that is not (or no longer) a child. Ask it for each
   * child on SIGCHLD, which libuv delivers on the JavaScript thread.
   */
  tryWait(pid: number): [number | null, number | null] | null;
  /**
   * Sends `id` and `fds` (1 to 4) as one message on a unix socket (SCM_RIGHTS) and closes them
   * here. Never blocks: false when the socket is full (nothing sent, the fds still ours).
   */
  sendFds(socketFd: number, id: number, fds: readonly number[]): boolean;
  /** The next sendFds message on a unix socket, `[id, ...fds]`, or null when none is queued. */
  recvFds(socketFd: number): number[] | null;
  /**
   * A number that changes whenever this process's `environ` does (host-env.ts keeps its copy of
   * process.env while it stays). Absent from addons built before it.
   */
  envGeneration?(): number;
  /**
   * The pid of the process `pidfd` names, in this process's pid namespace: -1 when it was reaped
   * already, 0 when the kernel does not say. Closes `pidfd`. Absent from addons built before it.
   */
  pidfdPid?(pidfd: number): number;
  /** `"<dev>:<ino>"` of what `path` names (stat, following symlinks), `''` when stat fails. Absent from older addons. */
  fileId?(path: string): string;
  /**
   * What a child's output socket holds now, read without blocking, up to `max` bytes (null: none),
   * and whether its writers are all gone (then `fd` is closed). Absent from older addons.
   */
  drain?(fd: number, max: number): [Buffer | null, boolean];
  /** Whether process group `pgid` has a member (zombies too), without an exception. Absent from older addons. */
  groupAlive?(pgid: number): boolean;
}

export type Spawner =
  | { kind: 'posix_spawn'; module: NativeSpawnModule }
  | { kind: 'node'; /** Why not posix_spawn. */ reason: string };

/** Set to `0` in a supervisor's environment (ProcessManager's `nativeSpawn: false`): node's spawn. */
export const NATIVE_SPAWN_VAR = 'CONCH_NATIVE_SPAWN';

/**
 * The supervisor's fd that is a unix socket to the host, set in its environment when the host
 * loaded the addon too: children's pipes travel there by sendFds/recvFds, next to the IPC channel's
 * `spawned` message, instead of one node handle pass (and its acknowledgement) per pipe.
 */
export const FD_CHANNEL_VAR = 'CONCH_FD_CHANNEL';

// Under vitest this module runs from src/*.ts; the addon is built into dist/. Either way the
// package's root (prebuilds/) is one directory up (also in @conch/mcp's bundle, whose dist/ holds
// this module and whose root holds the prebuilds). The exec server's bundle, which a remote target
// installs as one directory named by its hash, has them beside its code instead.
const here = fileURLToPath(import.meta.url);
const packageRoot = join(dirname(here), '..');
const prebuildRoots = [join(packageRoot, 'prebuilds'), join(dirname(here), 'prebuilds')];
/** Where a build from source on this machine puts the addon (scripts/build-native.mjs). */
export const NATIVE_SPAWN_ADDON = here.endsWith('.ts')
  ? join(packageRoot, 'dist', 'conch_spawn.node')
  : join(dirname(here), 'conch_spawn.node');

/**
 * The prebuilt addon for this machine, shipped in the package (prebuilds/linux-<arch>-<libc>/,
 * made by the repository's scripts/prebuild-native.mjs for x64 and arm64, glibc and musl), or
 * undefined for a platform none is built for.
 */
export function prebuiltSpawnAddon(): string | undefined {
  if (process.platform !== 'linux' || (process.arch !== 'x64' && process.arch !== 'arm64')) return undefined;
  const family = runningOnMusl() ? 'musl' : 'glibc';
  const paths = prebuildRoots.map((root) =>
    join(root, `linux-${process.arch}-${family}`, 'conch_spawn.node'),
  );
  return paths.find((path) => existsSync(path)) ?? paths[0];
}

/**
 * Whether this node runs on musl: its loader (`ld-musl-<arch>.so.1`) is mapped in this process.
 * Read from /proc/self/maps (one small read) rather than with detect-libc, which guesses from
 * /usr/bin/ldd (the machine's default libc, not necessarily node's) and can fall back to spawning
 * `getconf`, and which, being CommonJS, the supervisor's self-contained ESM bundle could not carry.
 */
export function runningOnMusl(maps?: string): boolean {
  try {
    return /\/ld-musl-[^/\s]+\.so/.test(maps ?? readFileSync('/proc/self/maps', 'latin1'));
  } catch {
    return false; // no /proc: glibc is the likelier, and a glibc addon on musl fails to load, not crash
  }
}

/**
 * Loads the addon — a build from source beside this module when there is one (it follows the
 * source), else (or when that one does not load) the prebuilt one for this machine — or says why
 * node's spawn is used. `addon` names the one file to try instead (tests).
 */
export function loadSpawner(env: NodeJS.ProcessEnv = process.env, addon?: string): Spawner {
  if (env[NATIVE_SPAWN_VAR] === '0') return { kind: 'node', reason: `${NATIVE_SPAWN_VAR}=0` };
  if (process.platform !== 'linux')
    return { kind: 'node', reason: `${process.platform}: posix_spawn is used on Linux only` };
  const candidates =
    addon !== undefined
      ? [addon]
      : [NATIVE_SPAWN_ADDON, prebuiltSpawnAddon()].filter(
          (path): path is string => path !== undefined && existsSync(path),
        );
  if (candidates.length === 0)
    return {
      kind: 'node',
      reason: `no prebuilt addon for ${process.platform}-${process.arch} and none built here (the package's scripts/build-native.mjs builds ${NATIVE_SPAWN_ADDON} with a C compiler)`,
    };
  const reasons: string[] = [];
  for (const candidate of candidates) {
    const loaded = loadAddon(candidate);
    if ('module' in loaded) return { kind: 'posix_spawn', module: loaded.module };
    reasons.push(loaded.reason);
  }
  return { kind: 'node', reason: reasons.join('; ') };
}

let hostLoaded: NativeSpawnModule | null | undefined;

/**
 * The addon in this (the host's) process, loaded once when first asked: the fd channel's receiving
 * end (supervisor-client.ts) and the environment's generation (host-env.ts) share it. Undefined
 * where it does not load (node's spawn is used then).
 */
export function hostAddon(): NativeSpawnModule | undefined {
  if (hostLoaded === undefined) {
    const spawner = loadSpawner();
    hostLoaded = spawner.kind === 'posix_spawn' ? spawner.module : null;
  }
  return hostLoaded ?? undefined;
}

function loadAddon(addon: string): { module: NativeSpawnModule } | { reason: string } {
  let module: Partial<NativeSpawnModule>;
  try {
    module = createRequire(import.meta.url)(addon) as Partial<NativeSpawnModule>;
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    return {
      reason:
        e.code === 'MODULE_NOT_FOUND'
          ? `${addon} is missing (the package's scripts/build-native.mjs builds it with a C compiler)`
          : `${addon} did not load: ${e.message.split('\n')[0]}`,
    };
  }
  const exported = ['spawn', 'tryWait', 'sendFds', 'recvFds'] as const;
  if (exported.some((name) => typeof module[name] !== 'function'))
    return { reason: `${addon} does not export ${exported.join(', ')}: rebuild it` };
  return { module: module as NativeSpawnModule };
}
