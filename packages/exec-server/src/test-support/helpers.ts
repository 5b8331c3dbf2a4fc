// Test helpers: polling, /proc scans of the host's view, an in-memory pino logger.
import { readdirSync, readFileSync } from 'node:fs';
import { pino, type Logger } from 'pino';

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Pids (in this host's namespace, which sees every child namespace too) of live processes whose
 * command line contains `marker`. The way to see a target's process from outside it.
 */
export function pidsWithArg(marker: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (!cmdline.includes(marker)) continue;
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.[0];
      if (state !== 'Z' && state !== 'X') out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

export function memoryLogger(level = 'debug'): { logger: Logger; lines: () => Record<string, unknown>[] } {
  const lines: string[] = [];
  const logger = pino({ level }, { write: (line: string) => void lines.push(line) });
  return { logger, lines: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** A marker unique to one test (shows up in /proc cmdlines). */
export function marker(name: string): string {
  return `conch-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}
