/**
 * One `process.on('exit')` listener for every live ProcessManager: when the host exits, each
 * manager kills its process groups and sweeps its cookie synchronously. The listener is removed
 * when the last manager is disposed.
 */
export interface ExitKillable {
  killAllSync(): void;
}

const live = new Set<ExitKillable>();

function onExit(): void {
  for (const manager of live) {
    try {
      manager.killAllSync();
    } catch {
      // exiting: nothing left to report to
    }
  }
}

export function trackForExit(manager: ExitKillable): void {
  if (live.size === 0) process.on('exit', onExit);
  live.add(manager);
}

export function untrackForExit(manager: ExitKillable): void {
  if (!live.delete(manager)) return;
  if (live.size === 0) process.off('exit', onExit);
}

/** How many managers the exit hook currently covers (for tests). */
export function trackedManagerCount(): number {
  return live.size;
}
