// The default logger: pino on stderr (fd 2, synchronous), named conch; built with the pino a caller
// imported when it passes one (conch-mcp's bundled server), else with pino required on first use.
import { describe, expect, it } from 'vitest';
import { createDefaultLogger } from './logger.js';

describe('createDefaultLogger', () => {
  it("builds the logger with the caller's pino when given one", () => {
    const calls: unknown[][] = [];
    const made = { made: 'by the given pino' };
    const pinoModule = {
      pino: (...args: unknown[]) => {
        calls.push(['pino', ...args]);
        return made;
      },
      destination: (...args: unknown[]) => {
        calls.push(['destination', ...args]);
        return 'stderr';
      },
    };
    const logger = createDefaultLogger(pinoModule as never);
    expect(logger).toBe(made);
    expect(calls).toEqual([
      ['destination', { fd: 2, sync: true }],
      ['pino', { name: 'conch', level: 'silent' }, 'stderr'],
    ]);
  });

  it('requires pino itself otherwise', () => {
    const logger = createDefaultLogger();
    expect(typeof logger.child).toBe('function');
    expect(logger.level).toBe('silent');
    expect(logger.bindings()).toMatchObject({ name: 'conch' });
  });
});
