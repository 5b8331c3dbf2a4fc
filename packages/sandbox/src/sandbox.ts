import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync, realpathSync } from 'node:fs';
import type { Socket } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConchError, makeTempDir, type KernelPolicy, type Logger, removeSync } from '@conch/core';
import { findBwrap } from './find-bwrap.js';
import {
  encodeGuardRules,
  GUARD_BINARY,
  guardAvailability,
  GuardEventReader,
  guardRulesFor,
  type GuardAvailability,
  type GuardOp,
} from './guard.js';
import { EngineProxy, type EngineRefusal } from './engine/engine-proxy.js';
import { parseEnginePolicy, type EnginePolicyInput } from './engine/engine-policy-config.js';
import { engineSandboxEnv } from './engine/engine-socket.js';
import { KernelPolicyBuilder } from './kernel-policy.js';
import { limitSupport, limitWrap, resourcesOf } from './resource-limits.js';
import type { CredentialInjector } from './credentials/credential-injector.js';
import { allowListDecider, loopbackPorts } from './network-allow-list.js';
import { NetworkProxy, type BlockedConnection } from './network-proxy.js';
import { changesHistory, historyPlants, inspectPlants, workTreeOf, type Plant } from './plants.js';
import { probeSandbox, type SandboxStatus } from './probe.js';
import {
  ENGINE_DIR_IN_SANDBOX,
  envFilter,
  installRoot,
  profileFor,
  PROXY_PORT,
  PROXY_SOCKET_IN_SANDBOX,
  proxyEnv,
  sandboxArgs,
  type SandboxProfile,
} from './profile.js';

export interface SandboxOptions {
  /** The workspace: writable (mode 'workspace-write'), searched for protected paths. Default: process.cwd(). */
  workspace?: string;
  /** 'workspace-write' (default): the workspace and `writableRoots` writable; 'read-only': nothing is. */
  mode?: 'workspace-write' | 'read-only';
  /** More directories commands may write (absolute, or relative to the workspace). */
  writableRoots?: readonly string[];
  /**
   * Paths commands may read under the closed homes (absolute, `~/…`, or relative to the workspace).
   * The home reads as empty but for what toolchains need (home-view.ts).
   */
  readableRoots?: readonly string[];
  /**
   * Destinations commands reach through the sandbox's proxy (host patterns: `registry.npmjs.org`,
   * `*.pythonhosted.org`, `host:port`; `PACKAGE_REGISTRIES` lists the package registries). Nothing
   * is reachable without it. A service on this machine's loopback, named with its port
   * (`localhost:5432`, `127.0.0.1:8080`, `[::1]:6379`), is reached inside at the same address
   * (`psql -h localhost`, `curl localhost:8080`); other loopback ports stay closed.
   */
  network?: {
    allow?: readonly string[];
    deny?: readonly string[];
    /** How the proxy looks an allowed name up (default: the system resolver; a split-horizon VPN's own). */
    lookup?: (host: string) => Promise<readonly string[]>;
  };
  /**
   * Credentials that never enter the sandbox (credentials/, `CredentialInjector.create`): commands
   * get its placeholders and trust its session CA; the proxy lets its destinations through and puts
   * the real value on the wire there only. The host made it and closes it.
   */
  credentials?: CredentialInjector;
  /**
   * The host's container engine (podman, or Docker) through conch's policy socket (engine/): `true`
   * (the default policy) or the policy's settings. Inside, `DOCKER_HOST` and `/run/docker.sock`
   * point at it; what the policy refuses is in each run's `engineRefusals`. Found from
   * `DOCKER_HOST` / the usual sockets of this process's environment.
   */
  engine?: true | EnginePolicyInput;
  /** Credentials hidden besides the built-in ones (see kernel-policy.ts), or let through. */
  secrets?: {
    hideEnv?: readonly string[];
    keepEnv?: readonly string[];
    /** `~/…` or workspace-relative paths. */
    maskPaths?: readonly string[];
    exposeDotEnv?: boolean;
    /** true: the home directory is readable (only the credential stores masked). */
    openHome?: boolean;
  };
  /** The sandbox-private cache directory (default: per workspace under the user's cache dir). */
  cacheDir?: string;
  /** The home directory protected paths and secrets are found in (default: os.homedir()). */
  home?: string;
  /** The path guard (default on where it works); false: bubblewrap's mounts alone. */
  guard?: boolean;
  logger?: Logger;
}

