// Waits until a fresh registry's warm-up at expose has run (the cli's parser and supervisor, the
// permission gate's throwaway judgement), then SETTLE_MS (100 ms) more: an agent's first call
// comes after the model's first turn, by when it has. Timing calls before that measures the
// warm-up itself, which the first-call row (per-call.mjs) covers.
export async function warmedUp(registry) {
  for (let i = 0; i < 1000; i++) {
    const status = await registry.status();
    const warm = status.cli?.warmUp;
    const done =
      warm &&
      warm.parser !== 'loading' &&
      warm.supervisor !== 'pending' &&
      status.permission?.warmUp !== 'pending' &&
      status.processes?.supervisor !== 'starting';
    if (done) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await settle();
}

/**
 * The pause after the warm-up, before the first timed call (the first-call row pauses as long
 * before its tenth).
 */
export const SETTLE_MS = 100;
export const settle = () => new Promise((r) => setTimeout(r, SETTLE_MS));
