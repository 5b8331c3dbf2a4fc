import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  makeTempDir,
  type EventBus,
  type Logger,
  type ProcessManagerService,
  removeSync,
  safeStatSync,
} from '@conch/core';
import {
  envFilter,
  findBwrap,
  forgetBwrap,
  installRoot,
  isIsolated,
  isRequired,
  ENGINE_DIR_IN_SANDBOX,
  EngineProxy,
  engineSandboxEnv,
  NetworkProxy,
  NO_SANDBOX,
  normalizeSandboxProfile,
  probeSandbox,
  PROXY_PORT,
  PROXY_SOCKET_IN_SANDBOX,
  proxyEnv,
  resourcesOf,
  sandboxArgs,
  sandboxKey,
  settledSandboxStatus,
  type BlockedConnection,
  type ConnectionVerdict,
  type CredentialInjector,
  type EngineRefusal,
  type Destination,
  type SandboxKind,
  type SandboxProfile,
  type SandboxStatus,
} from '@conch/sandbox';
import {
  GUARD_BINARY,
  guardAvailability,
  guardRulesFor,
  mergeGuardRules,
  type GuardEvent,
  type GuardRules,
} from '@conch/sandbox';
import './events.js';
import { hostEnvironment } from './host-env.js';
import { hostAddon } from './native-spawn.js';
import {
  DuplicateProcessIdError,
  InvalidSpawnOptionError,
  LeftoverAdoptionError,
  ProcessManagerDisposedError,
  PtySpawnError,
} from './errors.js';
import { LocalExecutor, spawnDetached, type Executor, type ExecutorSpawnRequest } from './executor.js';
import { onHostExit } from './host-exit.js';
import { defaultOutputDir, outputFileName, prepareOutputDir } from './output-dir.js';
import { COOKIE_VAR, sweepCookie, sweepCookieUntilGone } from './kill-tree.js';
import { ProcessLeftovers, type LeftoverHandle } from './leftover-handle.js';
import { ManagedProcess, type ProcessOwner } from './managed-process.js';
import { OutputCapture } from './output-capture.js';
import { killGraceFromSeconds, PAI_KILL_ALL_TIMEOUT_S, type ManagedProcessInfo } from './pai-api.js';
import { processEvents, toProcessInfo } from './process-events.js';
import type { ProcessResult } from './process-result.js';
import { killTree, killTreeSync } from './process-tree.js';
import { loadPtyModule } from './pty-module.js';
import { LocalPty, type BasePty, type PtyProcess } from './pty-process.js';
import { RoutedChild } from './routed-child.js';
import {
  commandLineProblem,
  describeCommandLineProblem,
  requestedProcessId,
  validateSpawnArguments,
  type SpawnOptions,
} from './spawn-options.js';
import type { SpawnedChild } from './spawned-child.js';
import { SpillBudget, SpillSink, type SpillDir } from './spill-sink.js';
import { SupervisorClient } from './supervisor-client.js';
import type { SpawnerStatus } from './supervisor-protocol.js';
import { performFs } from './supervisor-fs.js';
import { PortForwarder, type ForwardedPort } from './port-forwarder.js';
import { sandboxFileSystem, type SandboxFileSystem } from './sandbox-file-system.js';
import { SandboxActivityLog, type ReportedPlant, type SandboxActivity } from './sandbox-activity.js';
import {
  commandLimits,
  limitsStatus,
  memoryCheck,
  supervisorLimits,
  type SandboxLimitsStatus,
  type SupervisorLimits,
} from './sandbox-limits.js';

export interface SupervisorOptions {
  /** The node binary that runs the supervisor. Default: `process.execPath`. */
  execPath?: string;
  /**
   * How long a supervisor may fail to answer before it is declared unresponsive, killed (its whole
   * sandbox with it) and replaced: milliseconds of *stalled* time — health-check ticks in which a
   * ping was outstanding and the supervisor was stopped (SIGSTOP) or asleep instead of answering.
   * Time in which it waits for a CPU (a busy machine) or for the disk does not count, so a healthy
   * supervisor on a loaded machine is never declared dead. Default 10000.
   */
  unresponsiveMs?: number;
  /**
   * Whether the supervisor starts commands with posix_spawn (default true): the native addon
   * shipped prebuilt (`prebuilds/linux-{x64,arm64}-{glibc,musl}`; glibc 2.34+ or musl) or built
   * from source here (`dist/conch_spawn.node`), which costs the same from any process size where
   * node's spawn forks. false, or no addon that loads: node's `child_process.spawn`.
   * `status().spawner` says which, and why (also logged once).
   */
  nativeSpawn?: boolean;
}

/** Caps on the bytes spill files take (see SpillBudget). */
export interface SpillLimits {
  /** Bytes one process's spill files may take (all its streams). Default 1 GiB. */
  perProcess?: number;
  /** Bytes all of this manager's spill files may take over its life. Default 4 GiB. */
  total?: number;
}

/** Default spill limits: enough for any real log, not enough to fill a laptop's disk. */
export const DEFAULT_SPILL_LIMITS = { perProcess: 1024 ** 3, total: 4 * 1024 ** 3 } as const;

export interface ProcessManagerOptions {
  /** Where spill files go (called lazily). Default: a private temp dir removed by dispose(). */
  tempDir?: () => string;
  /**
   * Where spill files kept for a model go (`capture.outputDir: true`): a per-user directory that
   * outlives the registry. Default `$XDG_CACHE_HOME/conch/output` (`~/.cache/conch/output`).
   */
  outputDir?: string | (() => string);
  /** Default cwd. Default: process.cwd(). */
  cwd?: string;
  /**
   * Caps on spill files: per process (default 1 GiB) and for the whole manager (default 4 GiB),
   * so a runaway `cat /dev/urandom` cannot fill the disk. Past a cap the file stops growing and
   * the result's `spill` report says how much was kept (`capture.onFileLimit: 'stop'` kills the
   * command instead). `setSpillLimits()` changes them later.
   */
  spillLimits?: SpillLimits;
  events?: EventBus;
  logger?: Logger;
  executor?: Executor;
  /** Default SIGTERM -> SIGKILL grace. Default 2000 ms. */
  killGraceMs?: number;
  /** Default drain time after exit. Default 1000 ms. */
  drainMs?: number;
  /** Finished processes kept for list()/get(). Default 50. */
  historyLimit?: number;
  /**
   * How connections out of a sandbox with `network: 'proxy'` are decided (the permission gate's
   * network rules). Without it every such connection is refused.
   */
  network?: {
    decide(destination: Destination): Promise<ConnectionVerdict>;
    /** How the proxy looks allowed names up (NetworkProxyOptions.lookup; default the system's). */
    lookup?: (host: string) => Promise<readonly string[]>;
  };
  /**
   * Credentials that never enter a sandbox (read at each use; undefined: none): sandboxes with
   * `network: 'proxy'` get its placeholders, CA bundle and git helpers, the proxy hands it the
   * tunnels to its destinations, and a host variable holding one of its values is never passed in.
   */
  credentials?: () => CredentialInjector | undefined;
  /**
   * Spawn through a supervisor process (default true): the host never forks per command, and
   * nothing outlives the host even when it is SIGKILLed. false spawns in the host (as before the
   * supervisor existed); so does a supervisor that cannot start (logged once, see status()).
   */
  supervisor?: boolean | SupervisorOptions;
  /**
   * Port forwarding out of isolated sandboxes (default on): a server a sandboxed command starts
   * on its loopback (or on all interfaces) becomes reachable on the host's 127.0.0.1 at the same
   * port while it listens (see port-forwarder.ts), so the host and a browser it runs can open it.
   * `pollMs`: how often a sandbox with work running is scanned (default 300).
   * `refreshForwardedPorts()` scans at once. false: nothing is forwarded.
   */
  forwardPorts?: boolean | { pollMs?: number };
  /**
   * The sandbox's path guard (default on where it works: built, and the kernel allows seccomp
   * user notification): the workspace-write and protected profiles run their supervisor under
   * @conch/sandbox's guard, which judges every path a sandboxed process opens or changes, so a
   * protection holds for the sandbox's life whatever happens to the files outside (see
   * @conch/sandbox). false: bubblewrap's mounts alone. `status().guard` says which, and why.
   */
  guard?: boolean;
}

export interface SpawnPtyOptions {
  file: string;
  args: readonly string[];
  cwd: string;
  /** The PTY's environment (undefined values are left out); the cookie is added. */
  env: Record<string, string | undefined>;
  cols: number;
  rows: number;
  /** Absolute path of the node-pty entry (e.g. `require.resolve('@lydell/node-pty')`), resolved by the caller. */
  ptyModule: string;
  sandbox?: SandboxProfile;
  /** How errors name it (default: `file`). */
  label?: string;
}

