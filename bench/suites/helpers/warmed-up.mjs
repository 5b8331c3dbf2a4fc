// Waits until a fresh registry's warm-up at expose has run (the cli's parser and supervisor, the
// permission gate's throwaway judgement), then SETTLE_MS (100 ms) more: an agent's first call
// comes after the model's first turn, by when it has. Timing calls before that measures the
// warm-up itself, which the first-call row (per-call.mjs) covers.
export async function warmedUp(registry) {
  for (let i = 0; i < 3000; i++) {
    const status = await registry.status();
    const warm = status.cli?.warmUp;
    const done =
      warm &&
      warm.parser !== 'loading' &&
      warm.supervisor !== 'pending' &&
      status.permission?.warmUp !== 'pending' &&
      supervisorReady(status.processes, warm.supervisor);
    if (done) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await settle();
}

/**
 * Whether the supervisor the warm-up started answers. `processes.supervisor` says 'running' from
 * the moment one is asked to start (a sandbox's takes bubblewrap, the path guard and a node start:
 * about a second on a slow VM); `processes.spawner` is set once one is ready.
 */
function supervisorReady(processes, asked) {
  if (asked !== 'started') return true;
  return processes?.supervisor === 'fallback' || processes?.spawner !== undefined;
}

/**
 * The pause after the warm-up, before the first timed call (the first-call row pauses as long
 * before its tenth).
 */
export const SETTLE_MS = 100;
export const settle = () => new Promise((r) => setTimeout(r, SETTLE_MS));
