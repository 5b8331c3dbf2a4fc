import { onExit } from 'signal-exit';

/**
 * One exit hook for every live ProcessManager: when the host exits — normally, through
 * `process.exit()`, or killed by SIGTERM / SIGINT / SIGHUP that nothing else handles — each manager
 * kills its process groups and sweeps its cookie synchronously. signal-exit re-raises the signal
 * afterwards, so the host still dies the way it would have. The hook is removed when the last
 * manager is disposed.
 */
export interface ExitKillable {
  killAllSync(): void;
}

const live = new Set<ExitKillable>();
let removeHook: (() => void) | undefined;

function killAll(): void {
  for (const manager of live) {
    try {
      manager.killAllSync();
    } catch {
      // exiting: nothing left to report to
    }
  }
}

export function trackForExit(manager: ExitKillable): void {
  if (live.size === 0) removeHook = onExit(killAll, { alwaysLast: true });
  live.add(manager);
}

export function untrackForExit(manager: ExitKillable): void {
  if (!live.delete(manager)) return;
  if (live.size === 0) {
    removeHook?.();
    removeHook = undefined;
  }
}

/** How many managers the exit hook currently covers (for tests). */
export function trackedManagerCount(): number {
  return live.size;
}