export interface ProcessManagerStatus {
  /**
   * 'starting': a supervisor was started and none answers yet (its node, and for a sandbox
   * bubblewrap and the path guard, are starting: half a second or more on a slow machine; commands
   * submitted meanwhile wait for it); 'running': one answers; 'fallback': spawning in the host (no
   * supervisor: disabled, or it could not start); 'not-started': none was needed yet.
   */
  supervisor: 'running' | 'starting' | 'fallback' | 'not-started';
  /** Whether sandbox profiles apply (probed once per process; a failing sandboxed supervisor also counts). */
  sandbox: SandboxStatus;
  /** Workspace-profile readOnlyPaths that did not exist, so were not protected. */
  skippedReadOnlyPaths: string[];
  /**
   * How the supervisors start commands: posix_spawn (see SupervisorOptions.nativeSpawn), or node's
   * spawn and why. Undefined until a supervisor is ready; `{ kind: 'node' }` without a supervisor.
   */
  spawner?: SpawnerStatus;
  /**
   * Whether sandboxes run under the path guard: `active` once a guarded sandbox started,
   * `available` where it would, `reason` when it does not (not built, the kernel, switched off).
   */
  guard: { available: boolean; active: boolean; reason?: string };
  /**
   * What sandboxed commands left that the user's own tools would run later (@conch/sandbox plants),
   * kept until `clearPlants()`.
   */
  plants: ReportedPlant[];
  /**
   * What an isolated sandbox may take from the machine and how it is held to it: the mechanism
   * ('cgroup-v2' | 'rlimit' | 'none'), the memory and process limits and what enforces them, the
   * tmpfs sizes, the idle bound, and why a stronger mechanism does not apply here (@conch/sandbox
   * resource-limits.ts). The limits of the newest isolated sandbox (the defaults before one ran).
   */
  limits: SandboxLimitsStatus;
}

// Under vitest this module runs from src/*.ts, which node cannot execute: use the built script.
const here = fileURLToPath(import.meta.url);
const SUPERVISOR_SCRIPT = here.endsWith('.ts')
  ? join(dirname(here), '..', 'dist', 'supervisor-main.js')
  : join(dirname(here), 'supervisor-main.js');

/**
 * Where `@lydell/node-pty` resolves from here, if it does (a workspace, a flat install): kept
 * visible in a sandboxed supervisor started before any PTY asked for its module.
 */
const DEFAULT_PTY_MODULE = (() => {
  try {
    return createRequire(import.meta.url).resolve('@lydell/node-pty');
  } catch {
    return undefined;
  }
})();

const localExecutor = new LocalExecutor();

/** How many distinct `sandbox` options profileOf remembers (a registry uses two or three). */
const PROFILE_MEMO_SIZE = 8;

/** Whether two `sandbox` options have the same fields with identical (===) values. */
function sameShape(a: SandboxProfile, b: SandboxProfile): boolean {
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  let n = 0;
  for (const key in y) {
    if (x[key] !== y[key]) return false;
    n++;
  }
  for (const key in x) if (--n < 0 || !(key in y)) return false;
  return n === 0;
}

function hasNul(value: string): boolean {
  return value.includes('\0');
}

/**
 * Owns every child process of one registry. Each child leads its own process group and carries
 * an environment cookie (`CONCH_PROC_COOKIE=<manager>-<id>`), so kill() reaches the whole tree,
 * escapees included; dispose() and host exit leave nothing running.
 *
 * Children are started by a supervisor process (one per sandbox profile, started on first use):
 * the host never forks per command, and the supervisor kills everything when the host dies, by
 * whatever means. Without one (`supervisor: false`, or it cannot start), children are spawned in
 * the host, with the same behaviour except that a SIGKILLed host leaves them running.
 *
 * It also answers to pai's ProcessManager names (seed 002; README, "pai's ProcessManager"):
 * `spawn(…, { process_id })`, `kill(id, timeout) -> boolean`, `kill_all(timeout)`,
 * `list_processes()`, `get_process(id)`.
 */
export class ProcessManager implements ProcessManagerService {
  /** Random id; every cookie of this manager starts with it. */
  readonly id: string;
  readonly events: EventBus | undefined;
  readonly logger: Logger | undefined;
  readonly executor: Executor;
  private readonly options: ProcessManagerOptions;
  private readonly cwd: string;
  private readonly processes = new Map<string, ManagedProcess>();
  private readonly live = new Set<ManagedProcess>();
  /** Set only while spawnHidden() runs spawn(): the process is neither listed nor announced. */
  private hiddenSpawn = false;
  /** Profiles whose supervisor already ran its hidden warm-up spawn (see warmUp). */
  private readonly warmedUp = new Set<string>();
  private readonly ptys = new Set<BasePty>();
  private readonly clients = new Map<string, SupervisorClient>();
  /** The newest supervisor key of each sandbox kind (one sandbox of a kind at a time, see clientFor). */
  private readonly families = new Map<string, string>();
  /** The profile of each supervisor key. */
  private readonly profiles = new Map<string, SandboxProfile>();
  /** Paths every isolated sandbox gives the runners (shareWithSandbox). */
  private readonly shared = { writable: new Set<string>(), visible: new Set<string>() };
  /** Recent `sandbox` options and what they became, most recent first (see profileOf). */
  private readonly profileMemo: { input: SandboxProfile; profile: SandboxProfile }[] = [];
  /** The credential injector the memoised profiles were made with (another one clears the memo). */
  private memoInjector: CredentialInjector | undefined;
  /** The CA bundle written for the current credential injector (its host path). */
  private caBundle: { injector: CredentialInjector; path: string } | undefined;
  private proxy: NetworkProxy | undefined;
  private proxySocketPath: string | undefined;
  /** The container-engine policy proxy (started on first use by a profile with `engine`). */
  private engine: { proxy: EngineProxy; dir: string } | undefined;
  /** Forwards servers listening in isolated sandboxes to the host's loopback (undefined: off). */
  private readonly forwarder: PortForwarder | undefined;
  /** Supervisors closed before dispose (replaced sandboxes) that may still be exiting. */
  private readonly retired = new Set<SupervisorClient>();
  /** Profiles whose sandbox could not be set up (key -> why): they run unsandboxed. */
  private readonly brokenSandboxes = new Map<string, string>();
  private readonly skipped = new Set<string>();
  private readonly leftoverHandles = new WeakMap<ManagedProcess, LeftoverHandle>();
  private readonly owner: ProcessOwner;
  /** The owner of hidden processes (warm-up): no events, no listing; still killed at dispose. */
  private readonly hiddenOwner: ProcessOwner;
  private hiddenCounter = 0;
  private readonly removeExitHook: () => void;
  /** Why there is no supervisor (spawning in the host), once that is so. */
  private fallbackReason: string | undefined;
  private warnedSandbox = false;
  private counter = 0;
  private ownTempDir: string | undefined;
  private removeTempHook: (() => void) | undefined;
  private disposing: Promise<void> | undefined;
  private perProcessSpill: number;
  /** Every spill file of this manager is charged to it. */
  private readonly spillBudget: SpillBudget;
  /** The guard's events by spawn, and the plants found (see sandbox-activity.ts). */
  private readonly activity: SandboxActivityLog;
  /** Why guarded sandboxes are not started any more (a guarded supervisor failed to start). */
  private guardBroken: string | undefined;
  private warnedGuard = false;
  /** The profile keys whose rules each guarded supervisor has been sent (a joined busy sandbox). */
  private readonly guardKeys = new WeakMap<SupervisorClient, Set<string>>();
  /** The host directory sandboxes see as /tmp (made by sandboxTmp()). */
  private sandboxTmpDir: string | undefined;
  /** Broken marks that the next command retries (the cause may have passed). */
  private readonly transientBroken = new Set<string>();
  /** Supervisors replaced while busy: closed once idle. */
  private readonly draining = new Set<SupervisorClient>();
  /** What each sandboxed supervisor stands on, as it was when it started (see sound()). */
  private readonly footing = new WeakMap<SupervisorClient, { path: string; id: string }[]>();
  /** Each isolated sandbox's limits, and its idle timer while nothing runs in it. */
  private readonly limited = new WeakMap<SupervisorClient, SupervisorLimits>();
  private readonly idleTimers = new Map<SupervisorClient, NodeJS.Timeout>();
  /** The limits of the newest isolated sandbox, and what of them could not be applied. */
  private lastLimits: SupervisorLimits | undefined;
  private readonly limitProblems = new Set<string>();
  /** Why sandboxes no longer start in a cgroup of their own (a scope could not be made). */
  private cgroupBroken: string | undefined;

  constructor(options: ProcessManagerOptions = {}) {
    this.options = options;
    this.id = randomBytes(4).toString('hex');
    this.events = options.events;
    this.logger = options.logger;
    this.executor = options.executor ?? localExecutor;
    this.cwd = options.cwd ?? process.cwd();
    this.perProcessSpill = options.spillLimits?.perProcess ?? DEFAULT_SPILL_LIMITS.perProcess;
    this.spillBudget = new SpillBudget('registry', options.spillLimits?.total ?? DEFAULT_SPILL_LIMITS.total);
    if (options.supervisor === false) this.fallbackReason = 'disabled (supervisor: false)';
    this.activity = new SandboxActivityLog({
      onPlant: (plant) =>
        this.logger?.warn(
          { plant: plant.kind, path: plant.path, detail: plant.detail },
          'sandbox: a command left something your own tools would run (see status().plants)',
        ),
    });
    if (options.forwardPorts !== false) {
      const forward = typeof options.forwardPorts === 'object' ? options.forwardPorts : {};
      this.forwarder = new PortForwarder({
        logger: this.logger,
        events: this.events,
        ...(forward.pollMs !== undefined ? { pollMs: forward.pollMs } : {}),
      });
    }
    this.owner = {
      events: this.events,
      logger: this.logger,
      started: (proc) => this.onStarted(proc),
      finished: (proc, result) => this.onFinished(proc, result),
    };
    this.hiddenOwner = {
      events: undefined,
      logger: this.logger,
      started: () => undefined,
      finished: (proc) => void this.live.delete(proc),
    };
    this.removeExitHook = onHostExit(() => this.killAllSync());
  }

  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  /** The directory spill files go to. */
  tempDir(): string {
    if (this.options.tempDir) return this.options.tempDir();
    if (this.ownTempDir === undefined) {
      const dir = makeTempDir('conch-proc-');
      this.ownTempDir = dir;
      // Like the registry's temp dir: gone with the host even when dispose() never ran (after the
      // kill phase, so no command of ours still writes there).
      this.removeTempHook = onHostExit(() => removeSync(dir, { recursive: true, force: true }), 'clean');
    }
    return this.ownTempDir;
  }

