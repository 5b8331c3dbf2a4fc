import type { QuoteContext } from './shell-context.js';

const SAFE_WORD = /^[A-Za-z0-9_./:=@%+,-]+$/;

/** A POSIX-shell literal for `value` outside quotes: bare when it is a plain word, else single-quoted. */
export function quoteWord(value: string): string {
  if (SAFE_WORD.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * The text to put at a position of the given quote context so the shell reads `value` literally:
 * what the permission gate and a human are shown for an argument.
 */
export function quoteForContext(value: string, context: QuoteContext): string {
  switch (context) {
    case 'unquoted':
      return value === '' ? "''" : quoteWord(value);
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
