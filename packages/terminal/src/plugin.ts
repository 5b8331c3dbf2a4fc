import { definePlugin, type PluginContext } from '@conch/core';
import { ensureProcessManager } from '@conch/process';
import { terminalConfigSchema, type TerminalConfig } from './config.js';
import { SessionPool } from './session-pool.js';
import { managedPtySpawner } from './session-pty.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createTerminalTool } from './terminal-tool.js';

const pools = new WeakMap<PluginContext<TerminalConfig>, SessionPool>();

function poolOf(ctx: PluginContext<TerminalConfig>): SessionPool {
  let pool = pools.get(ctx);
  if (!pool) {
    pool = new SessionPool({
      config: ctx.config,
      logger: ctx.logger,
      events: ctx.events,
      tempDir: () => ctx.env.tempDir(),
      cwd: ctx.env.cwd,
      // Shells run under the registry's supervisor (they die with the host, SIGKILL included).
      spawnPty: managedPtySpawner(ensureProcessManager(ctx), (error) =>
        ctx.logger.warn(
          { err: error },
          'the process manager could not start a terminal PTY; starting it in this process',
        ),
      ),
    });
    pools.set(ctx, pool);
    const owned = pool;
    ctx.onDispose(() => owned.dispose());
  }
  return pool;
}

/** The `terminal` plugin: persistent PTY login-shell sessions behind one tool, `terminal`. */
export const terminalPlugin = definePlugin<TerminalConfig>({
  name: 'terminal',
  version: '0.0.0',
  description: 'Persistent PTY sessions (login shell) an agent can run commands in and talk to',
  configSchema: terminalConfigSchema,
  register(ctx) {
    ctx.container.register(TERMINAL_SERVICE, { useValue: poolOf(ctx) });
  },
  tools: (ctx) => [createTerminalTool(poolOf(ctx))],
  systemInstructions:
    'terminal runs commands in persistent shell sessions. A result with exit_code means the command finished; ' +
    'a result with session_id means it still runs: state "waiting" (it waits for input: answer with { session_id, input }) ' +
    'or "background" (poll with { session_id, input: "" }, stop with { session_id, kill: true }). ' +
    'Use background: true for servers and watchers. Kill sessions you no longer need.',
});

export default terminalPlugin;