  /**
   * Changes the spill limits from now on (a plugin's config: the cli's spillLimitPerCall /
   * spillLimitPerRegistry). Bytes already written stay charged to the total.
   */
  setSpillLimits(limits: SpillLimits): void {
    if (limits.perProcess !== undefined) this.perProcessSpill = limits.perProcess;
    if (limits.total !== undefined) this.spillBudget.limit = limits.total;
  }

  /** The spill limits in force, and the bytes charged to the total so far. */
  spillLimits(): { perProcess: number; total: number; used: number } {
    return { perProcess: this.perProcessSpill, total: this.spillBudget.limit, used: this.spillBudget.used };
  }

  /**
   * The last directory a spill file can go to when the asked-for one (and the temp dir) cannot be
   * used: the system's temp dir, per user (`conch-output-<uid>`, mode 0700), pruned after 7 days.
   */
  private lastResortDir(): string {
    const uid = typeof process.getuid === 'function' ? process.getuid() : 'user';
    return prepareOutputDir(join(tmpdir(), `conch-output-${uid}`));
  }

  /** The directory spill files kept for a model go to (`capture.outputDir: true`); not created here. */
  outputDir(): string {
    const dir = this.options.outputDir;
    return typeof dir === 'function' ? dir() : (dir ?? defaultOutputDir(process.env, this.cwd));
  }

  /**
   * The pids of this manager's running process supervisors: each one's node process and, for a
   * sandboxed one, the bwrap process around it. Commands must not kill them (the permission gate's
   * `safety:selfKill` rule reads this).
   */
  supervisorPids(): number[] {
    const pids = new Set<number>();
    for (const client of this.clients.values()) {
      if (client.status !== 'ready' && client.status !== 'starting') continue;
      for (const pid of [client.pid, client.wrapperPid]) if (pid !== undefined) pids.add(pid);
    }
    return [...pids];
  }

  /** The cookie prefix every process of this manager carries. */
  get cookiePrefix(): string {
    return `${this.id}-`;
  }

