// Helper for tests: what the AI SDK would print as warnings (a "V2 compatibility" warning for a
// model of an older spec, unsupported settings …) while `run` runs, and any process warning.
import type { LogWarningsFunction } from 'ai';

/** Runs `run` and returns the warnings the AI SDK logged meanwhile (none is what the demo wants). */
export async function sdkWarningsDuring(run: () => Promise<void>): Promise<unknown[]> {
  const warnings: unknown[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.message);
  // ai's logger hook: a function receives every warning instead of process.emitWarning.
  const before = globalThis.AI_SDK_LOG_WARNINGS;
  const log: LogWarningsFunction = (options) => warnings.push(...options.warnings);
  globalThis.AI_SDK_LOG_WARNINGS = log;
  process.on('warning', onWarning);
  try {
    await run();
    // process.emitWarning reports on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    globalThis.AI_SDK_LOG_WARNINGS = before;
    process.off('warning', onWarning);
  }
  return warnings;
}
