import { createRequire } from 'node:module';
import type * as Pino from 'pino';
import type { Logger } from 'pino';

const require = createRequire(import.meta.url);

export type { Logger } from 'pino';

/**
 * The logger a registry uses when the host gives none: warnings and errors as JSON on stderr,
 * level from CONCH_LOG_LEVEL; silent under test runners.
 */
export function createDefaultLogger(): Logger {
  // pino loads with the first default logger, not with @conch/core (hosts that bring a logger never load it).
  const { pino, destination } = require('pino') as typeof Pino;
  const level = process.env.CONCH_LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'warn');
  return pino({ name: 'conch', level }, destination({ fd: 2, sync: true }));
}
