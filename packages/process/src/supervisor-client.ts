import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { Socket } from 'node:net';
import type { Logger } from '@conch/core';
import {
  encodeGuardRules,
  GuardEventReader,
  type GuardEvent,
  type GuardRules,
  type SandboxKind,
} from '@conch/sandbox';
import { applyEnvChanges, envForOutside } from './load-paths.js';
import { commandsPerSupervisor, fdShortageMessage, hostFdBudget } from './fd-budget.js';
import { BlockingLineChannel } from './blocking-read.js';
import { killGroupSync, sweepCookie, zombieExit } from './kill-tree.js';
import { killTreeSync } from './process-tree.js';
import { SupervisedPty, type BasePty } from './pty-process.js';
import type { RoutedChild } from './routed-child.js';
import { hostPidOf, lastPid, pidNamespaceOf, type NamespaceMatch } from './ns-pid.js';
import { SupervisorHealth, stoppedOrStopping } from './supervisor-health.js';
import type {
  FsOp,
  HostMessage,
  PtySpawnReply,
  PtySpawnRequest,
  SpawnerStatus,
  SpawnRequest,
  SupervisorMessage,
} from './supervisor-protocol.js';
import { FD_CHANNEL_VAR, hostAddon, NATIVE_SPAWN_VAR, type NativeSpawnModule } from './native-spawn.js';
import { cgroupDirOf } from '@conch/sandbox';
import { OomCounter, processVerdict, setPidMax, type SupervisorLimits } from './sandbox-limits.js';

/** Whether a supervisor running node's spawn (and why) was logged: once per host. */
let spawnerReasonLogged = false;

const fdinfoBuffer = Buffer.alloc(1024);

/**
 * The host's pid of the process a pidfd names (its `Pid:` in /proc/self/fdinfo, which the kernel
 * gives in this process's pid namespace), then the pidfd is closed: `null` when that process has
 * been reaped already (-1), undefined when the kernel does not say (no fdinfo line, or 0: not in
 * this namespace), and the caller searches /proc as without a pidfd. One open and one read instead
 * of a readlink and a status read per pid handed out since the request (ns-pid.ts).
 */
function pidfdHostPid(pidfd: number): number | null | undefined {
  try {
    // open + one read into a kept buffer: readFileSync adds an fstat and a second read (a /proc
    // file has no size), three times the cost here.
    const fd = openSync(`/proc/self/fdinfo/${pidfd}`, 'r');
    let text: string;
    try {
      text = fdinfoBuffer.toString('latin1', 0, readSync(fd, fdinfoBuffer, 0, fdinfoBuffer.length, 0));
    } finally {
      closeSync(fd);
    }
    const at = text.indexOf('\nPid:');
    if (at < 0) return undefined;
    const n = Number.parseInt(text.slice(at + 5).trim(), 10);
    return n === -1 ? null : Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  } finally {
    try {
      closeSync(pidfd);
    } catch {
      // closed already
    }
  }
}

/** The addon's pidfdPid answer as pidfdHostPid gives it: null when reaped, undefined when not known. */
function pidOrUnknown(pid: number): number | null | undefined {
  return pid === -1 ? null : pid > 0 ? pid : undefined;
}

/** The supervisor's stdio slot that is the fd channel (FD_CHANNEL_VAR). */
const FD_CHANNEL_SLOT = 5;
/** The stdio slot of the sandbox guard's channel (the guard takes it; the supervisor never has it). */
const GUARD_SLOT = 6;

export interface SupervisorClientOptions {
  /** node binary of the supervisor. */
  execPath: string;
  /** The supervisor script (dist/supervisor-main.js). */
  script: string;
  /** The manager's cookie prefix: what the supervisor sweeps when the host goes away. */
  prefix: string;
  sandbox: SandboxKind;
  /** Run the supervisor inside bwrap with these arguments (sandbox profiles). */
  bwrap?: { path: string; args: readonly string[] };
  /**
   * The bwrap arguments give the supervisor its own pid namespace: the pids it reports are
   * translated to host pids (ns-pid.ts) before anything else sees them.
   */
  isolated?: boolean;
  /** The supervisor bridges 127.0.0.1:<port> inside its network namespace to this proxy socket. */
  /** The proxy socket inside, the bridge's port, and the host loopback ports forwarded through it. */
  proxy?: { socket: string; port: number; hostPorts?: readonly number[] };
  /**
   * The sandbox's path guard (@conch/sandbox): bwrap runs it, and it runs the supervisor under its
   * seccomp filter. `rules` are in force before the supervisor's first syscall; events (refusals,
   * watched writes, with the cookie of the spawn that made them) go to `onEvent`.
   */
  guard?: { binary: string; rules: GuardRules; onEvent(event: GuardEvent): void };
  /**
   * Variables the supervisor (and bwrap around it) must not be started with: inside a sandbox its
   * /proc/<pid>/environ is readable by the commands it runs.
   */
  envFilter?: (name: string, value?: string) => boolean;
  /**
   * Directories a sandboxed command can write (the workspace, the writable roots): the supervisor's
   * own loader variables keep no entry there (loaderEnvOutside), so a node started after the agent
   * worked loads no library it left (an LD_LIBRARY_PATH of the user's naming `./lib`, or empty).
   */
  loadRoots?: readonly string[];
  /** false: the supervisor spawns with node's child_process even where posix_spawn loads. */
  nativeSpawn?: boolean;
  /**
   * The sandbox's resource limits (sandbox-limits.ts): bwrap started under `outer` (a systemd
   * scope), the supervisor under `inner` (prlimit), `env` given to it, and the pid namespace's
   * pid_max set before its first spawn. `onApplied` hears what could not be applied.
   */
  limits?: SupervisorLimits & { onApplied?(problem: string | undefined): void };
  logger?: Logger | undefined;
  /**
   * Stalled milliseconds (see SupervisorHealth) after which a supervisor that does not answer is
   * killed with its sandbox and reported lost (`unresponsive`). Default 10000.
   */
  unresponsiveMs?: number;
  /**
   * Called once when the supervisor could not start (`started` false) or died. `queued` are the
   * children it never started: the caller re-routes them. `unresponsive`: it did not die by
   * itself; it stopped answering and was killed (a replacement may start at once).
   */
  onLost(
    client: SupervisorClient,
    reason: string,
    queued: RoutedChild[],
    started: boolean,
    unresponsive?: boolean,
  ): void;
  /** Called when it starts or stops having work (see `busy`); false once more when it ends. */
  onBusyChange?(busy: boolean): void;
  /** Called once when it is closed or lost (whatever the reason). */
  onEnd?(): void;
}

