import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { definePlugin, PERMISSION_GATE, TRASH_SERVICE, type TrashService } from '@conch/core';
import { defaultTrashDir, TrashStore } from '@conch/trash';
import {
  ensureProcessManager,
  applyEnvChanges,
  envForOutside,
  profileFor,
  type SandboxProfile,
} from '@conch/process';
import { terminalConfigSchema, type TerminalConfig } from './config.js';
import { rcLogDirOf, SessionPool } from './session-pool.js';
import { managedPtySpawner, type SessionPtyOptions } from './session-pty.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { routeToBackend } from './terminal-backend.js';
import { createTerminalTool } from './terminal-tool.js';

/** The `terminal` plugin: persistent PTY login-shell sessions behind one tool, `terminal`. */
/** A trash's directory, made now: a sandbox binds only what exists (a missing one would catch rm'd files in its /tmp). */
function trashDirFor(trash: TrashService): string {
  mkdirSync(trash.dir, { recursive: true, mode: 0o700 });
  return trash.dir;
}

export const terminalPlugin = definePlugin<TerminalConfig>({
  name: 'terminal',
  version: '0.0.0',
  description: 'Persistent PTY sessions (login shell) an agent can run commands in and talk to',
  configSchema: terminalConfigSchema,
  // The trash its rm moves files into, with the model's tool to list and restore them.
  partners: [{ plugin: 'trash', when: (c) => c.safeRm }],
  setup(ctx) {
    const manager = ensureProcessManager(ctx);
    // The kernel wall around each new session (read when a session starts, so paths protected
    // since are covered by the next session): the gate's sandbox, or — for a session a human let
    // run outside it, or a gate without one — the protected paths read-only.
    const sandbox = (options: SessionPtyOptions): SandboxProfile | undefined => {
      const policy = ctx.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
      if (!policy) return undefined;
      const level =
        options.outside || policy.mode === 'off'
          ? 'outside'
          : policy.mode === 'read-only'
            ? 'read-only'
            : 'workspace-write';
      return profileFor(policy, level);
    };
    // A session outside the sandbox gets the host's environment without what a sandboxed command
    // could have written into it: PATH entries in the workspace or a writable root (a `.venv/bin`
    // of an activated venv, `node_modules/.bin`, relative ones) and loader variables naming such a
    // place (LD_LIBRARY_PATH, PYTHONPATH, NODE_OPTIONS' --require, GIT_SSH_COMMAND's config, …): the
    // same as cli_based_tool's commands outside (@conch/process load-paths.ts).
    const envOutside = (env: Record<string, string>): Record<string, string> => {
      const policy = ctx.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
      if (!policy) return env;
      // `env` is the session's whole environment: a variable it lacks is not read from the host.
      const { changes, dropped } = envForOutside(env, [...policy.writableRoots, ctx.env.cwd], {});
      if (dropped.path.length === 0 && dropped.loaders.length === 0) return env;
      ctx.logger.info(
        { path: dropped.path, dropped: dropped.loaders },
        'terminal: a session outside the sandbox leaves out what a sandboxed command could have written',
      );
      return applyEnvChanges(env, changes);
    };
    // The trash partner's service, read when a session starts; without it (the trash plugin is not
    // installed or exposed) the same default trash, so rm never falls back to deleting.
    let ownTrash: TrashService | undefined;
    const trash = (): TrashService =>
      ctx.resolveOptional(TRASH_SERVICE) ??
      (ownTrash ??= new TrashStore({ dir: defaultTrashDir(ctx.env.cwd), logger: ctx.logger }));
    // What every sandbox of this registry gives the shells: the session files (init, command and
    // rm files in the registry's temp dir) read-only, the rc-error logs and the trash writable.
    // Registered before the first session, so terminal, cli and file tools share one sandbox.
    if (ctx.config.outputDir) {
      // A configured output directory is shown to the sandbox (a closed home would hide it).
      try {
        mkdirSync(resolve(ctx.env.cwd, ctx.config.outputDir), { recursive: true, mode: 0o700 });
      } catch {
        // unwritable: spill files go elsewhere, and the result says so
      }
    }
    manager.shareWithSandbox({
      visible: [
        ctx.env.tempDir(),
        ...(ctx.config.outputDir ? [resolve(ctx.env.cwd, ctx.config.outputDir)] : []),
      ],
      writable: [rcLogDirOf(ctx.env.tempDir()), ...(ctx.config.safeRm ? [trashDirFor(trash())] : [])],
    });
    const pool = new SessionPool({
      config: ctx.config,
      logger: ctx.logger,
      events: ctx.events,
      tempDir: () => ctx.env.tempDir(),
      cwd: ctx.env.cwd,
      trash,
      gate: () => ctx.resolveOptional(PERMISSION_GATE),
      sandboxActivity: (cookie) => manager.takeSandboxActivity(cookie),
      ...(ctx.config.outputDir ? { outputDir: resolve(ctx.env.cwd, ctx.config.outputDir) } : {}),
      // Shells run under the registry's supervisor (they die with the host, SIGKILL included).
      spawnPty: managedPtySpawner(
        manager,
        (error) =>
          ctx.logger.warn(
            { err: error },
            'the process manager could not start a terminal PTY; starting it in this process',
          ),
        sandbox,
        envOutside,
      ),
    });
    ctx.provide(TERMINAL_SERVICE, pool);
    ctx.reportStatus('terminal', () => ({ sessions: pool.list().length, shell: pool.shellKind }));
    return {
      // Routed per call to the executor plugin's terminal backend (sessions in a remote target) when one is provided.
      tools: [routeToBackend(createTerminalTool(pool), ctx, ctx.config)],
      instructions:
        'terminal runs commands in persistent shell sessions. A result with exit_code means the command finished; ' +
        'a result with session_id means it still runs: state "waiting" (it waits for input: answer with { session_id, input }) ' +
        'or "background" (poll with { session_id, input: "" }, stop with { session_id, kill: true }). ' +
        'Use background: true for servers and watchers, with wait_for (a regex such as "ready in|listening on") to return as soon as one is ready. ' +
        'Kill sessions you no longer need.',
      dispose: () => pool.dispose(),
    };
  },
});

export default terminalPlugin;
