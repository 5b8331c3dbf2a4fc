import { DEFAULT_SLOW_PATTERNS, estimateSlowSeconds, type SlowPattern } from '@conch/process';
import type { ParsedCommand } from '@conch/shell-syntax';

/**
 * The slow-command table is @conch/process's (`DEFAULT_SLOW_PATTERNS`), shared with the terminal
 * plugin; cli config `slowPatterns` adds entries to it.
 */
export { DEFAULT_SLOW_PATTERNS };

/**
 * Estimated seconds of a parsed command line: the sum over its simple commands of the matching
 * pattern's estimate (a pattern matches when its words are the command's leading words).
 * Unparseable commands estimate 0.
 */
export function estimateSeconds(parsed: ParsedCommand, patterns: readonly SlowPattern[]): number {
  return parsed.ok ? estimateSlowSeconds(parsed.commands, patterns) : 0;
}
