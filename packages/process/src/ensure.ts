import { PERMISSION_GATE, token, type PluginContext } from '@conch/core';
import { CREDENTIAL_INJECTOR } from '@conch/sandbox';
import { ProcessManager } from './process-manager.js';

/** The registry's ProcessManager, provided by the first plugin that runs processes. */
export const PROCESS_MANAGER = token<ProcessManager>('conch.process.ProcessManager');

/**
 * The registry's ProcessManager: created by the first plugin setup that needs one (spill files in
 * the registry's temp dir, events on its bus), provided under `PROCESS_MANAGER` for partners and
 * the host, disposed with the registry, and reported in `registry.status()` (supervisor, sandbox).
 * Every plugin that runs processes calls this in its `setup` instead of creating its own.
 */
export function ensureProcessManager(
  ctx: Pick<PluginContext, 'env' | 'events' | 'logger' | 'resolveOptional'> &
    Partial<Pick<PluginContext, 'provide' | 'onDispose' | 'reportStatus' | 'container'>>,
): ProcessManager {
  const existing = ctx.resolveOptional(PROCESS_MANAGER);
  if (existing instanceof ProcessManager && !existing.disposed) return existing;
  const manager = new ProcessManager({
    tempDir: () => ctx.env.tempDir(),
    cwd: ctx.env.cwd,
    events: ctx.events,
    logger: ctx.logger,
    // Connections out of a sandbox: decided by the registry's permission gate (read per connection).
    network: {
      async decide(destination) {
        const gate = ctx.resolveOptional(PERMISSION_GATE);
        if (!gate?.checkNetwork)
          return { allowed: false, reason: 'no permission gate decides network access' };
        const decision = await gate.checkNetwork(destination);
        return decision.outcome === 'allow' ? { allowed: true } : { allowed: false, reason: decision.reason };
      },
    },
    // Credentials that never enter a sandbox: the permission plugin's, when its config names some.
    credentials: () => ctx.resolveOptional(CREDENTIAL_INJECTOR),
  });
  if (ctx.provide) ctx.provide(PROCESS_MANAGER, manager);
  // Contexts of plugins on the deprecated hooks (and tests) still register through the container.
  else ctx.container?.register(PROCESS_MANAGER.id, { useValue: manager });
  ctx.onDispose?.(() => manager.dispose());
  ctx.reportStatus?.('processes', () => manager.status());
  return manager;
}
