import {
  InvalidConfigError,
  normalizeConfigKeys,
  toValidationIssues,
  type EventBus,
  type Logger,
} from '@conch/core';
import { FileOperator, type FileOperations } from '@conch/files';
import { BubblewrapExecutor, ProcessManager, type Executor } from '@conch/process';
import { ExecClient } from './client/exec-client.js';
import { RemoteFileOperator } from './client/remote-file-operator.js';
import { RemoteProcessManager } from './client/remote-process-manager.js';
import { RemoteTerminal } from './client/remote-terminal.js';
import { executorConfigSchema, type ExecutorConfig, type RemoteExecutorConfig } from './config.js';
import type { FilesPolicy } from './protocol.js';
import type { ProcessLayer } from './process-layer.js';
import { ContainerTransport } from './transport/container-transport.js';
import { KubectlTransport } from './transport/kubectl-transport.js';
import { SandboxClaimTransport, type SandboxClaimInfo } from './transport/sandbox-claim-transport.js';
import { SshTransport } from './transport/ssh-transport.js';
import type { Transport } from './transport/transport.js';

/** What the factory needs from its caller (a plugin context, an environment). */
export interface ExecutorContext {
  /** The host's working directory (the workspace of the local kinds). */
  cwd: string;
  /** Where local spill files go. */
  tempDir?: () => string;
  logger?: Logger | undefined;
  events?: EventBus | undefined;
  /** The local kinds use this manager (e.g. the registry's `ensureProcessManager(ctx)`) instead of making one. */
  processManager?: ProcessManager | undefined;
  /** The terminal plugin's config, for a remote terminal. */
  terminalConfig?: Record<string, unknown> | undefined;
  /** The host's file policy (environment files config, roots in the target's terms) and protected-path rule. */
  files?:
    { policy?: FilesPolicy; protectedReason?: (absolutePath: string) => string | undefined } | undefined;
}

/** Where the target is and what it is (after connecting, for remote kinds). */
export interface TargetInfo {
  kind: ExecutorConfig['kind'];
  target: string;
  /** The workspace (absolute, in the target). */
  cwd: string;
  user?: string;
  home?: string;
  hostname?: string;
  platform?: string;
  arch?: string;
  node?: string;
  /** The bundle hash the server runs. */
  bundle?: string | null;
  /** Whether terminal sessions can run there. */
  pty?: { available: boolean; reason?: string };
  /** `kubernetes` with `claim`: the SandboxClaim, its Sandbox and the pod commands run in. */
  sandbox?: SandboxClaimInfo;
}

/**
 * One switch for where things run. The local kinds are the process layer as it is (bubblewrap
 * wraps every command); the remote kinds run it in the target through the exec server. Commands
 * are judged by the host's permission gate before they get here, in every kind.
 */
export interface ExecutionTarget {
  readonly kind: ExecutorConfig['kind'];
  /** 'local', 'bubblewrap', 'ssh:user@host:port', 'podman:name', 'kubernetes:ctx/ns/pod'. */
  readonly target: string;
  readonly remote: boolean;
  /** Where commands run (ProcessManager locally, RemoteProcessManager in a target). */
  readonly processes: ProcessLayer;
  /** File operations (@conch/files' semantics), where the files are. */
  readonly files: FileOperations;
  /** Terminal sessions in the target (remote kinds; locally @conch/terminal runs as it is). */
  readonly terminal: RemoteTerminal | undefined;
  /** The connection (remote kinds). */
  readonly client: ExecClient | undefined;
  /** For the local bubblewrap kind: the executor every spawn goes through. */
  readonly executor: Executor | undefined;
  info(): Promise<TargetInfo>;
  /** Kills what it started and closes the connection. */
  dispose(): Promise<void>;
}

/** Validates an `executor` config (snake_case keys accepted) or throws InvalidConfigError naming the field. */
export function parseExecutorConfig(config: unknown): ExecutorConfig {
  const normalized = normalizeConfigKeys(config ?? {});
  if (!normalized.ok) {
    throw new InvalidConfigError('executor', [
      {
        path: normalized.key,
        expected: `one spelling of the key (given both '${normalized.key}' and '${normalized.alias}')`,
        received: 'both',
      },
    ]);
  }
  const parsed = executorConfigSchema.safeParse(normalized.value);
  if (!parsed.success) {
    throw new InvalidConfigError(
      'executor',
      toValidationIssues(parsed.error, normalized.value),
      parsed.error,
    );
  }
  return parsed.data;
}