/** How long the exit of a supervisor whose channel closed is waited for (it follows at once). */
const EXIT_AFTER_DISCONNECT_MS = 5_000;

/** Default of SupervisorClientOptions.unresponsiveMs. */
export const DEFAULT_UNRESPONSIVE_MS = 10_000;

const SIGNAL_NAMES: Record<number, string> = { 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 15: 'SIGTERM' };

const SIGNAL_BY_NUMBER = new Map(Object.entries(osConstants.signals).map(([name, number]) => [number, name]));

/** A signal's name from its number (`SIG<n>` for one this platform does not name). */
function signalName(signal: number): string {
  return SIGNAL_BY_NUMBER.get(signal) ?? `SIG${signal}`;
}

/**
 * How a supervisor's end reads in a result. Sandboxed, the process the host started is bwrap,
 * which exits 128+N when what it ran was killed by signal N (the supervisor, or the sandbox's
 * pid 1 and with it the whole namespace).
 */
function describeEnd(code: number | null, signal: string | null, sandboxed: boolean): string {
  if (signal) return `was killed (${signal})`;
  if (code === 70) return 'crashed (an uncaught error, exit code 70)';
  if (sandboxed && code !== null && code > 128 && code < 160) {
    const name = SIGNAL_NAMES[code - 128] ?? `signal ${code - 128}`;
    return `was killed (${name}; its sandbox exited with code ${code})`;
  }
  return `exited (code ${code})`;
}

/** Waiting for a PTY spawn reply: long enough for node + bwrap + node-pty to start on a slow machine. */
const PTY_REPLY_TIMEOUT_MS = 15_000;

/** Waiting for the answer to a port connection (a loopback connect inside: answered at once). */
const PORT_CONNECT_TIMEOUT_MS = 10_000;

