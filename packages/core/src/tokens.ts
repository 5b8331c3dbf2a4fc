import type { PermissionGate } from './permission.js';
import type { BackgroundService, TrashService } from './services.js';
import { token } from './token.js';

/**
 * DI tokens plugins meet through. Resolve partners optionally (`ctx.resolveOptional(TOKEN)`), at
 * call time, so each plugin works alone and gains behaviour when its partner is exposed.
 */
export const TOKENS = {
  /** pino `Logger`, the registry's root logger. */
  Logger: Symbol.for('conch.core.Logger'),
  /** `EventBus`, one per registry. */
  EventBus: Symbol.for('conch.core.EventBus'),
  /** `RegistryEnvironment`: cwd and temp dir of the registry. */
  Environment: Symbol.for('conch.core.Environment'),
  /** `PermissionGate`, provided by the permission plugin. */
  PermissionGate: Symbol.for('conch.permission.PermissionGate'),
  /** `BackgroundService`, provided by the background plugin. */
  BackgroundService: Symbol.for('conch.background.BackgroundService'),
  /** `ProcessManagerService`, one per registry, provided by @conch/process. */
  ProcessManager: Symbol.for('conch.process.ProcessManager'),
} as const;

/** The permission gate every command tool consults (provided by @conch/permission). */
export const PERMISSION_GATE = token<PermissionGate>('conch.permission.PermissionGate');
/** The background task service (provided by @conch/background). */
export const BACKGROUND_SERVICE = token<BackgroundService>('conch.background.BackgroundService');
/** The per-project trash the terminal's and the cli's `rm` move files into (provided by @conch/trash). */
export const TRASH_SERVICE = token<TrashService>('conch.trash.TrashService');
