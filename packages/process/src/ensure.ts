import { TOKENS, type PluginContext } from '@conch/core';
import { ProcessManager } from './process-manager.js';

/**
 * The registry's ProcessManager: created on first call (spill files in the registry's temp dir,
 * events on its bus) and registered under `TOKENS.ProcessManager`, where the registry's dispose()
 * finds and disposes it. Every plugin that runs processes calls this instead of creating its own.
 */
export function ensureProcessManager(
  ctx: Pick<PluginContext, 'container' | 'env' | 'events' | 'logger'>,
): ProcessManager {
  const { container } = ctx;
  if (container.isRegistered(TOKENS.ProcessManager, true)) {
    const existing = container.resolve<unknown>(TOKENS.ProcessManager);
    if (existing instanceof ProcessManager && !existing.disposed) return existing;
  }
  const manager = new ProcessManager({
    tempDir: () => ctx.env.tempDir(),
    cwd: ctx.env.cwd,
    events: ctx.events,
    logger: ctx.logger,
  });
  container.register(TOKENS.ProcessManager, { useValue: manager });
  return manager;
}
