import { onExit } from 'signal-exit';

const hooks = new Set<() => void>();
let removeHook: (() => void) | undefined;

function runAll(): void {
  for (const fn of hooks) {
    try {
      fn();
    } catch {
      // exiting: nothing left to report to
    }
  }
}

/**
 * Runs `fn` synchronously when the host exits — normally, through `process.exit()`, or killed by a
 * SIGTERM / SIGINT / SIGHUP nothing else handles (signal-exit re-raises the signal afterwards, so
 * the host still dies the way it would have). One signal-exit hook serves every caller (process
 * managers, terminal session pools); it is installed with the first and removed with the last.
 * Returns the function that unregisters `fn`. SIGKILL runs nothing: that is the supervisor's job.
 */
export function onHostExit(fn: () => void): () => void {
  if (hooks.size === 0) removeHook = onExit(runAll, { alwaysLast: true });
  hooks.add(fn);
  return () => {
    if (!hooks.delete(fn)) return;
    if (hooks.size === 0) {
      removeHook?.();
      removeHook = undefined;
    }
  };
}
