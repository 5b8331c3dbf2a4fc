import { destination, pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * The logger a registry uses when the host gives none: warnings and errors as JSON on stderr,
 * level from CONCH_LOG_LEVEL; silent under test runners.
 */
export function createDefaultLogger(): Logger {
  const level = process.env.CONCH_LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'warn');
  return pino({ name: 'conch', level }, destination({ fd: 2, sync: true }));
}