/** Flattens an env that may inherit keys through its prototype, dropping undefined values. */
function flattenEnv(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key in env) {
    const value = env[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/** What a spawn request carries of its env: the difference from the supervisor's base (see SpawnRequest). */
type EnvFields = Pick<SpawnRequest, 'env' | 'envUnset' | 'envBase'>;

/**
 * How many of a request's changed keys must recur, unchanged, from the request before it for the
 * env to be sent whole as the new base (see envDifference).
 */
const REBASE_RECURRING = 4;

/**
 * The env of one spawn against the base the supervisor holds (the env it was last sent whole):
 * the keys added or changed, and the base's keys this one lacks. `base` is what the supervisor will
 * hold after this request: replaced when the difference grows past a quarter of the base, or when
 * it recurs — REBASE_RECURRING or more of its changes (or removals) are the previous request's
 * (`previous`) again. Why: the base is whatever env came first (a supervisor's hidden warm-up spawn
 * has none of the variables cli_based_tool sets on every call), and a difference every call repeats
 * was sent, parsed and merged again at each spawn: measured, ~300 µs more supervisor CPU per
 * spawn (its env merge alone ~80 µs) and `true` in the sandbox 1.24-1.29x instead of ~1.2x its
 * unsandboxed call, depending only on which spawn had reached the supervisor first.
 */
export function envDifference(
  env: Record<string, string | undefined>,
  base: ReadonlyMap<string, string> | undefined,
  previous?: EnvFields,
): { fields: EnvFields; base: ReadonlyMap<string, string> } {
  if (base) {
    const set: Record<string, string> = {};
    let changes = 0;
    let recurring = 0;
    const previousSet = previous?.envBase ? undefined : previous?.env;
    for (const key in env) {
      const value = env[key];
      if (value === undefined || base.get(key) === value || key in set) continue;
      set[key] = value;
      changes++;
      if (previousSet?.[key] === value) recurring++;
    }
    // Every key of the base is looked up (not inferred from a count of the keys enumerated above:
    // for...in over an env whose prototype is an exotic process.env — vitest's, for one — can
    // list a key twice, and a miscount once let a removed BASH_ENV reach the next command).
    const unset: string[] = [];
    for (const key of base.keys()) if (env[key] === undefined) unset.push(key);
    changes += unset.length;
    if (unset.length > 0 && previous?.envUnset) {
      const before = new Set(previous.envUnset);
      for (const key of unset) if (before.has(key)) recurring++;
    }
    if (changes <= 8 + (base.size >> 2) && recurring < REBASE_RECURRING)
      return { fields: unset.length ? { env: set, envUnset: unset } : { env: set }, base };
  }
  const whole = flattenEnv(env);
  return { fields: { env: {}, envBase: whole }, base: new Map(Object.entries(whole)) };
}

/**
 * The host's side of one supervisor process: starts it (optionally inside bwrap), queues requests
 * until it says `ready`, routes its replies to RoutedChild / SupervisedPty objects, and keeps the
 * host's event loop alive exactly while something it runs is alive (the process and channel are
 * unref'd otherwise, so an idle supervisor never holds the host open).
 */
export class SupervisorClient {
  readonly sandbox: SandboxKind;
  private readonly options: SupervisorClientOptions;
  private state: 'starting' | 'ready' | 'lost' | 'closed' = 'starting';
  private spawnerStatus: SpawnerStatus | undefined;
  /** Where a supervisor spawning with posix_spawn sends children's pipes (see FD_CHANNEL_VAR). */
  private fdChannel: { native: NativeSpawnModule; fd: number } | undefined;
  /** The supervisor sends each child's pidfd (no pid bracket is read before a request then). */
  private pidfdsSeen = false;
  private proc: ChildProcess | undefined;
  private sync: BlockingLineChannel | undefined;
  private pendingSends: HostMessage[] = [];
  private queued: RoutedChild[] = [];
  /** Sent and not yet finished (awaiting 'spawned', or running). */
  private readonly children = new Map<number, RoutedChild>();
  private readonly ptys = new Map<number, SupervisedPty>();
  /** File operations sent and not yet answered. */
  private readonly fsCalls = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void }
  >();
  /** Port connections asked for and not answered yet (port forwarding). */
  private readonly portCalls = new Map<
    number,
    { resolve: (socket: Socket) => void; reject: (error: Error) => void }
  >();
  /** Resolves when the started process has exited (or could not start). */
  private readonly exitedPromise: Promise<void>;
  private markExited!: () => void;
  private ended = false;
  private nextId = 0;
  private refs = 0;
  private stderrTail = '';
  private supervisorPid: number | undefined;
  /** The supervisor's pid namespace, when it has its own (children are looked up in it). */
  private namespace: string | undefined;
  private reason: string | undefined;
  /** Spawns sent and not answered yet ('spawned' or 'spawn-error'): what a stalled supervisor holds up. */
  private readonly awaitingStart = new Set<RoutedChild>();
  /** Children whose call passed its limit before they started. */
  private readonly overdueChildren = new Set<RoutedChild>();
  /** PTYs whose caller waited on a shell that made no progress (see ptyOverdue). */
  private readonly overduePtys = new Set<number>();
  private readonly health: SupervisorHealth;
  /** The env the supervisor holds as its base (what spawn requests' envs are sent against). */
  private envBase: ReadonlyMap<string, string> | undefined;
  /** The env fields of the last spawn request sent (what envDifference compares a new one with). */
  private lastEnvFields: EnvFields | undefined;
  /** Isolated: `lastPid()` before each spawn / PTY spawn was sent (what bounds its host pid's lookup). */
  private readonly pidFloors = new Map<number, number>();
  /** The guard's channel, while it is open. */
  private guardChannel: Socket | undefined;
  /** The rules the guard enforces (the last ones sent). */
  private guardRules: GuardRules | undefined;
  /** Rule updates sent and not acknowledged yet (the initial rules' ack is the first). */
  private readonly guardAcks: (() => void)[] = [];
  /** The guard's pid in the sandbox once it said it started. */
  private guardStarted: { guardPid: number; supervisorPid: number } | undefined;
  /** Things the first spawns wait for once it is ready (its pid namespace's pid_max being set). */
  private holds = 0;
  /** The sandbox's cgroup v2 directory, when it was started in a scope of its own. */
  private cgroup: string | undefined;
  /** The OOM kills counted for its commands' results (its cgroup's, or the machine's). */
  private readonly oom = new OomCounter(() => this.cgroup);

  constructor(options: SupervisorClientOptions) {
    this.options = options;
    this.sandbox = options.sandbox;
    this.health = new SupervisorHealth({
      unresponsiveMs: options.unresponsiveMs ?? DEFAULT_UNRESPONSIVE_MS,
      phase: () => (this.state === 'starting' || this.state === 'ready' ? this.state : 'other'),
      pid: () => this.supervisorPid,
      rootPid: () => this.proc?.pid,
      ping: (id) => this.post({ t: 'ping', id }),
      overdue: () => this.overdueChildren.size > 0 || this.overduePtys.size > 0,
      onUnresponsive: (why) => this.unresponsive(why),
    });
    this.exitedPromise = new Promise((resolve) => (this.markExited = resolve));
  }

  get status(): 'starting' | 'ready' | 'lost' | 'closed' {
    return this.state;
  }

  /** Whether anything it started still runs (children, PTYs, file operations in flight, queued spawns). */
  get busy(): boolean {
    return this.refs > 0 || this.queued.length > 0;
  }

  /** The supervisor's host pid once it is ready (inside bwrap: node's, not bwrap's). */
  get pid(): number | undefined {
    return this.supervisorPid;
  }

  /** How it starts commands, once it is ready. */
  get spawner(): SpawnerStatus | undefined {
    return this.spawnerStatus;
  }

  /** The pid of the process started for the supervisor: bwrap's when sandboxed, else node's. */
  get wrapperPid(): number | undefined {
    return this.proc?.pid;
  }

  /** The sandbox's cgroup v2 directory (its systemd scope), once it is ready in one. */
  get cgroupDir(): string | undefined {
    return this.cgroup;
  }

  /**
   * Once the sandbox runs: where its limits need the host — its cgroup found (for its OOM count),
   * its pid namespace's pid_max set (spawns wait for it). What fails is said once, not fatal: the
   * sandbox runs with the limits that did apply.
   */
  private applyLimits(): void {
    const limits = this.options.bwrap ? this.options.limits : undefined;
    if (!limits) return;
    if (limits.outer.length && this.proc?.pid !== undefined) this.cgroup = cgroupDirOf(this.proc.pid);
    if (limits.resources.memoryBytes > 0) this.oom.start();
    const pid = this.supervisorPid;
    if (!limits.pidMax || pid === undefined) {
      limits.onApplied?.(undefined);
      return;
    }
    this.holds++;
    void setPidMax(limits.pidMax.nsenter, pid, limits.pidMax.value).then((problem) => {
      limits.onApplied?.(problem);
      this.holds--;
      if (this.state === 'ready' && this.guardAcks.length === 0 && this.holds === 0) this.flushQueued();
    });
  }

  /** Why the supervisor is unusable, once it is. */
  get lostReason(): string | undefined {
    return this.reason;
  }

  /** Starts the process. False when it could not even be spawned (see lostReason; onLost is not called). */
  start(): boolean {
    const { execPath, script, prefix, bwrap } = this.options;
    const proxy = this.options.proxy;
    const argv = [
      script,
      prefix,
      this.sandbox,
      '4',
      ...(proxy ? [proxy.socket, String(proxy.port), (proxy.hostPorts ?? []).join(',')] : []),
    ];
    const guard = bwrap ? this.options.guard : undefined;
    const limits = bwrap ? this.options.limits : undefined;
    const inner = [
      ...(limits?.inner ?? []),
      ...(guard
        ? [guard.binary, '--channel', String(GUARD_SLOT), '--', execPath, ...argv]
        : [execPath, ...argv]),
    ];
    const wrapped = bwrap ? [bwrap.path, ...bwrap.args, '--', ...inner] : [execPath, ...argv];
    // systemd-run puts itself in the sandbox's scope, then execs bwrap: the same pid.
    const [file, ...args] = limits?.outer.length ? [...limits.outer, ...wrapped] : wrapped;
    // The host's NODE_OPTIONS (loaders, --inspect, heap flags) are for the host; children still get
    // them, since every spawn request carries its own complete env.
    const host: Record<string, string | undefined> = { ...process.env };
    delete host.NODE_OPTIONS;
    const env: Record<string, string | undefined> = this.options.loadRoots
      ? applyEnvChanges(host, envForOutside(host, this.options.loadRoots, {}).changes)
      : host;
    if (this.options.nativeSpawn === false) env[NATIVE_SPAWN_VAR] = '0';
    if (limits) Object.assign(env, limits.env);
    const hidden = this.options.envFilter;
    if (hidden) for (const key of Object.keys(env)) if (hidden(key, env[key])) delete env[key];
    const native = this.options.nativeSpawn === false ? undefined : hostAddon();
    if (native) env[FD_CHANNEL_VAR] = String(FD_CHANNEL_SLOT);
    let proc: ChildProcess;
    try {
      proc = spawn(file!, args, {
        // fd 3: node's IPC channel; fd 4: the synchronous PTY-spawn channel; fd 5, with the addon
        // here: the fd channel. `detached`: its own session and process group, so a Ctrl-C to the
        // host's terminal never reaches it.
        // fd 6, with a guard: its channel (the guard keeps it; the supervisor never sees it).
        stdio: [
          'ignore',
          'ignore',
          'pipe',
          'ipc',
          'pipe',
          ...(native ? (['pipe'] as const) : guard ? (['ignore'] as const) : []),
          ...(guard ? (['pipe'] as const) : []),
        ],
        detached: true,
        env,
      });
    } catch (error) {
      this.state = 'lost';
      this.reason = `could not start ${file}: ${(error as Error).message}`;
      this.markExited();
      return false;
    }
    this.proc = proc;
    proc.on('error', (error) => this.lose(`could not start ${file}: ${error.message}`));
    if (proc.pid === undefined) {
      // ENOENT/EACCES: 'error' follows on the next tick; decide now so the caller can fall back.
      this.state = 'lost';
      this.reason = `could not start ${file} (not found or not executable)`;
      this.markExited();
      return false;
    }
    proc.once('exit', () => this.markExited());
    proc.on('message', (message: SupervisorMessage, handle?: Socket) => this.onMessage(message, handle));
    proc.on('exit', (code, signal) => {
      const tail = this.stderrTail.trim();
      const who = bwrap ? "the sandbox's process supervisor" : 'the process supervisor';
      this.lose(
        `${who} ${describeEnd(code, signal, bwrap !== undefined)}${tail ? `: ${tail.split('\n').slice(-3).join(' | ')}` : ''}`,
      );
    });
    // The channel closes the moment the supervisor dies; its 'exit' (with the signal) follows,
    // but only if something keeps the host's event loop alive until then: the channel did.
    proc.on('disconnect', () => {
      if (this.state !== 'ready' && this.state !== 'starting') return;
      proc.ref();
      // Bounded: a process that closed its channel and does not exit is lost all the same.
      setTimeout(() => {
        proc.unref();
        this.lose('the process supervisor closed its channel');
      }, EXIT_AFTER_DISCONNECT_MS).unref();
    });
    const stderr = proc.stderr as Socket;
    stderr.setEncoding('utf8');
    stderr.on('data', (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-4096);
    });
    stderr.on('error', () => {});
    stderr.unref();
    if (native) {
      // Read by recvFds only: node must never read it (a plain read would drop the fds it carries),
      // so reading stops in this tick, before any poll (as detachPipe does in the supervisor).
      const channel = (proc.stdio as unknown as Socket[])[FD_CHANNEL_SLOT]!;
      const handle = (channel as unknown as { _handle?: { fd?: number; readStop?(): number } })._handle;
      handle?.readStop?.();
      if (typeof handle?.fd === 'number' && handle.fd >= 0) this.fdChannel = { native, fd: handle.fd };
      channel.on('error', () => {});
      channel.unref();
      // Never read, so node never sees its end: closed here once the supervisor is gone.
      proc.once('exit', () => {
        this.fdChannel = undefined;
        channel.destroy();
      });
    }
    if (guard) this.openGuardChannel((proc.stdio as unknown as Socket[])[GUARD_SLOT]!, guard);
    const syncSocket = proc.stdio[4] as Socket;
    syncSocket.setEncoding('utf8');
    // node's private `_handle.fd`: there is no public way to get the fd of a stdio pipe.
    const fd = (syncSocket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (typeof fd === 'number' && fd >= 0) {
      const sync = new BlockingLineChannel(fd);
      this.sync = sync;
      // Only a reply that came after a timeout can arrive while the event loop runs; keep it.
      syncSocket.on('data', (text: string) => sync.push(text));
    }
    syncSocket.on('error', () => {});
    syncSocket.unref();
    proc.unref();
    proc.channel?.unref();
    return true;
  }

  /** Starts a child through the supervisor (queued until it is ready). */
  submit(child: RoutedChild): void {
    child.sandbox = this.sandbox;
    const limits = this.options.bwrap ? this.options.limits : undefined;
    if (limits) child.limits = { config: limits, oom: this.oom, cgroup: limits.outer.length > 0 };
    child.onOverdue = () => this.childOverdue(child);
    // Refused on its own, before the supervisor sees it, when the supervisor's or the host's file
    // descriptors would run out: a pipe dropped for want of one took down the supervisor's channel
    // and every command on it. The commands running keep their pipes.
    const running = this.children.size + this.queued.length + this.ptys.size;
    let shortage: string | undefined;
    if (running + 1 > commandsPerSupervisor()) {
      // (A finite cap: the limit was read.)
      shortage = fdShortageMessage({ where: 'supervisor', limit: hostFdBudget.currentLimit(), running });
    } else {
      const found = hostFdBudget.admit(child);
      if (found) shortage = fdShortageMessage({ where: 'host', ...found, running });
    }
    if (shortage) {
      this.options.logger?.warn({ running }, shortage);
      child.onSpawnError('EMFILE', shortage);
      return;
    }
    // (Not an 'error' listener: one would make a spawn error emitted during spawn() synchronous.)
    child.onEnded = () => hostFdBudget.release(child);
    this.ref();
    if (this.state === 'ready' && this.guardAcks.length === 0 && this.holds === 0) this.sendSpawn(child);
    else this.queued.push(child);
  }

  /** The guard's rules in force (undefined without a guard). */
  get guardedBy(): GuardRules | undefined {
    return this.guardChannel ? this.guardRules : undefined;
  }

  /** Whether a guard runs around this supervisor (its start reported). */
  get guarded(): boolean {
    return this.guardStarted !== undefined && this.guardChannel !== undefined;
  }

  /**
   * New rules for the guard while the sandbox keeps running (what protected paths were added).
   * Spawns submitted meanwhile wait until the guard has them in force. Resolves once acknowledged,
   * or at once without a guard (or once the guard is gone).
   */
  updateGuard(rules: GuardRules): Promise<void> {
    const channel = this.guardChannel;
    if (!channel) return Promise.resolve();
    this.guardRules = rules;
    return new Promise<void>((resolve) => {
      this.guardAcks.push(resolve);
      channel.write(encodeGuardRules(rules));
    });
  }

  private openGuardChannel(channel: Socket, guard: NonNullable<SupervisorClientOptions['guard']>): void {
    this.guardChannel = channel;
    this.guardRules = guard.rules;
    const reader = new GuardEventReader();
    channel.on('data', (chunk: Buffer) => {
      for (const event of reader.push(chunk)) {
        if (event.kind === 'ack') {
          this.guardAcks.shift()?.();
          if (this.guardAcks.length === 0 && this.state === 'ready' && this.holds === 0) this.flushQueued();
        } else if (event.kind === 'started') {
          this.guardStarted = { guardPid: event.guardPid, supervisorPid: event.supervisorPid };
        } else if (event.kind === 'error') {
          this.options.logger?.warn({ error: event.message }, 'sandbox guard');
        } else guard.onEvent(event);
      }
    });
    const closed = () => {
      this.guardChannel = undefined;
      // Nothing waits on a guard that is gone (its sandbox went with it).
      for (const resolve of this.guardAcks.splice(0)) resolve();
    };
    channel.on('error', closed);
    channel.on('close', closed);
    // The initial rules: in force before the supervisor's first syscall (the guard waits for them).
    this.guardAcks.push(() => {});
    channel.write(encodeGuardRules(guard.rules));
    channel.unref();
  }

  private flushQueued(): void {
    const queued = this.queued;
    this.queued = [];
    for (const child of queued) this.sendSpawn(child);
  }

  /**
   * A call's limit passed before its child started, or after it ended but before its supervisor
   * reaped it (so the kill would not be what it died of). A supervisor that is starting or answering
   * keeps it waiting (its limit counts once it runs); one the health check finds stalled is
   * declared unresponsive now, so the call comes back at its limit instead of hanging.
   */
  private childOverdue(child: RoutedChild): void {
    if (this.state !== 'ready' && this.state !== 'starting') return;
    // Started, it waits on the supervisor only once it has ended and is not reaped (a zombie).
    if (child.started && !(child.pid !== undefined && zombieExit(child.pid))) return;
    this.overdueChildren.add(child);
    this.health.callOverdue();
  }

  /**
   * A PTY's caller waited on its shell and it made no progress: its typed input goes through this
   * supervisor. One the health check finds stalled is declared unresponsive now (the PTY exits
   * with the reason); one that is merely unanswered so far is judged at its next ticks, sooner than
   * by its own bound. Returns whether it is gone or not answering.
   */
  private ptyOverdue(id: number): boolean {
    if (this.state !== 'ready' && this.state !== 'starting') return true;
    if (!this.ptys.has(id)) return false;
    this.overduePtys.add(id);
    this.health.callOverdue();
    return this.health.unanswered;
  }

  /**
   * Starts a PTY and waits for its pid, blocking the host for the supervisor's fork (a few ms; the
   * first call also waits for the supervisor to start). Undefined when the supervisor is unusable
   * (the caller falls back); 'stopped' when it was found stopped, or did not answer, and was
   * replaced (the caller may ask a new one); an error reply when node-pty failed.
   */
  spawnPty(
    request: Omit<PtySpawnRequest, 't' | 'id'>,
    onExited: (pty: BasePty) => void,
  ): SupervisedPty | { code: string; message: string } | 'stopped' | undefined {
    const sync = this.sync;
    if (!sync || (this.state !== 'starting' && this.state !== 'ready')) return undefined;
    // The host blocks on the reply: a supervisor that is stopped (SIGSTOP) cannot give one, and
    // the host's event loop would stand still for the whole reply timeout. Replaced now instead
    // (the caller asks the next one).
    for (const pid of [this.supervisorPid, this.proc?.pid]) {
      if (pid !== undefined && stoppedOrStopping(pid)) {
        this.unresponsive(`it is stopped (SIGSTOP): found so when a terminal was to be started in it`);
        return 'stopped';
      }
    }
    const id = ++this.nextId;
    const full: PtySpawnRequest = { t: 'pty-spawn', id, ...request };
    const floor = this.options.isolated ? lastPid() : undefined;
    let reply: PtySpawnReply | undefined;
    try {
      sync.writeLine(JSON.stringify(full), PTY_REPLY_TIMEOUT_MS);
      while (!reply) {
        const candidate = JSON.parse(sync.readLine(PTY_REPLY_TIMEOUT_MS)) as PtySpawnReply;
        if (candidate.id === id) reply = candidate;
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ETIMEDOUT' && code !== 'EAGAIN') {
        this.lose(`no PTY spawn reply: ${(error as Error).message}`);
        return undefined;
      }
      // Alive but silent (hung, or stopped after the look above): killed with its tree like any
      // unresponsive supervisor (lost alone, it would stay behind, disconnected, until dispose),
      // and the caller asks a new one.
      this.unresponsive(
        `it did not answer a terminal's start within ${PTY_REPLY_TIMEOUT_MS / 1000} s (${(error as Error).message})`,
      );
      return 'stopped';
    }
    if ('error' in reply) return reply.error;
    const pid = this.hostPid(reply.pid, false, floor);
    if (pid === undefined) {
      // Its shell ended before the host could find it (an isolated sandbox): nothing to attach to.
      return { code: 'ESRCH', message: 'the PTY process ended as soon as it started' };
    }
    const pty = new SupervisedPty(
      {
        id,
        pid,
        cookie: request.env.CONCH_PROC_COOKIE ?? '',
        sandbox: this.sandbox,
        relay: {
          write: (ptyId, data) => this.post({ t: 'pty-write', id: ptyId, data }),
          resize: (ptyId, cols, rows) => this.post({ t: 'pty-resize', id: ptyId, cols, rows }),
          overdue: (ptyId) => this.ptyOverdue(ptyId),
        },
      },
      (p) => {
        this.ptys.delete(id);
        this.overduePtys.delete(id);
        this.unref();
        onExited(p);
      },
    );
    this.ptys.set(id, pty);
    this.ref();
    return pty;
  }

  /**
   * Runs a file operation in the supervisor (inside its sandbox: the kernel judges every path).
   * Rejects with a node errno error (`code`), or ESANDBOX when the supervisor is gone.
   */
  fs(op: FsOp, args: readonly unknown[]): Promise<unknown> {
    if (this.state !== 'starting' && this.state !== 'ready') {
      return Promise.reject(
        Object.assign(
          new Error(`the sandbox's process supervisor is not running (${this.reason ?? this.state})`),
          {
            code: 'ESANDBOX',
          },
        ),
      );
    }
    const id = ++this.nextId;
    this.ref();
    return new Promise<unknown>((resolve, reject) => {
      this.fsCalls.set(id, { resolve, reject });
      this.post({ t: 'fs', id, op, args });
    }).finally(() => this.unref());
  }

  /**
   * Opens a TCP connection to `host:port` inside the supervisor's network namespace (port
   * forwarding): the supervisor connects and passes the socket over, never touching its bytes.
   * Rejects with the connect's error (ECONNREFUSED: nothing listens there), or ESANDBOX when the
   * supervisor is not ready.
   */
  connectPort(host: '127.0.0.1' | '::1', port: number): Promise<Socket> {
    if (this.state !== 'ready') {
      return Promise.reject(
        Object.assign(new Error(`the process supervisor is not running (${this.reason ?? this.state})`), {
          code: 'ESANDBOX',
        }),
      );
    }
    const id = ++this.nextId;
    return new Promise<Socket>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.portCalls.delete(id);
        reject(
          Object.assign(new Error('the process supervisor did not answer in time'), { code: 'ETIMEDOUT' }),
        );
      }, PORT_CONNECT_TIMEOUT_MS);
      timer.unref();
      this.portCalls.set(id, {
        resolve: (socket) => {
          clearTimeout(timer);
          resolve(socket);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.post({ t: 'port-connect', id, host, port });
    });
  }

  /** Disconnects: the supervisor kills whatever is left of its children and exits. */
  close(): void {
    if (this.state === 'lost' || this.state === 'closed') return;
    this.state = 'closed';
    try {
      if (this.proc?.connected) this.proc.disconnect();
    } catch {
      // already gone
    }
    this.rejectPortCalls('closed');
    this.end();
  }

  /**
   * Resolves once the supervisor's process has exited (after close(), it follows at once). If it
   * has not within `timeoutMs`, its whole tree is SIGKILLed (bwrap, the sandbox's pid 1, everything
   * inside) and it resolves after that exit (bounded too): nothing of it outlives the manager's
   * dispose(). `keepAlive: false`: the wait does not hold the host's event loop open.
   */
  async exited(timeoutMs: number, keepAlive = true): Promise<void> {
    const waited = (ms: number) =>
      new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        if (!keepAlive) timer.unref();
        void this.exitedPromise.then(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    if (await waited(timeoutMs)) return;
    const root = this.proc?.pid;
    if (root !== undefined) killTreeSync(root);
    if (this.supervisorPid !== undefined && this.supervisorPid !== root) killTreeSync(this.supervisorPid);
    await waited(2_000);
  }

  /**
   * A pid the supervisor reported, as the host sees it: itself outside a pid namespace, else
   * looked up (undefined when the process is already gone).
   */
  private hostPid(reported: number, self = false, since?: number): number | undefined {
    if (!this.options.isolated) return reported;
    // Everything in the namespace descends from bwrap's monitor (the process started here); once
    // the supervisor said `ready`, its namespace is the cheaper test. (A PTY spawned while the
    // host blocks for the supervisor's start is answered before `ready` is read.)
    const match: NamespaceMatch | undefined =
      !self && this.namespace !== undefined
        ? { namespace: this.namespace }
        : this.proc?.pid !== undefined
          ? { descendantOf: this.proc.pid }
          : undefined;
    return match ? hostPidOf(reported, match, since) : undefined;
  }

  private sendSpawn(child: RoutedChild): void {
    const id = ++this.nextId;
    this.children.set(id, child);
    this.awaitingStart.add(child);
    const { file, args, cwd, env, stdin, capture } = child.request;
    // Requests reach the supervisor in the order they are built here: each one's env is the
    // difference from the base the supervisor holds by then.
    const { fields, base } = envDifference(env, this.envBase, this.lastEnvFields);
    this.envBase = base;
    this.lastEnvFields = fields;
    // The bracket a child's host pid is searched in, until the supervisor sends pidfds.
    if (this.options.isolated && !this.pidfdsSeen) {
      const floor = lastPid();
      if (floor !== undefined) this.pidFloors.set(id, floor);
    }
    const message: SpawnRequest = { t: 'spawn', id, file, args, cwd, ...fields, stdin, capture };
    // Its output may come with its exit (see supervisor-children.ts, HOLD_MS).
    if (capture && stdin === 'ignore') message.hold = true;
    this.post(message);
  }

  private post(message: HostMessage): void {
    if (this.state === 'starting') {
      this.pendingSends.push(message);
      return;
    }
    if (this.state !== 'ready' || !this.proc?.connected) return;
    this.proc.send(message, undefined, {}, (error) => {
      if (error) this.options.logger?.debug({ err: error }, 'supervisor send failed');
    });
  }

  /**
   * The pipes of a `spawned` message that came on the fd channel, in `fds` order: the next message
   * there is that child's (the supervisor sends it before `spawned`, and both keep their order).
   * Anything else is a supervisor out of step with its host: it is lost, not trusted further.
   */
  private channelPipes(
    id: number,
    fds: readonly number[],
    pidfd: boolean,
  ): { pipes: Socket[]; hostPid?: number | null } | undefined {
    const got = this.fdChannel ? this.fdChannel.native.recvFds(this.fdChannel.fd) : null;
    if (got && got[0] === id && got.length === fds.length + 1 + (pidfd ? 1 : 0)) {
      const pipes = got
        .slice(1, fds.length + 1)
        .map((fd) => new Socket({ fd, readable: true, writable: true }));
      if (!pidfd) return { pipes };
      const fd = got[fds.length + 1]!;
      const native = this.fdChannel!.native;
      return { pipes, hostPid: native.pidfdPid ? pidOrUnknown(native.pidfdPid(fd)) : pidfdHostPid(fd) };
    }
    for (const fd of got?.slice(1) ?? []) {
      try {
        closeSync(fd);
      } catch {
        // not ours after all
      }
    }
    if (got && got[0] === id && got.length < fds.length + 1 + (pidfd ? 1 : 0)) {
      // Its message, short of pipes: the kernel dropped what the host had no file descriptors
      // for (MSG_CTRUNC). The channel is still in step; this command alone cannot be run.
      this.pipesDropped(id);
      return undefined;
    }
    this.lose(`the pipes of command ${id} were not on the process supervisor's fd channel`);
    return undefined;
  }

  /**
   * A command whose pipes did not reach the host (it ran out of file descriptors): killed (by its
   * cookie: its pid may have been among what was dropped) and reported with EMFILE, as not started
   * when it had not been, else as killed for that reason. Its later messages find no child.
   */
  private pipesDropped(id: number): void {
    const child = this.children.get(id);
    this.children.delete(id);
    this.pidFloors.delete(id);
    if (!child) return;
    this.unref();
    sweepCookie(child.cookie);
    const shortage = { where: 'host', ...hostFdBudget.now(), running: this.children.size } as const;
    this.options.logger?.warn({ id }, fdShortageMessage(shortage, ''));
    if (!child.started) {
      this.started(child);
      child.onSpawnError('EMFILE', fdShortageMessage(shortage, 'It was stopped before it ran.'));
      return;
    }
    child.lostReason = fdShortageMessage(shortage, '');
    if (child.pid !== undefined) killGroupSync(child.pid);
    child.onExit(null, 'SIGKILL');
  }

  private onMessage(message: SupervisorMessage, handle: Socket | undefined): void {
    this.health.heard(message.t === 'pong' ? message.id : undefined);
    // It answers: a PTY's caller that found it stalled asks again if its shell still does nothing
    // (kept, the mark would make a later short stop fatal at two ticks instead of unresponsiveMs).
    if (this.overduePtys.size > 0) this.overduePtys.clear();
    switch (message.t) {
      case 'pong':
        return;
      case 'ready': {
        if (this.state !== 'starting') return;
        const pid = this.options.isolated ? this.hostPid(message.pid, true) : message.pid;
        if (this.options.isolated) {
          this.namespace = pid !== undefined ? pidNamespaceOf(pid) : undefined;
          if (this.namespace === undefined) {
            // Without its namespace no child pid can be translated, and an untranslated pid must
            // never be signalled on the host: this supervisor is unusable.
            this.lose('could not find the sandboxed supervisor among the host processes (/proc)');
            return;
          }
        }
        this.state = 'ready';
        this.supervisorPid = pid;
        this.spawnerStatus = message.spawner;
        if (
          message.spawner?.kind === 'node' &&
          !spawnerReasonLogged &&
          message.spawner.reason !== `${NATIVE_SPAWN_VAR}=0`
        ) {
          // Once per host: every command then costs about twice a posix_spawn (node forks).
          spawnerReasonLogged = true;
          this.options.logger?.warn(
            { reason: message.spawner.reason },
            "the posix_spawn addon did not load: commands start with node's spawn (about 2x the cost per command)",
          );
        }
        const pending = this.pendingSends;
        this.pendingSends = [];
        for (const m of pending) this.post(m);
        this.applyLimits();
        if (this.guardAcks.length === 0 && this.holds === 0) this.flushQueued();
        return;
      }
      case 'limit': {
        const child = message.id !== undefined ? this.children.get(message.id) : undefined;
        const limits = this.options.limits;
        if (child && limits) child.limitHit = processVerdict(limits, message);
        this.options.logger?.warn(
          { tasks: message.tasks, limit: message.limit, sandbox: this.sandbox },
          'sandbox: its process limit was reached; the process group holding the most tasks was stopped',
        );
        return;
      }
      case 'fatal':
        this.lose(message.message);
        return;
      case 'spawned': {
        const child = this.children.get(message.id);
        // Every pipe at once from the fd channel, else the first as this message's handle (the
        // others follow in `stream` messages).
        const received = message.channel
          ? this.channelPipes(message.id, message.fds, message.pidfd === true)
          : { pipes: handle ? [handle] : [] };
        if (!received) return; // lost
        const { pipes, hostPid } = received;
        if (message.pidfd) this.pidfdsSeen = true;
        if (child) {
          this.started(child);
          const floor = this.pidFloors.get(message.id);
          this.pidFloors.delete(message.id);
          // From the child's pidfd when it came (null: the child is gone already), else searched.
          const pid = hostPid === null ? undefined : (hostPid ?? this.hostPid(message.pid, false, floor));
          child.onSpawned(pid, message.fds, pipes[0], message.held);
          for (let i = 1; i < pipes.length; i++) child.onPipe(message.fds[i]!, pipes[i]!);
        } else for (const socket of pipes) socket.destroy();
        return;
      }
      case 'unheld': {
        const child = this.children.get(message.id);
        const received = message.channel
          ? this.channelPipes(message.id, message.fds, false)
          : { pipes: handle ? [handle] : [] };
        if (!received) return; // lost
        if (!child) {
          for (const socket of received.pipes) socket.destroy();
          return;
        }
        child.onHeldOutput(message);
        child.onUnheld(message.fds, received.pipes);
        return;
      }
      case 'stream': {
        const child = this.children.get(message.id);
        if (child && handle) child.onPipe(message.fd, handle);
        else handle?.destroy();
        return;
      }
      case 'spawn-error':
      case 'exit': {
        const child = this.children.get(message.id);
        this.pidFloors.delete(message.id);
        if (!child) return;
        this.children.delete(message.id);
        this.started(child);
        this.unref();
        if (message.t === 'exit') {
          child.onHeldOutput(message);
          child.onExit(message.code, message.signal, message.group);
        } else child.onSpawnError(message.code, message.message);
        return;
      }
      case 'pty-data':
        this.ptys.get(message.id)?.emitData(message.data);
        return;
      case 'fs-result': {
        const call = this.fsCalls.get(message.id);
        if (!call) return;
        this.fsCalls.delete(message.id);
        if (message.error) call.reject(Object.assign(new Error(message.error.message), message.error));
        else call.resolve(message.value);
        return;
      }
      case 'pty-exit':
        this.ptys.get(message.id)?.emitExit({ exitCode: message.exitCode, signal: message.signal });
        return;
      case 'port-connected':
      case 'port-error': {
        const call = this.portCalls.get(message.id);
        this.portCalls.delete(message.id);
        if (message.t === 'port-error' || !handle) {
          handle?.destroy();
          const error =
            message.t === 'port-error'
              ? Object.assign(new Error(message.message), { code: message.code })
              : Object.assign(new Error('the process supervisor passed no socket'), { code: 'EPROTO' });
          call?.reject(error);
        } else if (call) call.resolve(handle);
        else handle.destroy(); // asked for too late (timed out)
        return;
      }
    }
  }

  private rejectPortCalls(why: string): void {
    for (const call of this.portCalls.values()) {
      call.reject(
        Object.assign(new Error(`the process supervisor went away (${why})`), { code: 'ESANDBOX' }),
      );
    }
    this.portCalls.clear();
  }

  /** Closed or lost: no more work, no more forwarding (once). */
  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.options.onEnd?.();
  }

  /** A sent spawn was answered: it no longer waits on the supervisor. */
  private started(child: RoutedChild): void {
    this.awaitingStart.delete(child);
    this.overdueChildren.delete(child);
  }

  /**
   * Keeps the host's event loop alive while something runs here (a ChildProcess would), and the
   * health check watching while the supervisor has work.
   */
  private ref(): void {
    if (this.refs++ === 0) {
      this.proc?.channel?.ref();
      this.health.start();
      this.options.onBusyChange?.(true);
    }
  }

  private unref(): void {
    if (this.refs > 0 && --this.refs === 0) {
      this.proc?.channel?.unref();
      this.health.stop();
      this.options.onBusyChange?.(false);
    }
  }

  /**
   * The health check found the supervisor not answering (stopped, hung): SIGKILL it with its
   * whole tree — bwrap's monitor, the sandbox's pid 1 and everything in the namespace — and report
   * what it ran as lost (`unresponsive`); the next spawn starts a new one.
   */
  private unresponsive(why: string): void {
    if (this.state !== 'ready' && this.state !== 'starting') return;
    const root = this.proc?.pid;
    const pid = this.supervisorPid;
    const reason = `${this.options.bwrap ? "the sandbox's process supervisor" : 'the process supervisor'} stopped answering and was killed: ${why}`;
    this.options.logger?.warn(
      { reason, sandbox: this.sandbox },
      'process supervisor unresponsive; replacing it',
    );
    // Commands that ended while it was stopped are its zombies until it reaps them: how each ended
    // is still in the kernel (read before the kill below hands them to another reaper).
    const ended = new Map<number, { code: number | null; signal: number | null }>();
    for (const [id, child] of this.children) {
      // Only where the whole output is here: pipes the stopped supervisor holds die with it.
      if (!child.started || child.pid === undefined || child.heldFds.length > 0) continue;
      const exit = zombieExit(child.pid);
      if (exit) ended.set(id, exit);
    }
    if (root !== undefined) killTreeSync(root);
    if (pid !== undefined && pid !== root) killTreeSync(pid);
    this.lose(reason, true, ended);
  }

  /**
   * The supervisor is gone or unusable. What it never started goes back to the caller; what it
   * started is killed from here (its supervisor can no longer report or kill it) and reported
   * ended, so no result waits forever and nothing is left behind.
   */
  private lose(
    reason: string,
    unresponsive = false,
    ended: ReadonlyMap<number, { code: number | null; signal: number | null }> = new Map(),
  ): void {
    if (this.state === 'lost') return;
    const wasClosed = this.state === 'closed';
    const started = this.state === 'ready';
    this.state = 'lost';
    this.reason = reason;
    this.health.stop();
    this.awaitingStart.clear();
    this.overdueChildren.clear();
    this.overduePtys.clear();
    this.pidFloors.clear();
    let queued = this.queued;
    this.queued = [];
    this.pendingSends = [];
    if (unresponsive) {
      // Never sent, but their calls waited on a supervisor that did not answer: they come back
      // with that reason rather than wait again on a replacement that may stall the same way.
      for (const child of queued) {
        child.lostReason = reason;
        child.lostUnresponsive = true;
        child.onSpawnError(
          'ESUPERVISOR',
          `the process supervisor stopped answering before starting it (${reason})`,
        );
      }
      queued = [];
    }
    for (const [id, child] of this.children) {
      this.children.delete(id);
      child.lostReason = reason;
      if (unresponsive) child.lostUnresponsive = true;
      if (child.started) {
        const exit = ended.get(id);
        if (child.pid !== undefined) killGroupSync(child.pid);
        sweepCookie(child.cookie);
        if (exit) {
          // It had ended on its own before: its own exit, and the result says the supervisor
          // could not report it (the processes it left, if any, were killed with the group).
          child.endedBeforeLoss = true;
          child.onExit(exit.code, exit.signal === null ? null : signalName(exit.signal));
        } else child.onExit(null, 'SIGKILL');
      } else {
        // Sent, never confirmed: it may have started in the supervisor; its cookie finds it.
        sweepCookie(child.cookie);
        child.onSpawnError('ESUPERVISOR', `the process supervisor went away before starting it (${reason})`);
      }
    }
    for (const pty of [...this.ptys.values()]) {
      killTreeSync(pty.pid, pty.cookie || undefined);
      pty.emitExit({
        exitCode: 0,
        signal: 9,
        supervisorLost: reason,
        ...(unresponsive ? { supervisorUnresponsive: true as const } : {}),
      });
    }
    this.ptys.clear();
    for (const call of this.fsCalls.values()) {
      call.reject(
        Object.assign(new Error(`the sandbox's process supervisor went away (${reason})`), {
          code: 'ESANDBOX',
        }),
      );
    }
    this.fsCalls.clear();
    this.rejectPortCalls(reason);
    const wasBusy = this.refs > 0;
    this.refs = 0;
    if (wasBusy) this.options.onBusyChange?.(false);
    this.end();
    try {
      if (this.proc?.connected) this.proc.disconnect();
    } catch {
      // gone
    }
    if (!wasClosed) this.options.onLost(this, reason, queued, started || unresponsive, unresponsive);
  }
}