  spawn(command: string, args: readonly string[] = [], options: SpawnOptions = {}): ManagedProcess {
    if (this.disposing) throw new ProcessManagerDisposedError();
    validateSpawnArguments(command, args, options);
    const isHidden = this.hiddenSpawn;
    const { id, cookie } = isHidden
      ? { id: 'warm-up', cookie: `${this.id}-w${++this.hiddenCounter}` }
      : this.newProcessId(options);
    const profile = this.profileOf(options.sandbox);
    const cwd = resolve(this.cwd, options.cwd ?? '.');
    if (hasNul(cwd)) throw new InvalidSpawnOptionError('cwd', 'a path without NUL bytes', cwd);
    // The host's environment as a plain object (read from process.env only when it changed,
    // host-env.ts): every later pass (the credential filter, the command-line size check, the
    // difference sent to the supervisor) walks ordinary properties, not process.env.
    // Credentials of the host never enter a sandbox that hides them (by name, or by a value that
    // looks like one): hostEnvironment leaves them undefined. The caller's own env (a template's
    // env_vars, a call's env) is its author's choice and passes.
    const env: Record<string, string | undefined> =
      options.extendEnv !== false ? hostEnvironment(envFilter(profile)) : {};
    const injector = profile.kind === 'workspace-write' ? this.options.credentials?.() : undefined;
    if (injector)
      for (const key in env) if (env[key] !== undefined && injector.hides(env[key]!)) env[key] = undefined;
    // The sandbox's own variables (cache locations, TMPDIR) over the host's, under the caller's.
    if (profile.kind === 'workspace-write' && profile.env) Object.assign(env, profile.env);
    if (options.env) {
      for (const key in options.env) env[key] = options.env[key];
    }
    env[COOKIE_VAR] = cookie;

    const shellPath = options.shell === true ? '/bin/sh' : options.shell || undefined;
    const file = shellPath ?? command;
    const argv = shellPath ? ['-c', command, shellPath, ...args] : [...args];
    // exec refuses a line that is too long (E2BIG): say which part, before anything starts.
    const tooLong = commandLineProblem(command, args, env);
    if (tooLong) {
      throw new InvalidSpawnOptionError(
        tooLong.field === 'args'
          ? `args[${tooLong.index}]`
          : tooLong.field === 'env'
            ? `env.${tooLong.name}`
            : 'command',
        `a command line the system can run: ${describeCommandLineProblem(tooLong, shellPath !== undefined)}`,
        tooLong.field === 'args'
          ? args[tooLong.index!]
          : tooLong.field === 'env'
            ? env[tooLong.name!]
            : command,
      );
    }
    const captureOpt = options.capture;
    const capture = captureOpt !== false;
    const headBytes = (captureOpt && captureOpt.headBytes) || 64 * 1024;
    const tailBytes = (captureOpt && captureOpt.tailBytes) || 64 * 1024;
    const spill = (captureOpt && captureOpt.spill) || 'separate';
    // Output for a model goes where it outlives the registry (created and pruned when a file is
    // first written); everything else is plumbing in the temp dir.
    const keepDir = captureOpt && captureOpt.outputDir;
    const outputDir = keepDir === true ? this.outputDir() : keepDir || undefined;
    const dir = outputDir ? () => prepareOutputDir(outputDir) : () => this.tempDir();
    // A directory that cannot be made or written (no writable HOME, a file in the way, a read-only
    // or full disk) must neither end the host nor lose the output: the registry's temp dir, then
    // the system's, take the file, and the result says where it went.
    const fallbackDirs: SpillDir[] = [
      ...(outputDir ? [{ dir: () => this.tempDir(), temporary: true }] : []),
      { dir: () => this.lastResortDir() },
    ];
    // Named when the file is opened (see SpillSink's `name`).
    const fileName = (suffix: string) =>
      outputDir ? () => outputFileName(cookie, suffix) : `${cookie}.${suffix}`;
    const pendingLimit = headBytes + tailBytes;
    const budgets = [
      new SpillBudget('call', (captureOpt ? captureOpt.maxFileBytes : undefined) ?? this.perProcessSpill),
      this.spillBudget,
    ];
    const stopAtLimit = captureOpt !== false && captureOpt?.onFileLimit === 'stop';
    const sinkOptions = (name: string | (() => string)) => ({
      dir,
      ...(outputDir ? { dirLabel: outputDir } : {}),
      fallbackDirs,
      name,
      pendingLimit,
      budgets,
      // Called after a write to the file, so never before `proc` below exists.
      ...(stopAtLimit ? { onLimit: () => proc.stopAtSpillLimit() } : {}),
    });
    const combined = spill === 'combined' ? new SpillSink(sinkOptions(fileName('out'))) : undefined;
    const sinkFor = (name: string) =>
      spill === 'combined'
        ? combined
        : spill === 'separate'
          ? new SpillSink(sinkOptions(fileName(name)))
          : undefined;
    const stdoutCapture = new OutputCapture({
      headBytes,
      tailBytes,
      sink: capture ? sinkFor('stdout') : undefined,
    });
    const stderrCapture = new OutputCapture({
      headBytes,
      tailBytes,
      sink: capture ? sinkFor('stderr') : undefined,
    });

    const request: ExecutorSpawnRequest = {
      file,
      args: argv,
      cwd,
      env,
      stdin: options.stdin ?? 'ignore',
      capture,
    };
    const { child, sandbox } = this.start(options.executor ?? this.executor, request, profile, cookie);
    const label = options.label ?? (args.length ? `${command} ${args.join(' ')}` : command);
    const proc = new ManagedProcess({
      owner: isHidden ? this.hiddenOwner : this.owner,
      id,
      command,
      args,
      label,
      cwd,
      shell: shellPath !== undefined,
      cookie,
      child,
      stdout: stdoutCapture,
      stderr: stderrCapture,
      combined,
      killGraceMs: options.killGraceMs ?? this.options.killGraceMs ?? 2000,
      drainMs: options.drainMs ?? this.options.drainMs ?? 1000,
      keepLeftoverOutput: options.keepLeftoverOutput === true,
      forceFile: capture && captureOpt !== undefined && captureOpt.spillFile === 'always',
      sandbox,
      ...(profile.kind === 'workspace-write' || profile.kind === 'protected'
        ? { sandboxActivity: () => this.activity.take(cookie) }
        : {}),
      // Read at the end: a child re-routed to another supervisor carries that one's limits.
      ...(child instanceof RoutedChild && isIsolated(profile)
        ? { resourceCheck: (outcome) => memoryCheck(child.limits)?.(outcome) }
        : {}),
    });
    if (!isHidden) this.processes.set(id, proc);
    this.live.add(proc);
    proc.start({
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    return proc;
  }

  /**
   * Starts a PTY (node-pty, loaded from `ptyModule`) through the supervisor, which relays its I/O,
   * or in the host without one. Blocks for the supervisor's fork (a few ms; the very first call
   * also waits for the supervisor to start), so `pid` is known when it returns, as with node-pty.
   * The PTY and its whole tree carry the manager's cookie: kill/dispose/host death end them.
   */
  spawnPty(options: SpawnPtyOptions): PtyProcess {
    if (this.disposing) throw new ProcessManagerDisposedError();
    const { file, args, cwd, cols, rows, ptyModule } = options;
    if (typeof file !== 'string' || file.length === 0) {
      throw new InvalidSpawnOptionError('file', 'a non-empty string', file);
    }
    if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) {
      throw new InvalidSpawnOptionError('args', 'an array of strings', args);
    }
    if (typeof cwd !== 'string' || !isAbsolute(cwd)) {
      throw new InvalidSpawnOptionError('cwd', 'an absolute path', cwd);
    }
    for (const [name, value] of [
      ['cols', cols],
      ['rows', rows],
    ] as const) {
      if (!Number.isInteger(value) || value <= 0) {
        throw new InvalidSpawnOptionError(name, 'a positive integer', value);
      }
    }
    if (typeof ptyModule !== 'string' || !isAbsolute(ptyModule)) {
      throw new InvalidSpawnOptionError(
        'ptyModule',
        "the absolute path of node-pty's entry (e.g. createRequire(import.meta.url).resolve('@lydell/node-pty'))",
        ptyModule,
      );
    }
    const requested = this.profileOf(options.sandbox);
    const cookie = `${this.id}-t${++this.counter}`;
    const env: Record<string, string> = {};
    for (const key in options.env) {
      const value = options.env[key];
      if (value !== undefined) env[key] = value;
    }
    env[COOKIE_VAR] = cookie;
    env.TERM ??= 'xterm-256color';
    // Credentials removed; then the sandbox's own variables (cache locations, TMPDIR, a credential's
    // placeholder) over the host's.
    const hidden = envFilter(requested);
    if (hidden) for (const key of Object.keys(env)) if (hidden(key, env[key])) delete env[key];
    const injector = requested.kind === 'workspace-write' ? this.options.credentials?.() : undefined;
    if (injector) for (const key of Object.keys(env)) if (injector.hides(env[key]!)) delete env[key];
    if (requested.kind === 'workspace-write' && requested.env) Object.assign(env, requested.env);
    const onExited = (pty: BasePty) => this.ptys.delete(pty);

    if (this.fallbackReason === undefined) {
      // Try the requested profile's supervisor, then the unsandboxed one, then the host.
      const order =
        requested.kind === 'none' || isRequired(requested) ? [requested] : [requested, NO_SANDBOX];
      for (const profile of order) {
        // A supervisor found stopped at the spawn (replaced at once) is followed by a new one of
        // the same profile, rather than the PTY going to the next profile; once.
        for (let attempt = 0; attempt < 2; attempt++) {
          if (profile.kind !== 'none' && this.sandboxBroken(profile)) break;
          const client = this.clientFor(profile, [ptyModule]);
          if (!client) break;
          const reply = client.spawnPty({ ptyModule, file, args, cwd, env, cols, rows }, onExited);
          if (reply === 'stopped') continue;
          if (reply === undefined) break; // that supervisor is gone (its loss was handled)
          if (!('pid' in reply)) throw new PtySpawnError(options.label ?? file, reply);
          this.ptys.add(reply);
          return reply;
        }
      }
    }
    return this.spawnPtyLocally(options, requested, env, cookie, onExited);
  }

  /**
   * Starts the supervisor of a profile now instead of on the first spawn, taking its startup (a
   * node boot, ~100 ms; inside bwrap a little more) off the first command. No-op without one.
   */
  warmUp(sandbox?: SandboxProfile): void {
    if (this.disposing || this.fallbackReason !== undefined) return;
    const profile = this.profileOf(sandbox);
    if (profile.kind !== 'none' && this.sandboxBroken(profile)) return;
    if (!this.clientFor(profile)) return;
    // One hidden `true` through that supervisor, once per profile: the first spawn pays for code
    // paths no later one does (the host's capture and handle setup, the supervisor's spawn and
    // pid lookups), so the first real command costs about what the tenth does.
    const key = sandboxKey(profile);
    if (this.warmedUp.has(key)) return;
    this.warmedUp.add(key);
    try {
      const proc = this.spawnHidden('true', [], { sandbox, capture: { spill: 'none' } });
      void proc.result.catch(() => undefined);
    } catch (error) {
      this.logger?.debug({ err: error }, 'process manager: the warm-up spawn could not start');
    }
  }

  /** spawn() for the manager's own plumbing: not listed, no events, killed at dispose like any. */
  private spawnHidden(command: string, args: readonly string[], options: SpawnOptions): ManagedProcess {
    this.hiddenSpawn = true;
    try {
      return this.spawn(command, args, options);
    } finally {
      this.hiddenSpawn = false;
    }
  }

  /**
   * Paths every isolated sandbox of this manager gives, whatever the profile asks: `writable`
   * directories (a trash, a scratch directory for logs) and `visible` ones (a runner's own files
   * under the private /tmp, read-only). Runners register them when they are set up, before their
   * first command, so every tool of a registry meets the same sandbox (one network namespace, one
   * /tmp) instead of one per tool.
   */
  shareWithSandbox(paths: { writable?: readonly string[]; visible?: readonly string[] }): void {
    for (const p of paths.writable ?? []) this.shared.writable.add(resolve(this.cwd, p));
    for (const p of paths.visible ?? []) this.shared.visible.add(resolve(this.cwd, p));
    this.profileMemo.length = 0;
  }

  /**
   * A spawn's `sandbox` option checked, its relative paths resolved and the shared paths added: the
   * same object for an option of the same shape (each field the same value or the same array
   * object) as a recent call's, so its key, its supervisor and its env filter are found without
   * rebuilding path lists or JSON on every spawn. Callers pass profiles as immutable values (the
   * gate builds a new policy when its paths change); an array changed in place after a spawn is
   * not seen by later ones.
   */
  private profileOf(sandbox: SandboxProfile | undefined): SandboxProfile {
    if (sandbox === undefined || sandbox === null || typeof sandbox !== 'object') {
      return this.withShared(normalizeSandboxProfile(sandbox, this.cwd));
    }
    const injector = this.options.credentials?.();
    if (injector !== this.memoInjector) {
      this.profileMemo.length = 0;
      this.memoInjector = injector;
    }
    const memo = this.profileMemo;
    for (let i = 0; i < memo.length; i++) {
      const entry = memo[i]!;
      if (sameShape(entry.input, sandbox)) {
        if (i > 0) memo.unshift(...memo.splice(i, 1));
        return entry.profile;
      }
    }
    const profile = this.withShared(normalizeSandboxProfile(sandbox, this.cwd));
    // A copy of the input's fields (the caller may reuse its object with other values).
    memo.unshift({ input: { ...sandbox }, profile });
    if (memo.length > PROFILE_MEMO_SIZE) memo.pop();
    return profile;
  }

  /** A requested profile with the shared paths added (isolated kinds only). */
  private withShared(profile: SandboxProfile): SandboxProfile {
    if (profile.kind === 'workspace-write') {
      if (profile.network === 'proxy') {
        profile = { ...profile, env: { ...profile.env, ...proxyEnv() } };
        // Credentials that never enter: their placeholders, the CA bundle's variables, git's helpers.
        const injector = this.options.credentials?.();
        if (injector) profile = { ...profile, env: { ...profile.env, ...injector.sandboxEnv() } };
      }
      // The container engine through the policy socket: docker, compose and podman's Docker API
      // clients find it (DOCKER_HOST; /run/docker.sock points there too).
      if (profile.engine)
        profile = {
          ...profile,
          env: { ...profile.env, ...engineSandboxEnv(`${ENGINE_DIR_IN_SANDBOX}/docker.sock`) },
        };
      // Where homes are closed, the shared output directory is too (it may live outside the home:
      // $XDG_CACHE_HOME): other workspaces' output files are theirs. This one's is kept visible.
      const outputRoot = defaultOutputDir(process.env);
      if (
        profile.closedPaths?.length &&
        !profile.closedPaths.some((c) => outputRoot === c || outputRoot.startsWith(`${c}/`)) &&
        existsSync(outputRoot)
      )
        profile = { ...profile, closedPaths: [...profile.closedPaths, outputRoot].sort() };
      if (this.shared.writable.size === 0 && this.shared.visible.size === 0) return profile;
      return {
        ...profile,
        writableRoots: [...new Set([...profile.writableRoots, ...this.shared.writable])].sort(),
        readOnlyPaths: [...new Set([...profile.readOnlyPaths, ...this.shared.visible])].sort(),
      };
    }
    if (profile.kind === 'read-only' && this.shared.visible.size > 0) {
      return {
        ...profile,
        visiblePaths: [...new Set([...(profile.visiblePaths ?? []), ...this.shared.visible])].sort(),
      };
    }
    return profile;
  }

  /**
   * File operations that run where a command in `sandbox` would: through that profile's
   * supervisor, inside its mount namespace, so the kernel resolves links and refuses writes to
   * what is read-only there (no check-then-write in the host). No profile: in this process. A
   * required profile whose sandbox cannot run (or without a supervisor) fails each operation with
   * ESANDBOX rather than touching the files from the host.
   */
  fileSystem(sandbox?: SandboxProfile): SandboxFileSystem {
    const profile = this.profileOf(sandbox);
    const fail = (why: string) =>
      Promise.reject(
        Object.assign(new Error(`file operations in the ${profile.kind} sandbox are unavailable: ${why}`), {
          code: 'ESANDBOX',
        }),
      );
    return sandboxFileSystem((op, args) => {
      if (this.disposing) return fail('the process manager was disposed');
      if (profile.kind === 'none') return performFs(op, args);
      const unavailable = () => (isRequired(profile) ? undefined : performFs(op, args));
      if (this.fallbackReason !== undefined || this.sandboxBroken(profile)) {
        return (
          unavailable() ??
          fail(this.brokenSandboxes.get(sandboxKey(profile)) ?? this.fallbackReason ?? 'no supervisor')
        );
      }
      const client = this.clientFor(profile);
      if (!client) return unavailable() ?? fail('its supervisor could not start');
      return client.fs(op, args);
    });
  }

  /**
   * A spawn's id and cookie: the caller's `process_id` / `processId` (checked: a string no listed
   * process has), else the next free `p<n>`. The cookie never contains a caller's id (it is an
   * environment value every sweep matches exactly): `<manager>-p<n>` or, for a caller's id,
   * `<manager>-x<n>`.
   */
  private newProcessId(options: SpawnOptions): { id: string; cookie: string } {
    const requested = requestedProcessId(options);
    if (requested !== undefined) {
      const holder = this.processes.get(requested);
      if (holder) {
        const field =
          options.process_id !== undefined && options.process_id !== null ? 'process_id' : 'processId';
        throw new DuplicateProcessIdError(field, requested, holder);
      }
      return { id: requested, cookie: `${this.id}-x${++this.counter}` };
    }
    let id: string;
    do id = `p${++this.counter}`;
    while (this.processes.has(id));
    return { id, cookie: `${this.id}-${id}` };
  }

  /** The process with this id (running, or finished and still listed). pai's name: `get_process`. */
  get(id: string): ManagedProcess | undefined {
    return this.processes.get(id);
  }

  /** pai's `get_process(process_id)`: `get()`. */
  get_process(process_id: string): ManagedProcess | undefined {
    return this.get(process_id);
  }

  /**
   * Running processes and the latest finished ones (`historyLimit`), with core's field names and
   * pai's (`process_id`, `started_at` as a Date, `is_running`, `exit_code`). pai's name: `list_processes`.
   */
  list(): ManagedProcessInfo[] {
    return [...this.processes.values()].map(toProcessInfo);
  }

  /** pai's `list_processes()`: `list()`. */
  list_processes(): ManagedProcessInfo[] {
    return this.list();
  }

  /**
   * pai's `kill(process_id, timeout)`: SIGTERM to the process's whole tree, SIGKILL to what is left
   * after `timeout` seconds (default: the grace the process was spawned with — the spawn's
   * `killGraceMs`, else the manager's, 2 s; pai's default is 5.0, pass it to match), then a sweep
   * for escapees by cookie. Resolves once the process has ended and its result is final: true for
   * an id the manager knows (as pai, also when it had already finished: what it left running is
   * swept), false for an unknown id. Throws InvalidProcessArgumentError for a bad `timeout`.
   */
  async kill(id: string, timeout?: number): Promise<boolean> {
    const graceMs = killGraceFromSeconds('kill()', timeout);
    const proc = this.processes.get(id);
    if (!proc) return false;
    await proc.terminate('killed', graceMs);
    await proc.result;
    return true;
  }

  /**
   * Kills every process (running ones by their trees; finished ones' escapees by cookie) and sweeps
   * the manager's cookie prefix. `timeout`: seconds between SIGTERM and SIGKILL, default each
   * process's grace (see kill()). pai's `kill_all(timeout=10.0)` is the same with pai's default.
   */
  async killAll(timeout?: number): Promise<void> {
    const graceMs = killGraceFromSeconds('killAll()', timeout);
    await Promise.all(
      [...this.processes.values()].map((p) => p.terminate('killed', graceMs).then(() => p.result)),
    );
    sweepCookie({ prefix: this.cookiePrefix });
  }

  /** pai's `kill_all(timeout=10.0)`: `killAll()` with pai's default of 10 seconds of SIGTERM grace. */
  async kill_all(timeout: number = PAI_KILL_ALL_TIMEOUT_S): Promise<void> {
    killGraceFromSeconds('kill_all()', timeout);
    await this.killAll(timeout);
  }

  /**
   * Takes over what a finished process left running (`result.leftRunning`): a handle to watch,
   * page the output of (with `keepLeftoverOutput: true` at spawn it includes every byte the
   * leftovers write after the result), and kill them. One handle per process.
   */
  adoptLeftovers(proc: ManagedProcess | string): LeftoverHandle {
    const p = typeof proc === 'string' ? this.processes.get(proc) : proc;
    if (!p || !p.cookie.startsWith(this.cookiePrefix)) {
      throw new LeftoverAdoptionError(
        'proc',
        'a process this manager spawned (or its id)',
        typeof proc === 'string' ? proc : proc?.id,
      );
    }
    if (p.isRunning) {
      throw new LeftoverAdoptionError('proc', 'a process that has ended (await proc.result first)', p.id);
    }
    let handle = this.leftoverHandles.get(p);
    if (!handle) {
      handle = new ProcessLeftovers(p, { graceMs: this.options.killGraceMs ?? 2000 });
      this.leftoverHandles.set(p, handle);
    }
    return handle;
  }

  /** Whether a supervisor runs, whether sandboxes apply, and what a workspace profile could not protect. */
  async status(): Promise<ProcessManagerStatus> {
    const probed = await probeSandbox();
    const broken = [...this.brokenSandboxes.values()][0];
    const clients = [...this.clients.values()];
    const supervisor =
      this.fallbackReason !== undefined
        ? 'fallback'
        : clients.some((c) => c.status === 'ready')
          ? 'running'
          : clients.some((c) => c.status === 'starting')
            ? 'starting'
            : 'not-started';
    const spawner =
      this.fallbackReason !== undefined
        ? { kind: 'node' as const, reason: `no supervisor: ${this.fallbackReason}` }
        : [...this.clients.values()].find((c) => c.status === 'ready' && c.spawner)?.spawner;
    const guard = this.guardStatus();
    return {
      supervisor,
      sandbox:
        broken !== undefined && probed.available ? { ...probed, available: false, reason: broken } : probed,
      skippedReadOnlyPaths: [...this.skipped],
      ...(spawner ? { spawner } : {}),
      guard,
      plants: await this.activity.plants(),
      limits: limitsStatus(
        this.lastLimits?.resources ?? resourcesOf({ kind: 'workspace-write' })!,
        [...(this.cgroupBroken ? [this.cgroupBroken] : []), ...this.limitProblems],
        this.cgroupBroken === undefined,
      ),
    };
  }

  /**
   * What the sandbox's guard refused a spawn (or a PTY session: its cookie) and the plants its
   * writes left, since the last time it was asked; removed from the log. Spawns get theirs in
   * their result (`sandboxRefusals`, `plants`); a terminal asks after each command.
   */
  takeSandboxActivity(cookie: string): Promise<SandboxActivity | undefined> {
    return this.activity.take(cookie);
  }

  /** Forgets reported plants (all, or those at these paths) once a human has looked at them. */
  clearPlants(paths?: readonly string[]): number {
    return this.activity.clear(paths);
  }

  /**
   * What a sandbox's mounts were made of: its /tmp directory, each writable root, the proxy's
   * socket, by device and inode. A mount holds the directory it was made from: one deleted (and
   * made again) outside leaves the sandbox with a dead mount (`getcwd: cannot access parent
   * directories`, writes to /tmp failing, no network).
   */
  private footingOf(profile: SandboxProfile, proxied: boolean): { path: string; id: string }[] {
    const paths = [
      ...(this.sandboxTmpDir ? [this.sandboxTmpDir] : []),
      ...(profile.kind === 'workspace-write' ? profile.writableRoots : []),
      ...(proxied && this.proxySocketPath ? [this.proxySocketPath] : []),
    ];
    return paths.map((path) => ({ path, id: fileId(path) }));
  }

  /** Whether everything a sandbox stands on is still what it was (a few stats per spawn). */
  private sound(client: SupervisorClient): boolean {
    const footing = this.footing.get(client);
    if (!footing) return true;
    for (const { path, id } of footing) {
      if (fileId(path) === id) continue;
      this.logger?.warn(
        { path },
        'sandbox: something it was built on is gone or was replaced; the next commands get a new sandbox',
      );
      if (path === this.sandboxTmpDir) this.sandboxTmpDir = undefined;
      if (path === this.proxySocketPath) this.dropProxy();
      return false;
    }
    return true;
  }

  /** A supervisor that takes no new work: closed now if idle, else once what it runs has ended. */
  private retireWhenIdle(client: SupervisorClient): void {
    if (!client.busy) {
      client.close();
      this.retire(client);
      return;
    }
    this.draining.add(client);
  }

  /**
   * An isolated sandbox with nothing running in it for its `idleMs` is closed: its tmpfs (/dev/shm,
   * /run, /var/tmp) is freed with its mount namespace. The next command starts a new one (its /tmp,
   * a host directory of this manager, is kept). Busy again before the bound: the timer stops.
   */
  private idleChange(client: SupervisorClient, key: string, busy: boolean): void {
    const timer = this.idleTimers.get(client);
    if (timer) {
      clearTimeout(timer);
      this.idleTimers.delete(client);
    }
    const idleMs = this.limited.get(client)?.resources.idleMs ?? 0;
    if (busy || idleMs === 0 || client.status !== 'ready' || this.disposing) return;
    const idle = setTimeout(() => {
      this.idleTimers.delete(client);
      if (client.busy || (client.status !== 'ready' && client.status !== 'starting')) return;
      if (this.clients.get(key) === client) this.clients.delete(key);
      this.logger?.debug({ idleMs }, 'sandbox idle past its bound: closed (its tmpfs memory is freed)');
      client.close();
      this.retire(client);
    }, idleMs);
    idle.unref();
    this.idleTimers.set(client, idle);
  }

  /**
   * The directory of this manager's container-engine policy socket (started on first use): the
   * engine's Docker API, with what `policy` allows forwarded to the host's engine (podman or
   * docker), for this manager's workspace and session. One per manager: the first policy wins.
   */
  private engineDir(policy: Readonly<Record<string, unknown>>): string | undefined {
    if (!this.engine) {
      let dir: string;
      try {
        dir = join(this.tempDir(), 'engine');
        mkdirSync(dir, { recursive: true, mode: 0o700 });
      } catch {
        return undefined;
      }
      const proxy = new EngineProxy({ ...(this.logger ? { logger: this.logger } : {}) });
      this.engine = { proxy, dir };
      // Listening takes a tick; the sandbox binds the directory, so the socket appears inside
      // when it does.
      proxy
        .start({
          workspace: this.cwd,
          sessionId: this.cookiePrefix.replace(/[^A-Za-z0-9_.-]/g, '_') || 'conch',
          policy,
          socketPath: join(dir, 'docker.sock'),
        })
        .catch((error: unknown) => {
          this.logger?.warn({ err: error }, 'container engine policy socket could not start');
        });
    }
    return this.engine.dir;
  }

  /** The proxy whose socket went away: the next sandbox that needs one starts a new proxy. */
  private dropProxy(): void {
    this.proxy?.close();
    this.proxy = undefined;
    this.proxySocketPath = undefined;
  }

  private guardStatus(): ProcessManagerStatus['guard'] {
    const active = [...this.clients.values()].some((c) => c.guarded);
    if (this.options.guard === false)
      return { available: false, active, reason: 'switched off (guard: false)' };
    if (this.guardBroken) return { available: false, active, reason: this.guardBroken };
    const available = guardAvailability();
    return available.available
      ? { available: true, active }
      : { available: false, active, reason: available.reason };
  }

  /** The guard's rules for a profile's supervisor, or undefined when it runs without one. */
  private guardRules(profile: SandboxProfile): GuardRules | undefined {
    if (this.options.guard === false || this.guardBroken !== undefined) return undefined;
    const rules = guardRulesFor(profile, COOKIE_VAR);
    if (!rules) return undefined;
    const available = guardAvailability();
    if (!available.available) {
      if (!this.warnedGuard) {
        this.warnedGuard = true;
        this.logger?.warn(
          { reason: available.reason },
          'sandbox guard unavailable: sandboxes rely on their mounts alone (protections hold for the paths as they were at start; see status().guard)',
        );
      }
      return undefined;
    }
    return rules;
  }

  /**
   * Scans every running isolated sandbox for servers now and resolves once each one listening is
   * forwarded to the host's 127.0.0.1 (or skipped: the port is taken on the host). For a consumer
   * about to connect to a local port (a browser opening http://127.0.0.1:<port>/), so it does not
   * depend on the poll's timing. The scan and the host's bind calls happen within this call.
   * Resolves at once when forwarding is off or nothing is sandboxed.
   */
  refreshForwardedPorts(): Promise<void> {
    if (this.disposing || !this.forwarder) return Promise.resolve();
    return this.forwarder.refresh();
  }

  /** The ports forwarded from sandboxes to the host's 127.0.0.1 now. */
  forwardedPorts(): ForwardedPort[] {
    return this.forwarder?.forwarded() ?? [];
  }

  /** Kills every process (and escapee) this manager started; removes its own temp dir. */
  dispose(): Promise<void> {
    this.disposing ??= this.doDispose();
    return this.disposing;
  }

  /** @internal host exit: SIGKILL everything synchronously. */
  killAllSync(): void {
    for (const proc of this.live) proc.killSync();
    for (const pty of this.ptys) killTreeSync(pty.pid, pty.cookie);
    sweepCookie({ prefix: this.cookiePrefix });
  }

  private onStarted(proc: ManagedProcess): void {
    processEvents.started(this.events, proc);
  }

  private onFinished(proc: ManagedProcess, result: ProcessResult): void {
    this.live.delete(proc);
    processEvents.exited(this.events, proc, result);
    processEvents.trimHistory(this.processes, this.options.historyLimit ?? 50);
  }

  // ---- routing: supervisor per profile, else the host ----

  /**
   * What a sandbox keeps visible (read-only) even under its private /tmp: the registry's cwd and
   * the home directory (a HOME under /tmp — containers, tests — is read as the user's home is).
   */
  private visible(): string[] {
    return [this.cwd, homedir(), this.ownOutputDir()];
  }

  /**
   * The directory this manager's output files go to, made now: a sandbox binds it at start (the
   * model reads an output_file with `cat`), and a path that does not exist then cannot be bound.
   */
  private ownOutputDir(): string {
    const dir = this.outputDir();
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch {
      // unwritable: spill files go to the last-resort directory, which is under the private /tmp
    }
    return dir;
  }

  /**
   * The unix socket of this manager's network proxy (started on first use): the one way out of a
   * sandbox with `network: 'proxy'`, each destination decided by `options.network`.
   */
  private proxySocket(): string | undefined {
    if (!this.proxy) {
      let socketPath: string;
      try {
        const dir = join(this.tempDir(), 'net');
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        socketPath = join(dir, 'proxy.sock');
      } catch {
        return undefined;
      }
      const decide = this.options.network?.decide;
      const lookup = this.options.network?.lookup;
      this.proxy = new NetworkProxy({
        socketPath,
        decide: decide ?? (async () => ({ allowed: false, reason: 'no network rules are configured' })),
        logger: this.logger,
        // Read per connection: credentials configured after the proxy started are used too.
        intercept: (destination) => this.options.credentials?.()?.interceptFor(destination),
        ...(lookup ? { lookup } : {}),
      });
      this.proxySocketPath = socketPath;
      // Listening takes a tick; the first connection comes from a command, well after.
      this.proxy.start().catch((error: unknown) => {
        this.logger?.warn(
          { err: error },
          'network proxy could not start: sandboxed commands have no network',
        );
      });
    }
    return this.proxySocketPath;
  }

  /**
   * Requests the container-engine policy refused since `since` (performance.now()), for a
   * command's result; none without the engine door.
   */
  engineRefusedSince(since: number): EngineRefusal[] {
    if (!this.engine) return [];
    // The proxy stamps refusals with Date.now(): the same instant on that clock.
    const from = Date.now() - (performance.now() - since);
    // Requests only: the proxy also keeps its start-up notice (no engine on this host, method '-').
    return this.engine.proxy.refusals().filter((r) => r.at >= from && r.method !== '-');
  }

  /**
   * The host path of the current credential injector's CA bundle (written on first use into this
   * manager's private net directory, outside every writable root), or undefined without one.
   */
  private caBundlePath(): string | undefined {
    const injector = this.options.credentials?.();
    if (!injector) return undefined;
    if (this.caBundle?.injector === injector && existsSync(this.caBundle.path)) return this.caBundle.path;
    try {
      const dir = join(this.tempDir(), 'net');
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      this.caBundle = { injector, path: injector.writeCaBundle(dir) };
      return this.caBundle.path;
    } catch (error) {
      this.logger?.warn(
        { err: error },
        'credential CA bundle could not be written: TLS to its hosts will fail',
      );
      return undefined;
    }
  }

  /** Connections the network proxy refused since `since` (performance.now()), for a command's result. */
  networkBlockedSince(since: number): BlockedConnection[] {
    return this.proxy?.blockedSince(since) ?? [];
  }

  /**
   * The host directory isolated sandboxes see as /tmp: private to this manager (not the host's
   * /tmp, whose sockets — ssh-agent, X11 — must stay out of reach), kept across sandbox
   * replacements, removed with the manager's temp dir.
   */
  private sandboxTmp(): string | undefined {
    if (this.sandboxTmpDir && fileId(this.sandboxTmpDir) !== '') return this.sandboxTmpDir;
    try {
      const dir = join(this.tempDir(), 'sandbox-tmp');
      mkdirSync(dir, { recursive: true, mode: 0o1777 });
      chmodSync(dir, 0o1777);
      this.sandboxTmpDir = dir;
      return dir;
    } catch {
      this.sandboxTmpDir = undefined;
      return undefined; // an empty tmpfs then
    }
  }

  /** Starts a request: through a supervisor when the executor can say what to run, else in the host. */
  private start(
    executor: Executor,
    request: ExecutorSpawnRequest,
    profile: SandboxProfile,
    cookie: string,
  ): { child: SpawnedChild; sandbox: () => SandboxKind } {
    if (!executor.prepare) {
      // An executor that only knows how to spawn (a remote one, say) runs as it is.
      if (profile.kind !== 'none') {
        this.warnSandbox(`executor '${executor.name}' cannot be sandboxed by a profile`);
      }
      return { child: executor.spawn(request), sandbox: () => 'none' };
    }
    const prepared = executor.prepare(request);
    if (this.fallbackReason !== undefined && profile.kind === 'none') {
      // No supervisor: exactly the old in-process spawn, no wrapper.
      return { child: spawnDetached(prepared), sandbox: () => 'none' };
    }
    const child = new RoutedChild(prepared, cookie);
    this.route(child, profile);
    return { child, sandbox: () => child.sandbox };
  }

  private route(child: RoutedChild, profile: SandboxProfile): void {
    if (this.disposing) {
      child.onSpawnError('ECANCELED', 'the process manager was disposed before the process started');
      return;
    }
    if (this.fallbackReason !== undefined) {
      this.runInHost(child, profile);
      return;
    }
    // A sandbox of this shape that is running (or starting) has passed what sandboxBroken checks
    // (bwrap on PATH, its probe): only a new one asks again (its PATH lookup costs each spawn).
    if (profile.kind !== 'none' && !this.running(profile) && this.sandboxBroken(profile)) {
      this.fallBack(child, profile);
      return;
    }
    const client = this.clientFor(profile);
    if (client) client.submit(child);
    else if (profile.kind === 'none') this.route(child, profile);
    else this.fallBack(child, profile);
  }

  /**
   * A profile's sandbox cannot be set up: a required one (workspace-write, or read-only when the
   * gate relies on it) fails the spawn (ESANDBOX) — running it unsandboxed would break the promise
   * the gate allowed it on — any other runs unsandboxed (logged once, see status()).
   */
  private fallBack(child: RoutedChild, profile: SandboxProfile): void {
    if (!isRequired(profile)) {
      this.route(child, NO_SANDBOX);
      return;
    }
    const why = this.brokenSandboxes.get(sandboxKey(profile)) ?? 'bubblewrap does not work here';
    child.onSpawnError(
      'ESANDBOX',
      `the ${profile.kind} sandbox could not be set up (${why}), so the command was not run`,
    );
  }

  /** Whether a supervisor of exactly this profile's shape is ready or starting. */
  private running(profile: SandboxProfile): boolean {
    const status = this.clients.get(sandboxKey(profile))?.status;
    return status === 'ready' || status === 'starting';
  }

  /** Whether a profile is known not to work here (bwrap missing, probe failed, its supervisor failed). */
  private sandboxBroken(profile: SandboxProfile): boolean {
    const key = sandboxKey(profile);
    if (this.brokenSandboxes.has(key)) {
      if (!this.transientBroken.has(key)) return true;
      // It failed to start for a reason that may pass (bwrap gone for a while, a directory it
      // needs removed): the next command tries again from scratch, and fails the same way if not.
      this.brokenSandboxes.delete(key);
      this.transientBroken.delete(key);
      forgetBwrap();
    }
    const bwrap = findBwrap();
    const status = bwrap
      ? settledSandboxStatus(bwrap)
      : { available: false, reason: 'bwrap was not found on PATH' };
    if (status && !status.available) {
      this.markSandboxBroken(key, status.reason ?? 'bwrap does not work here');
      // bwrap missing may pass (reinstalled, PATH fixed): looked for again on the next command.
      if (!bwrap) this.transientBroken.add(key);
      return true;
    }
    if (!status) void probeSandbox(); // for status(); the supervisor's start is the real test
    return false;
  }

  private markSandboxBroken(key: string, reason: string): void {
    this.brokenSandboxes.set(key, reason);
    this.warnSandbox(reason);
  }

  private warnSandbox(reason: string): void {
    if (this.warnedSandbox) return;
    this.warnedSandbox = true;
    this.logger?.warn(
      { reason },
      'sandbox unavailable: commands that asked for a sandbox profile run unsandboxed (see status())',
    );
  }

  /** The running (or starting) supervisor of a profile; starts one if needed. Undefined if it cannot start. */
  private clientFor(
    profile: SandboxProfile,
    extraVisible: readonly string[] = [],
  ): SupervisorClient | undefined {
    const key = sandboxKey(profile);
    const existing = this.clients.get(key);
    if (existing && (existing.status === 'starting' || existing.status === 'ready')) {
      if (this.sound(existing)) return existing;
      // Something it stands on is gone (its /tmp, the proxy's socket, a writable root deleted and
      // made again): new commands get a sandbox built from scratch; what runs in the old one goes
      // on until it ends.
      this.clients.delete(key);
      this.retireWhenIdle(existing);
    }
    // A sandbox of the same kind in an older shape (the gate found new protected paths since it
    // started): while anything runs in it, later commands join it — one network namespace (a dev
    // server on its loopback stays reachable), one /tmp, one process view; once it is idle it is
    // replaced. Paths protected since it started are covered by the parser until then.
    const family = this.families.get(profile.kind);
    if (family && family !== key) {
      const older = this.clients.get(family);
      if (older && (older.status === 'starting' || older.status === 'ready')) {
        // A guarded sandbox takes the new shape's protections at once (its guard judges every
        // path), so it is joined whatever they add; spawns wait until the guard has them.
        const olderRules = older.guardedBy;
        const newer = olderRules ? guardRulesFor(profile, COOKIE_VAR) : undefined;
        if (older.busy && olderRules && newer && this.sound(older)) {
          const applied = this.guardKeys.get(older) ?? new Set<string>();
          if (!applied.has(key)) {
            applied.add(key);
            this.guardKeys.set(older, applied);
            void older.updateGuard(mergeGuardRules(olderRules, newer));
          }
          return older;
        }
        // Unguarded, joined only when the new shape hides nothing the older one shows: a secret
        // that appeared since (a new .env) must not be readable through the older sandbox.
        if (older.busy && !hidesMore(profile, this.profiles.get(family))) return older;
        // Busy: it keeps running what it runs (closed at dispose); idle: it goes now.
        if (!older.busy) {
          older.close();
          this.clients.delete(family);
          this.retire(older);
        }
      }
    }
    if (profile.kind !== 'none') this.families.set(profile.kind, key);
    this.profiles.set(key, profile);
    const supervisorOpt = typeof this.options.supervisor === 'object' ? this.options.supervisor : {};
    const execPath = supervisorOpt.execPath ?? process.execPath;
    let bwrap: { path: string; args: string[] } | undefined;
    let proxy: { socket: string; port: number; hostPorts?: readonly number[] } | undefined;
    if (profile.kind !== 'none') {
      const path = findBwrap();
      if (!path) {
        this.markSandboxBroken(key, 'bwrap was not found on PATH');
        this.transientBroken.add(key);
        return undefined;
      }
      const proxySocket =
        profile.kind === 'workspace-write' && profile.network === 'proxy' ? this.proxySocket() : undefined;
      const engineDir =
        profile.kind === 'workspace-write' && profile.engine ? this.engineDir(profile.engine) : undefined;
      const caBundle = proxySocket ? this.caBundlePath() : undefined;
      if (proxySocket)
        proxy = {
          socket: PROXY_SOCKET_IN_SANDBOX,
          port: PROXY_PORT,
          ...(profile.kind === 'workspace-write' && profile.hostPorts?.length
            ? { hostPorts: profile.hostPorts }
            : {}),
        };
      // The supervisor, node and the PTY module load inside the sandbox: keep their installs visible.
      const { args, skipped } = sandboxArgs(
        profile,
        [
          ...this.visible(),
          installRoot(SUPERVISOR_SCRIPT),
          installRoot(execPath),
          ...(DEFAULT_PTY_MODULE ? [installRoot(DEFAULT_PTY_MODULE)] : []),
          installRoot(GUARD_BINARY),
          ...extraVisible.map((p) => installRoot(p)),
        ],
        {
          tmp: this.sandboxTmp(),
          ...(proxySocket ? { proxySocket } : {}),
          ...(engineDir ? { engineDir } : {}),
          ...(caBundle ? { caBundle } : {}),
        },
      );
      for (const p of skipped) this.skipped.add(p);
      bwrap = { path, args };
    }
    const guardRules = bwrap ? this.guardRules(profile) : undefined;
    // What it may take from the machine (tmpfs sizes are in its bwrap arguments already).
    const limits =
      bwrap && isIsolated(profile)
        ? supervisorLimits(profile, this.id, this.cgroupBroken === undefined)
        : undefined;
    if (limits) this.lastLimits = limits;
    // Its own network namespace: servers it runs are forwarded to the host (not the bridge's port).
    const forwarder = bwrap && isIsolated(profile) ? this.forwarder : undefined;
    const client: SupervisorClient = new SupervisorClient({
      execPath,
      script: SUPERVISOR_SCRIPT,
      prefix: this.cookiePrefix,
      sandbox: profile.kind,
      ...(bwrap ? { bwrap, isolated: isIsolated(profile) } : {}),
      ...(proxy ? { proxy } : {}),
      ...(guardRules
        ? {
            guard: {
              binary: GUARD_BINARY,
              rules: guardRules,
              onEvent: (event: GuardEvent) => this.activity.record(event),
            },
          }
        : {}),
      ...(envFilter(profile) ? { envFilter: envFilter(profile)! } : {}),
      loadRoots: [this.cwd, ...(profile.kind === 'workspace-write' ? profile.writableRoots : [])],
      ...(limits
        ? {
            limits: {
              ...limits,
              onApplied: (problem: string | undefined) => {
                if (!problem || this.limitProblems.has(problem)) return;
                this.limitProblems.add(problem);
                this.logger?.warn(
                  { problem },
                  'sandbox: a resource limit could not be applied (see status().limits)',
                );
              },
            },
          }
        : {}),
      logger: this.logger,
      ...(supervisorOpt.unresponsiveMs !== undefined ? { unresponsiveMs: supervisorOpt.unresponsiveMs } : {}),
      ...(supervisorOpt.nativeSpawn === false ? { nativeSpawn: false } : {}),
      onLost: (lost, reason, queued, started, unresponsive) =>
        this.onSupervisorLost(profile, lost, reason, queued, started, unresponsive),
      onBusyChange: (busy: boolean) => {
        forwarder?.setBusy(client, busy);
        if (limits) this.idleChange(client, key, busy);
        // A replaced sandbox (see sound()) goes once what it ran has ended.
        if (!busy && this.draining.delete(client)) {
          client.close();
          this.retire(client);
        }
      },
      onEnd: () => {
        if (forwarder) void forwarder.remove(client);
        const timer = this.idleTimers.get(client);
        if (timer) clearTimeout(timer);
        this.idleTimers.delete(client);
      },
    });
    if (limits) this.limited.set(client, limits);
    // Neither the bridge's port nor a host service's (its listener inside forwards to the host:
    // forwarding it back out would loop).
    forwarder?.add(client, {
      sandbox: profile.kind,
      excluded: proxy ? [proxy.port, ...(proxy.hostPorts ?? [])] : [],
    });
    this.clients.set(key, client);
    if (bwrap) this.footing.set(client, this.footingOf(profile, proxy !== undefined));
    if (!client.start()) {
      this.onSupervisorLost(profile, client, client.lostReason ?? 'could not start', [], false);
      return undefined;
    }
    return client;
  }

  /** A supervisor closed before dispose: waited for at dispose if it has not exited by then. */
  private retire(client: SupervisorClient): void {
    this.retired.add(client);
    void client.exited(SUPERVISOR_EXIT_MS, false).then(() => this.retired.delete(client));
  }

  private onSupervisorLost(
    profile: SandboxProfile,
    client: SupervisorClient,
    reason: string,
    queued: RoutedChild[],
    started: boolean,
    unresponsive = false,
  ): void {
    const key = sandboxKey(profile);
    if (this.clients.get(key) === client) this.clients.delete(key);
    if (unresponsive) {
      // Killed by the health check (logged by the client); the next spawn starts a new one.
    } else if (started) {
      // It ran and died: what it ran was killed and reported; the next spawn starts a new one.
      this.logger?.warn(
        { reason, sandbox: profile.kind },
        'process supervisor died; its processes were killed',
      );
    } else if (profile.kind !== 'none' && this.limited.get(client)?.outer.length && !this.cgroupBroken) {
      // A sandbox that could not start in a systemd scope of its own: sandboxes go on with
      // rlimits (said once and in status().limits); the spawns it held are routed to one.
      this.cgroupBroken = `a sandbox could not start in a systemd scope (${reason}): limits are rlimits`;
      this.logger?.warn({ reason }, 'sandbox: no cgroup of its own; resource limits fall back to rlimits');
      for (const child of queued) this.route(child, profile);
      return;
    } else if (profile.kind !== 'none' && client.guardedBy !== undefined && this.guardBroken === undefined) {
      // A guarded sandbox that never started: sandboxes go on without the guard (their mounts
      // alone), said once and in status(); the spawns it held are routed to one.
      this.guardBroken = `a guarded sandbox could not start: ${reason}`;
      this.logger?.warn(
        { reason },
        'sandbox guard unavailable: sandboxes rely on their mounts alone (protections hold for the paths as they were at start; see status().guard)',
      );
      for (const child of queued) this.route(child, profile);
      return;
    } else if (profile.kind !== 'none') {
      this.markSandboxBroken(key, `the sandboxed supervisor could not start: ${reason}`);
      this.transientBroken.add(key);
    } else if (this.fallbackReason === undefined) {
      this.fallbackReason = reason;
      this.logger?.warn({ reason }, 'process supervisor unavailable: spawning in-process (see status())');
    }
    for (const child of queued) {
      if (started) this.route(child, profile);
      else this.fallBack(child, profile);
    }
  }

  /** Starts a routed child in the host (no supervisor), wrapped in bwrap for a profile where it works. */
  private runInHost(child: RoutedChild, profile: SandboxProfile): void {
    const launch = (status: SandboxStatus | undefined) => {
      if (this.disposing) {
        child.onSpawnError('ECANCELED', 'the process manager was disposed before the process started');
        return;
      }
      let request = child.request;
      let kind: SandboxKind = 'none';
      if (profile.kind !== 'none' && status?.available && status.bwrap) {
        const proxySocket =
          profile.kind === 'workspace-write' && profile.network === 'proxy' ? this.proxySocket() : undefined;
        const caBundle = proxySocket ? this.caBundlePath() : undefined;
        const { args, skipped } = sandboxArgs(profile, this.visible(), {
          tmp: this.sandboxTmp(),
          ...(proxySocket ? { proxySocket } : {}),
          ...(caBundle ? { caBundle } : {}),
        });
        for (const p of skipped) this.skipped.add(p);
        // One bwrap per command: with a pid namespace, bwrap's monitor is the child the host
        // knows, and the sandbox must die with it (a kill of the monitor's group does not reach
        // inside the namespace's own session).
        const perCommand = isIsolated(profile) ? ['--die-with-parent'] : [];
        request = {
          ...request,
          file: status.bwrap,
          args: [...args, ...perCommand, '--', ...commandLimits(profile), request.file, ...request.args],
        };
        kind = profile.kind;
      } else if (profile.kind !== 'none') {
        this.markSandboxBroken(sandboxKey(profile), status?.reason ?? 'bwrap does not work here');
        if (isRequired(profile)) {
          this.fallBack(child, profile);
          return;
        }
      }
      try {
        child.bindLocal(spawnDetached(request), kind);
      } catch (error) {
        const e = error as NodeJS.ErrnoException;
        child.onSpawnError(e.code ?? 'ESPAWN', e.message);
      }
    };
    if (profile.kind === 'none') {
      launch(undefined);
      return;
    }
    const bwrap = findBwrap();
    const settled = bwrap ? settledSandboxStatus(bwrap) : undefined;
    if (settled || !bwrap) launch(settled ?? { available: false, reason: 'bwrap was not found on PATH' });
    else void probeSandbox({ bwrap }).then(launch);
  }

  private spawnPtyLocally(
    options: SpawnPtyOptions,
    profile: SandboxProfile,
    env: Record<string, string>,
    cookie: string,
    onExited: (pty: BasePty) => void,
  ): PtyProcess {
    let file = options.file;
    let args = [...options.args];
    let kind: SandboxKind = 'none';
    if (profile.kind !== 'none') {
      const bwrap = findBwrap();
      const status = bwrap ? settledSandboxStatus(bwrap) : undefined;
      if (bwrap && status?.available !== false && !this.brokenSandboxes.has(sandboxKey(profile))) {
        const sandbox = sandboxArgs(profile, [...this.visible(), installRoot(options.ptyModule)], {
          tmp: this.sandboxTmp(),
        });
        for (const p of sandbox.skipped) this.skipped.add(p);
        // bwrap's --new-session would take the shell's controlling terminal away: not for a PTY.
        const bwrapArgs = sandbox.args.filter((a) => a !== '--new-session');
        if (isIsolated(profile)) bwrapArgs.push('--die-with-parent');
        // The PTY was allocated out here, in the host's devpts: the read-only profile's private
        // /dev would not have its /dev/pts/N (`tty` would say "not a tty").
        const dev = bwrapArgs.indexOf('--dev');
        if (dev !== -1) bwrapArgs.splice(dev + 2, 0, '--dev-bind', '/dev/pts', '/dev/pts');
        args = [...bwrapArgs, '--', ...commandLimits(profile), file, ...args];
        file = bwrap;
        kind = profile.kind;
      } else {
        const why =
          this.brokenSandboxes.get(sandboxKey(profile)) ?? status?.reason ?? 'bwrap was not found on PATH';
        if (isRequired(profile)) {
          throw new PtySpawnError(options.label ?? options.file, {
            code: 'ESANDBOX',
            message: `the ${profile.kind} sandbox could not be set up (${why}), so the terminal was not started`,
          });
        }
        this.warnSandbox(why);
      }
    }
    let pty: LocalPty;
    try {
      const node = loadPtyModule(options.ptyModule).spawn(file, args, {
        name: env.TERM ?? 'xterm-256color',
        cols: options.cols,
        rows: options.rows,
        cwd: options.cwd,
        env,
      });
      pty = new LocalPty(node, cookie, kind, onExited);
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      throw new PtySpawnError(options.label ?? options.file, { code: e.code ?? 'EPTY', message: e.message });
    }
    this.ptys.add(pty);
    return pty;
  }

  private async doDispose(): Promise<void> {
    try {
      const graceMs = this.options.killGraceMs ?? 2000;
      await Promise.all([
        ...[...this.live].map((p) => p.terminate('killed')),
        ...[...this.ptys].map((pty) => killTree(pty.pid, pty.cookie, graceMs)),
      ]);
      // What finished processes left behind (escapees) is swept, and dispose waits until it is gone.
      await sweepCookieUntilGone({ prefix: this.cookiePrefix });
      await Promise.all([...this.live].map((p) => p.result));
    } finally {
      await this.forwarder?.close();
      const clients = [...this.clients.values(), ...this.retired];
      for (const client of clients) client.close();
      this.clients.clear();
      this.retired.clear();
      // Each supervisor (its bwrap, the sandbox's pid 1) exits at once once disconnected: wait
      // for it, so nothing of this manager is left running when dispose() resolves.
      await Promise.all(clients.map((client) => client.exited(SUPERVISOR_EXIT_MS)));
      this.proxy?.close();
      await this.engine?.proxy.stop().catch(() => undefined);
      this.removeExitHook();
      this.removeTempHook?.();
      if (this.ownTempDir) removeSync(this.ownTempDir, { recursive: true, force: true });
    }
  }
}

/** How long dispose() waits for a disconnected supervisor to exit before it SIGKILLs its tree. */
const SUPERVISOR_EXIT_MS = 5_000;

/** Whether `next` hides (masks) a path, or a variable, that `previous` does not. */
function hidesMore(next: SandboxProfile, previous: SandboxProfile | undefined): boolean {
  if (next.kind !== 'workspace-write') return false;
  if (previous?.kind !== 'workspace-write') return true;
  const before = new Set(previous.maskedPaths ?? []);
  const vars = new Set(previous.hiddenEnv ?? []);
  return (
    (next.maskedPaths ?? []).some((p) => !before.has(p)) || (next.hiddenEnv ?? []).some((v) => !vars.has(v))
  );
}

/** A path's device and inode (`''` when it is gone): what identifies the directory a mount holds. */
function fileId(path: string): string {
  const native = hostAddon();
  if (native?.fileId) return native.fileId(path);
  const st = safeStatSync(path, { throwIfNoEntry: false, bigint: true });
  return st ? `${st.dev}:${st.ino}` : '';
}