/** The transport of a remote config (the logger hears a SandboxClaim's kubectl calls and cleanup). */
export function transportFor(
  config: RemoteExecutorConfig,
  options: { logger?: Logger | undefined } = {},
): Transport {
  switch (config.kind) {
    case 'ssh':
      return new SshTransport({
        host: config.host,
        ...(config.port !== undefined ? { port: config.port } : {}),
        ...(config.user !== undefined ? { user: config.user } : {}),
        ...(config.identityFile !== undefined ? { identityFile: config.identityFile } : {}),
        ...(config.options !== undefined ? { options: config.options } : {}),
        ...(config.ssh !== undefined ? { ssh: config.ssh } : {}),
        ...(config.controlPersistSeconds !== undefined
          ? { controlPersistSeconds: config.controlPersistSeconds }
          : {}),
      });
    case 'container':
      return new ContainerTransport({
        engine: config.engine,
        container: config.container,
        ...(config.user !== undefined ? { user: config.user } : {}),
        ...(config.command !== undefined ? { command: config.command } : {}),
        ...(config.engineArgs !== undefined ? { engineArgs: config.engineArgs } : {}),
      });
    case 'kubernetes':
      if (config.claim) {
        const claim = config.claim;
        return new SandboxClaimTransport({
          ...(claim.template !== undefined ? { template: claim.template } : {}),
          ...(claim.warmPool !== undefined ? { warmPool: claim.warmPool } : {}),
          ...(claim.namespace !== undefined ? { namespace: claim.namespace } : {}),
          ...(claim.readyTimeoutMs !== undefined ? { readyTimeoutMs: claim.readyTimeoutMs } : {}),
          ...(claim.shutdownAfterSeconds !== undefined
            ? { shutdownAfterSeconds: claim.shutdownAfterSeconds }
            : {}),
          ...(claim.keep !== undefined ? { keep: claim.keep } : {}),
          ...(claim.labels !== undefined ? { labels: claim.labels } : {}),
          ...(config.container !== undefined ? { container: config.container } : {}),
          ...(config.context !== undefined ? { context: config.context } : {}),
          ...(config.kubeconfig !== undefined ? { kubeconfig: config.kubeconfig } : {}),
          ...(config.kubectl !== undefined ? { kubectl: config.kubectl } : {}),
          logger: options.logger,
        });
      }
      return new KubectlTransport({
        // The schema admits a config without a claim only with a pod.
        pod: config.pod!,
        ...(config.namespace !== undefined ? { namespace: config.namespace } : {}),
        ...(config.container !== undefined ? { container: config.container } : {}),
        ...(config.context !== undefined ? { context: config.context } : {}),
        ...(config.kubeconfig !== undefined ? { kubeconfig: config.kubeconfig } : {}),
        ...(config.kubectl !== undefined ? { kubectl: config.kubectl } : {}),
      });
  }
}

/**
 * Makes the execution target an `executor` config names. Throws InvalidConfigError for a bad
 * config; connects nothing (a remote target connects, and deploys its server, on first use).
 */
export function executorFromConfig(config: unknown, ctx: ExecutorContext): ExecutionTarget {
  const parsed = parseExecutorConfig(config);
  if (parsed.kind === 'local' || parsed.kind === 'bubblewrap') return localTarget(parsed, ctx);
  return remoteTarget(parsed, transportFor(parsed, { logger: ctx.logger }), ctx);
}

