import { definePlugin, token } from '@conch/core';
import { ensureProcessManager } from '@conch/process';
import { executorConfigSchema, type ExecutorConfig } from './config.js';
import { executorFromConfig } from './execution-target.js';
import { remoteFileOperationsTarget } from './remote-file-operations.js';
import { SandboxClaimTransport } from './transport/sandbox-claim-transport.js';
import { EXECUTION_TARGET, FILE_OPERATIONS_TARGET, PROCESS_LAYER, TERMINAL_BACKEND } from './tokens.js';

/** @conch/permission's engine, by its token name (this package does not depend on it). */
const PERMISSION_ENGINE = token<{ protectedWriteReason(path: string, cwd?: string): string | undefined }>(
  'conch.permission.PermissionEngine',
);

/**
 * Plugin `executor`: the registry's one switch for where commands, terminal sessions and file
 * operations run — `{ "plugins": { "executor": { "kind": "ssh", "host": "dev" }, "cli": {}, ... } }`
 * in conch.config.json (exposed before the plugins that run commands). Provides the target under
 * EXECUTION_TARGET (and, for remote kinds, its process layer under PROCESS_LAYER, the terminal
 * backend under TERMINAL_BACKEND and the files plugin's operations under FILE_OPERATIONS_TARGET);
 * it has no tools of its own, and disposing the registry kills what ran there and closes the
 * connection.
 */
export const executorPlugin = definePlugin<ExecutorConfig>({
  name: 'executor',
  version: '0.0.0',
  description:
    'Where commands, terminal sessions and file operations run: local, bubblewrap, ssh, container, kubernetes',
  configSchema: executorConfigSchema,
  setup(ctx) {
    const target = executorFromConfig(ctx.config, {
      cwd: ctx.env.cwd,
      tempDir: () => ctx.env.tempDir(),
      logger: ctx.logger,
      events: ctx.events,
      // 'local' is the registry's own ProcessManager (the one cli and terminal use anyway).
      ...(ctx.config.kind === 'local' ? { processManager: ensureProcessManager(ctx) } : {}),
      // target.files never writes what the host's gate protects (judged on the target's paths,
      // its workspace standing for the workspace root), when a permission plugin is exposed; a
      // remote target refuses writes outside its workspace and to the built-in protected names
      // by itself, with or without one.
      files: {
        protectedReason: (abs) =>
          ctx
            .resolveOptional(PERMISSION_ENGINE)
            ?.protectedWriteReason(abs, target.client?.lastConnection?.init.cwd ?? ctx.env.cwd),
      },
    });
    ctx.provide(EXECUTION_TARGET, target);
    // cli (and the background tasks it starts) spawn through PROCESS_LAYER when it is provided: a
    // remote target's RemoteProcessManager, or the bubblewrap kind's wrapping ProcessManager. The
    // terminal tool runs its calls through TERMINAL_BACKEND (remote kinds). Both are resolved per
    // call by their consumers, so this plugin may be exposed before or after them.
    if (ctx.config.kind !== 'local') ctx.provide(PROCESS_LAYER, target.processes);
    if (target.terminal) ctx.provide(TERMINAL_BACKEND, target.terminal);
    // The files plugin's tools (and createEnvironment's env.files) work on the target's files,
    // resolved per call as well. Local kinds leave them on this machine.
    if (target.remote && target.client)
      ctx.provide(FILE_OPERATIONS_TARGET, remoteFileOperationsTarget(target.client));
    ctx.reportStatus('executor', () => ({
      kind: target.kind,
      target: target.target,
      connected: target.client?.currentGeneration !== undefined,
      ...(target.client?.lastConnection
        ? {
            cwd: target.client.lastConnection.init.cwd,
            bundle: target.client.lastConnection.hello.bundle,
            pty: target.client.lastConnection.init.pty,
          }
        : {}),
      // A SandboxClaim's target: the claim, its Sandbox and the pod (once Ready).
      ...(target.client?.transport instanceof SandboxClaimTransport && target.client.transport.info
        ? { sandbox: target.client.transport.info }
        : {}),
    }));
    return {
      instructions: target.remote
        ? `Commands, terminal sessions and file operations run on ${target.target}: paths, the working directory and environment variables are that machine's.`
        : undefined,
      dispose: () => target.dispose(),
    };
  },
});

export default executorPlugin;
