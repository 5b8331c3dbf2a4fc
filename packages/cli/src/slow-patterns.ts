import type { ParsedCommand } from '@conch/shell-syntax';
import type { SlowPattern } from './config.js';

/** Known slow commands and their estimated durations (the jaato table, plus close relatives). */
export const DEFAULT_SLOW_PATTERNS: readonly SlowPattern[] = [
  { pattern: 'npm install', seconds: 30 },
  { pattern: 'npm i', seconds: 30 },
  { pattern: 'npm ci', seconds: 30 },
  { pattern: 'yarn install', seconds: 30 },
  { pattern: 'pnpm install', seconds: 30 },
  { pattern: 'cargo build', seconds: 60 },
  { pattern: 'mvn install', seconds: 60 },
  { pattern: 'docker build', seconds: 60 },
  { pattern: 'pytest', seconds: 30 },
  { pattern: 'python -m pytest', seconds: 30 },
  { pattern: 'python3 -m pytest', seconds: 30 },
  { pattern: 'npm test', seconds: 30 },
  { pattern: 'pip install', seconds: 20 },
  { pattern: 'pip3 install', seconds: 20 },
  { pattern: 'git clone', seconds: 20 },
];

const splitCache = new WeakMap<readonly SlowPattern[], { words: string[]; seconds: number }[]>();

/**
 * Estimated seconds of a parsed command line: the sum over its simple commands of the matching
 * pattern's estimate (a pattern matches when its words are the command's leading words).
 * Unparseable commands estimate 0.
 */
export function estimateSeconds(parsed: ParsedCommand, patterns: readonly SlowPattern[]): number {
  if (!parsed.ok) return 0;
  let split = splitCache.get(patterns);
  if (!split) {
    split = patterns.map((p) => ({ words: p.pattern.split(/\s+/), seconds: p.seconds }));
    splitCache.set(patterns, split);
  }
  let total = 0;
  for (const cmd of parsed.commands) {
    let best = 0;
    for (const p of split) {
      if (p.words.length > cmd.words.length) continue;
      if (p.words.every((w, i) => cmd.words[i] === w)) best = Math.max(best, p.seconds);
    }
    total += best;
  }
  return total;
}
