import { shellQuote } from '@conch/shell-syntax';
import type { QuoteContext } from './shell-context.js';

/** A shell literal for `value` outside quotes: the one quoting function of @conch/shell-syntax. */
export const quoteWord = shellQuote;

/**
 * The text to put at a position of the given quote context so the shell reads `value` literally:
 * what the permission gate and a human are shown for an argument.
 */
export function quoteForContext(value: string, context: QuoteContext): string {
  switch (context) {
    case 'unquoted':
      return quoteWord(value);
    case 'double':
      return value.replace(/[\\$`"]/g, (c) => `\\${c}`);
    case 'single':
      return value.replaceAll("'", `'\\''`);
  }
}

/** The text to put at a position of the given quote context to expand environment variable `name` as one word. */
export function variableForContext(name: string, context: QuoteContext): string {
  switch (context) {
    case 'unquoted':
      return `"\${${name}}"`;
    case 'double':
      return `\${${name}}`;
    case 'single':
      return `'"\${${name}}"'`;
  }
}