export interface SandboxRunOptions {
  /** Inside the workspace (default: the workspace). */
  cwd?: string;
  /** The command's environment (default: this process's), credentials removed, the sandbox's own added. */
  env?: Readonly<Record<string, string | undefined>>;
  /** 'pipe' (default): output collected in the result; 'inherit': this process's stdio. */
  stdio?: 'pipe' | 'inherit';
  signal?: AbortSignal;
}

/** A call the guard refused. */
export interface SandboxRefusal {
  op: GuardOp;
  path: string;
  errno: number;
}

export interface SandboxRunResult {
  exitCode: number | null;
  signal: string | null;
  /** With stdio 'pipe'. */
  stdout?: string;
  stderr?: string;
  /** Calls the guard refused (writes to protected paths, reads of secrets, …). */
  refusals: SandboxRefusal[];
  /** What the command left that the user's own tools would run later (see plants.ts). */
  plants: Plant[];
  /** Connections the proxy refused while it ran. */
  blocked: BlockedConnection[];
  /** Container-engine requests the policy refused while it ran (with `engine`). */
  engineRefusals: EngineRefusal[];
}

export interface SandboxEvents {
  refused: [SandboxRefusal];
  plant: [Plant];
  blocked: [BlockedConnection];
}

/** The sandbox cannot run here (no bubblewrap, no user namespaces): nothing was run. */
export class SandboxUnavailableError extends ConchError {
  readonly reason: string;
  constructor(reason: string) {
    super({
      code: 'SANDBOX_UNAVAILABLE',
      message: `the sandbox cannot run here, so nothing was run: ${reason}`,
    });
    this.name = 'SandboxUnavailableError';
    this.reason = reason;
  }
}

const here = dirname(fileURLToPath(import.meta.url));
// Under vitest this module runs from src/*.ts; the init script is built into dist/.
const SANDBOX_INIT = here.endsWith('src')
  ? join(here, '..', 'dist', 'sandbox-init.js')
  : join(here, 'sandbox-init.js');
/** The variable the guard reads to say which run an event came from (one per run here). */
const RUN_COOKIE = 'CONCH_SANDBOX_RUN';

/**
 * conch's sandbox as a library, without a registry: a live policy in, sandboxed runs out.
 *
 * Each `run()` starts one command in its own bubblewrap (the policy as it is now: the workspace
 * walked for protected paths again when it changed), under the path guard where it works, with
 * the network only through the sandbox's allow-listing proxy. Runs of one Sandbox share its
 * private /tmp and cache directory. A registry runs its commands through @conch/process's
 * supervisor instead (one sandbox for many commands, cheaper per call); the walls are the same.
 */
export class Sandbox extends EventEmitter<SandboxEvents> {
  readonly workspace: string;
  private readonly options: SandboxOptions;
  private readonly builder: KernelPolicyBuilder;
  private readonly knownPlants = new Map<string, Plant>();
  private tmpRoot: string | undefined;
  private proxy: NetworkProxy | undefined;
  private netDir: string | undefined;
  /** The engine policy's settings (`engine: true` is the default policy), checked at construction. */
  private readonly enginePolicy: EnginePolicyInput | undefined;
  private disposed = false;

