import { onExit } from 'signal-exit';

/** What runs when the host dies: first every `kill` hook (process trees), then every `clean` one (temp dirs). */
export type HostExitPhase = 'kill' | 'clean';

const hooks: Record<HostExitPhase, Set<() => void>> = { kill: new Set(), clean: new Set() };
let removeHook: (() => void) | undefined;

function runAll(): void {
  for (const phase of ['kill', 'clean'] as const) {
    for (const fn of hooks[phase]) {
      try {
        fn();
      } catch {
        // exiting: nothing left to report to
      }
    }
  }
}

/**
 * Runs `fn` synchronously when the host exits — normally, through `process.exit()`, or killed by a
 * SIGTERM / SIGINT / SIGHUP nothing else handles (signal-exit re-raises the signal afterwards, so
 * the host still dies the way it would have). Hooks of the `kill` phase (process managers, terminal
 * pools) run before those of `clean` (the registry's temp dir, a browser profile in it), so nothing
 * still running writes into a directory after it is removed. One signal-exit hook serves every
 * caller; it is installed with the first and removed with the last. Returns the function that
 * unregisters `fn`. SIGKILL runs nothing: the supervisor kills then, and the next start sweeps.
 */
export function onHostExit(fn: () => void, phase: HostExitPhase = 'kill'): () => void {
  if (hooks.kill.size + hooks.clean.size === 0) removeHook = onExit(runAll, { alwaysLast: true });
  hooks[phase].add(fn);
  return () => {
    if (!hooks[phase].delete(fn)) return;
    if (hooks.kill.size + hooks.clean.size === 0) {
      removeHook?.();
      removeHook = undefined;
    }
  };
}
