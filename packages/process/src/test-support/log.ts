// Test helper: a real pino logger whose JSON lines are kept in memory.
import { pino, type Logger } from 'pino';

export function memoryLogger(): {
  logger: Logger;
  entries: () => { level: number; msg: string; reason?: string }[];
} {
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
  return {
    logger,
    entries: () => lines.map((line) => JSON.parse(line) as { level: number; msg: string; reason?: string }),
  };
}

/** pino's numeric level of warn. */
export const WARN = 40;