/** A remote target over any transport (the factory's remote kinds; tests and custom transports). */
export function remoteTarget(
  config: Omit<RemoteExecutorConfig, 'kind' | 'host' | 'pod' | 'container' | 'engine'> & {
    kind: RemoteExecutorConfig['kind'];
  },
  transport: Transport,
  ctx: ExecutorContext,
): ExecutionTarget {
  const client = new ExecClient({
    transport,
    logger: ctx.logger,
    node: config.node,
    cwd: config.cwd,
    cacheDir: config.cacheDir,
    serverCommand: config.serverCommand,
    heartbeatMs: config.heartbeatMs,
    idleTimeoutMs: config.idleTimeoutMs,
    detachGraceMs: config.detachGraceMs,
    connectTimeoutMs: config.connectTimeoutMs,
    serverLogLevel: config.serverLogLevel,
    keepTempFiles: config.keepTempFiles,
  });
  const processes = new RemoteProcessManager({ client, events: ctx.events, logger: ctx.logger });
  const files = new RemoteFileOperator({
    client,
    ...(ctx.files?.policy ? { policy: ctx.files.policy } : {}),
    ...(ctx.files?.protectedReason ? { protectedReason: ctx.files.protectedReason } : {}),
  });
  const terminal = new RemoteTerminal({
    client,
    ...(ctx.terminalConfig ? { config: ctx.terminalConfig } : {}),
    events: ctx.events,
    logger: ctx.logger,
  });
  let disposing: Promise<void> | undefined;
  return {
    kind: config.kind,
    target: transport.target,
    remote: true,
    processes,
    files,
    terminal,
    client,
    executor: undefined,
    async info() {
      const { hello, init } = await client.connect();
      return {
        kind: config.kind,
        target: transport.target,
        cwd: init.cwd,
        user: hello.user,
        home: hello.home,
        hostname: hello.hostname,
        platform: hello.platform,
        arch: hello.arch,
        node: hello.node,
        bundle: hello.bundle,
        pty: init.pty,
        ...(transport instanceof SandboxClaimTransport && transport.info ? { sandbox: transport.info } : {}),
      };
    },
    dispose() {
      disposing ??= (async () => {
        // A transport step still in progress (a SandboxClaim becoming Ready) is given up first:
        // what waits on it (a spawn) then fails at once instead of holding dispose to its deadline.
        transport.cancelPrepare?.();
        await processes
          .dispose()
          .catch((error: unknown) =>
            ctx.logger?.warn({ err: error }, 'executor: killing remote processes failed'),
          );
        terminal.dispose();
        await client.dispose();
      })();
      return disposing;
    },
  };
}

function localTarget(
  config: Extract<ExecutorConfig, { kind: 'local' | 'bubblewrap' }>,
  ctx: ExecutorContext,
): ExecutionTarget {
  const executor =
    config.kind === 'bubblewrap'
      ? new BubblewrapExecutor({
          writable: [ctx.cwd, ...(config.writable ?? [])],
          ...(config.network !== undefined ? { network: config.network } : {}),
          ...(config.extraArgs !== undefined ? { extraArgs: config.extraArgs } : {}),
        })
      : undefined;
  const owned = !ctx.processManager || executor !== undefined;
  const processes = owned
    ? new ProcessManager({
        cwd: ctx.cwd,
        ...(ctx.tempDir ? { tempDir: ctx.tempDir } : {}),
        ...(ctx.events ? { events: ctx.events } : {}),
        ...(ctx.logger ? { logger: ctx.logger } : {}),
        ...(executor ? { executor } : {}),
      })
    : ctx.processManager!;
  const files = new FileOperator({
    root: ctx.files?.policy?.root ?? ctx.cwd,
    ...(ctx.files?.policy?.allowedRoots ? { allowedRoots: ctx.files.policy.allowedRoots } : {}),
    ...(ctx.files?.policy?.allowOutside !== undefined ? { allowOutside: ctx.files.policy.allowOutside } : {}),
    ...(ctx.files?.protectedReason ? { protectedReason: ctx.files.protectedReason } : {}),
    target: config.kind,
  });
  return {
    kind: config.kind,
    target: config.kind,
    remote: false,
    processes,
    files,
    terminal: undefined,
    client: undefined,
    executor,
    info: () => Promise.resolve({ kind: config.kind, target: config.kind, cwd: ctx.cwd }),
    dispose: () => (owned ? processes.dispose() : Promise.resolve()),
  };
}