  constructor(options: SandboxOptions = {}) {
    super();
    this.options = options;
    this.workspace = realOr(resolve(options.workspace ?? process.cwd()));
    this.enginePolicy = options.engine === true ? {} : options.engine;
    // A bad engine policy fails here, naming its field, not at the first run.
    if (this.enginePolicy) parseEnginePolicy(this.enginePolicy);
    const home = options.home ?? homedir();
    this.builder = new KernelPolicyBuilder({
      mode: options.mode ?? 'workspace-write',
      paths: { home, workspaceRoot: this.workspace, extra: [] },
      secrets: {
        hideEnv: options.secrets?.hideEnv ?? [],
        keepEnv: options.secrets?.keepEnv ?? [],
        maskPaths: options.secrets?.maskPaths ?? [],
        exposeDotEnv: options.secrets?.exposeDotEnv === true,
        openHome: options.secrets?.openHome === true,
      },
      readableRoots: (options.readableRoots ?? []).map((r) =>
        r === '~' || r.startsWith('~/') ? join(home, r.slice(1)) : realOr(resolve(this.workspace, r)),
      ),
      writableRoots: (options.writableRoots ?? []).map((r) => realOr(resolve(this.workspace, r))),
      ...(options.cacheDir ? { cacheDir: options.cacheDir } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
  }

  /** The policy now (the workspace is walked again when a directory of it changed). */
  policy(): KernelPolicy {
    return this.builder.policy();
  }

  /** The profile a run gets now. */
  profile(): SandboxProfile {
    const policy = this.policy();
    return profileFor(policy, policy.mode === 'read-only' ? 'read-only' : 'workspace-write')!;
  }

  /** Whether bubblewrap and the guard work here, and why not. */
  async status(): Promise<{ bubblewrap: SandboxStatus; guard: GuardAvailability }> {
    const guard: GuardAvailability =
      this.options.guard === false
        ? { available: false, reason: 'switched off (guard: false)' }
        : guardAvailability();
    return { bubblewrap: await probeSandbox(), guard };
  }

  /** Runs one command in the sandbox. Never runs it unsandboxed: throws SandboxUnavailableError instead. */
  async run(
    file: string,
    args: readonly string[] = [],
    options: SandboxRunOptions = {},
  ): Promise<SandboxRunResult> {
    if (this.disposed) throw new Error('the sandbox was disposed');
    const bwrap = findBwrap();
    const probed = await probeSandbox();
    if (!bwrap || !probed.available)
      throw new SandboxUnavailableError(probed.reason ?? 'bwrap was not found on PATH');
    const profile = this.profile();
    const guard = this.options.guard === false ? undefined : guardAvailability();
    const rules = guard?.available ? guardRulesFor(profile, RUN_COOKIE) : undefined;
    const injector = profile.kind === 'workspace-write' ? this.options.credentials : undefined;
    const network =
      profile.kind === 'workspace-write' && (this.options.network?.allow?.length || injector)
        ? await this.startProxy()
        : undefined;
    // The injector's CA bundle (the system's CAs and its session CA), bound in read-only.
    const caBundle = network && injector ? this.caBundle(injector) : undefined;
    // The container engine's policy socket: its directory bound read-only, the usual paths to it.
    const engine =
      profile.kind === 'workspace-write' && this.enginePolicy ? await this.startEngine() : undefined;
    let walled: SandboxProfile =
      network && profile.kind === 'workspace-write' ? { ...profile, network: 'proxy' } : profile;
    if (engine && walled.kind === 'workspace-write') walled = { ...walled, engine: { ...this.enginePolicy } };
    const { args: wall } = sandboxArgs(
      walled,
      [GUARD_BINARY, process.execPath, SANDBOX_INIT].map((p) => installRoot(p)),
      {
        tmp: this.tmp(),
        ...(network ? { proxySocket: network } : {}),
        ...(caBundle ? { caBundle } : {}),
        ...(engine ? { engineDir: engine.dir } : {}),
      },
    );
    const cwd = realOr(resolve(this.workspace, options.cwd ?? '.'));
    // The host's loopback services the allow-list names (`localhost:5432`): reached inside at the
    // same address and port, each connection decided by the proxy like any other.
    const hostPorts = network ? loopbackPorts(this.options.network?.allow ?? []) : [];
    const cookie = `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    const env = this.environment(
      profile,
      options.env ?? process.env,
      network !== undefined,
      caBundle ? injector : undefined,
    );
    if (engine) Object.assign(env, engineSandboxEnv(`${ENGINE_DIR_IN_SANDBOX}/docker.sock`));
    env[RUN_COOKIE] = cookie;
    const inner = [
      // Memory and process rlimits on what runs inside (resource-limits.ts; no scope for one command).
      ...limitWrap(resourcesOf(walled)!, limitSupport({ cgroup: false }), '').inner,
      ...(rules ? [GUARD_BINARY, '--channel', '3', '--'] : []),
      ...(network
        ? [
            process.execPath,
            SANDBOX_INIT,
            '--bridge',
            PROXY_SOCKET_IN_SANDBOX,
            String(PROXY_PORT),
            ...(hostPorts.length ? ['--forward', hostPorts.join(',')] : []),
            '--',
          ]
        : []),
      file,
      ...args,
    ];
    const pipe = options.stdio !== 'inherit';
    const child = spawn(bwrap, [...wall, '--die-with-parent', '--chdir', cwd, '--', ...inner], {
      stdio: [
        pipe ? 'ignore' : 'inherit',
        pipe ? 'pipe' : 'inherit',
        pipe ? 'pipe' : 'inherit',
        rules ? 'pipe' : 'ignore',
      ],
      env,
    });
    const refusals: SandboxRefusal[] = [];
    const written = new Set<string>();
    if (rules) {
      const channel = child.stdio[3] as Socket;
      const reader = new GuardEventReader();
      channel.on('data', (chunk: Buffer) => {
        for (const event of reader.push(chunk)) {
          if (event.kind === 'refused') {
            const refusal = { op: event.op, path: event.path, errno: event.errno };
            if (refusals.length < 200) refusals.push(refusal);
            this.emit('refused', refusal);
          } else if (event.kind === 'written') written.add(event.path);
        }
      });
      channel.on('error', () => {});
      channel.write(encodeGuardRules(rules));
    }
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    const started = performance.now();
    const startedAt = Date.now();
    const abort = () => child.kill('SIGKILL');
    options.signal?.addEventListener('abort', abort, { once: true });
    const ended = await new Promise<{ code: number | null; signal: string | null }>((done) => {
      child.on('error', (error) => {
        stderr += `${error.message}\n`;
        done({ code: null, signal: null });
      });
      child.on('close', (code, signal) => done({ code, signal }));
    });
    options.signal?.removeEventListener('abort', abort);
    const plants = await this.analyse(written);
    const blocked = this.proxy?.blockedSince(started) ?? [];
    for (const b of blocked) this.emit('blocked', b);
    // Requests only: the proxy also keeps its start-up notice (no engine on this host, method '-').
    const engineRefusals = engine
      ? engine.proxy.refusals().filter((r) => r.at >= startedAt && r.method !== '-')
      : [];
    return {
      exitCode: ended.code,
      signal: ended.signal,
      ...(pipe ? { stdout, stderr } : {}),
      refusals,
      plants,
      blocked,
      engineRefusals,
    };
  }

  /** Every plant found and not cleared. */
  plants(): Plant[] {
    return [...this.knownPlants.values()];
  }

  /** Forgets plants (all, or those at these paths). */
  clearPlants(paths?: readonly string[]): void {
    for (const [key, plant] of this.knownPlants)
      if (!paths || paths.includes(plant.path)) this.knownPlants.delete(key);
  }

  /** Stops the proxy and the policy's watchers, removes the private /tmp. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.builder.dispose();
    this.proxy?.close();
    for (const dir of [this.tmpRoot, this.netDir]) if (dir) removeSync(dir, { recursive: true, force: true });
    // The engine proxy stops asynchronously (its spool and socket go with it); its directory after.
    void this.engineStart?.then(async () => {
      const engine = this.engine!;
      await engine.proxy.stop().catch(() => undefined);
      removeSync(engine.dir, { recursive: true, force: true });
    });
  }

  private async analyse(written: Set<string>): Promise<Plant[]> {
    const plants = inspectPlants(written);
    const repos = new Map<string, string[]>();
    for (const path of written) {
      const tree = changesHistory(path) ? workTreeOf(path) : undefined;
      if (tree) repos.set(tree, [...(repos.get(tree) ?? []), path]);
    }
    for (const [tree, changed] of repos) plants.push(...(await historyPlants(tree, changed)));
    for (const plant of plants) {
      const key = `${plant.kind}\0${plant.path}\0${plant.detail}`;
      if (this.knownPlants.has(key)) continue;
      this.knownPlants.set(key, plant);
      this.emit('plant', plant);
    }
    return plants;
  }

  private environment(
    profile: SandboxProfile,
    base: Readonly<Record<string, string | undefined>>,
    network: boolean,
    injector: CredentialInjector | undefined,
  ): Record<string, string> {
    const hidden = envFilter(profile);
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(base)) {
      // A credential's real value never enters, whatever the variable's name.
      if (value === undefined || hidden?.(name, value) || injector?.hides(value)) continue;
      env[name] = value;
    }
    if (profile.kind === 'workspace-write') Object.assign(env, profile.env ?? {});
    if (network) Object.assign(env, proxyEnv());
    // Its placeholders (which the env filter would hide by name), the CA variables, git's helpers.
    if (injector) Object.assign(env, injector.sandboxEnv());
    return env;
  }

  /** The credential injector's CA bundle on the host (its injector is this Sandbox's one). */
  private caBundlePath: string | undefined;

  /** The injector's CA bundle on the host (written once, beside the proxy's socket). */
  private caBundle(injector: CredentialInjector): string | undefined {
    if (this.caBundlePath && existsSync(this.caBundlePath)) return this.caBundlePath;
    if (!this.netDir) return undefined;
    this.caBundlePath = injector.writeCaBundle(this.netDir);
    return this.caBundlePath;
  }

  private tmp(): string {
    this.tmpRoot ??= makeTempDir('conch-sandbox-');
    return this.tmpRoot;
  }

  private engine: { proxy: EngineProxy; dir: string } | undefined;
  private engineStart: Promise<{ proxy: EngineProxy; dir: string } | undefined> | undefined;

  /**
   * The container engine's policy socket (started on the first run with `engine`), or undefined
   * when it could not start (logged once; runs then have no engine socket).
   */
  private startEngine(): Promise<{ proxy: EngineProxy; dir: string } | undefined> {
    this.engineStart ??= (async () => {
      const dir = makeTempDir('conch-sandbox-engine-');
      const proxy = new EngineProxy({ ...(this.options.logger ? { logger: this.options.logger } : {}) });
      this.engine = { proxy, dir };
      try {
        await proxy.start({
          workspace: this.workspace,
          sessionId: `conch-sandbox-${process.pid}-${Math.random().toString(36).slice(2, 10)}`,
          policy: this.enginePolicy ?? {},
          socketPath: join(dir, 'docker.sock'),
        });
        return this.engine;
      } catch (error) {
        this.options.logger?.warn(
          { err: error },
          'sandbox: the container engine policy socket could not start',
        );
        return undefined;
      }
    })();
    return this.engineStart;
  }

  private proxyStart: Promise<string | undefined> | undefined;

  /** The proxy's socket once it listens (started on the first run with an allow-list), or undefined. */
  private startProxy(): Promise<string | undefined> {
    this.proxyStart ??= (async () => {
      const dir = makeTempDir('conch-sandbox-net-');
      this.netDir = dir;
      const socketPath = join(dir, 'proxy.sock');
      const injector = this.options.credentials;
      // A credential's destinations are reachable (the injector puts the real value on the wire there).
      const destinations = (injector?.destinations() ?? []).map(({ host, port }) =>
        host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`,
      );
      this.proxy = new NetworkProxy({
        socketPath,
        decide: allowListDecider({
          allow: [...(this.options.network?.allow ?? []), ...destinations],
          deny: this.options.network?.deny ?? [],
        }),
        logger: this.options.logger,
        ...(injector ? { intercept: (destination) => injector.interceptFor(destination) } : {}),
        ...(this.options.network?.lookup ? { lookup: this.options.network.lookup } : {}),
      });
      try {
        await this.proxy.start();
        return socketPath;
      } catch (error) {
        this.options.logger?.warn(
          { err: error },
          'sandbox: the network proxy could not start; runs have no network',
        );
        return undefined;
      }
    })();
    return this.proxyStart;
  }
}

function realOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
