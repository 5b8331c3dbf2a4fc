import { createRequire } from 'node:module';
import type * as Pino from 'pino';
import type { Logger } from 'pino';

const require = createRequire(import.meta.url);

export type { Logger } from 'pino';

/**
 * The logger a registry uses when the host gives none: warnings and errors as JSON on stderr,
 * level from CONCH_LOG_LEVEL; silent under test runners. `pinoModule` is the pino to build it
 * with, for a program that imports pino itself (conch-mcp's bundled server, where a `require`
 * made at run time would load pino's files apart from the bundle); by default pino is required
 * here, on first use.
 */
export function createDefaultLogger(pinoModule?: Pick<typeof Pino, 'pino' | 'destination'>): Logger {
  // pino loads with the first default logger, not with @conch/core (hosts that bring a logger never load it).
  const { pino, destination } = pinoModule ?? (require('pino') as typeof Pino);
  const level = process.env.CONCH_LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'warn');
  return pino({ name: 'conch', level }, destination({ fd: 2, sync: true }));
}
