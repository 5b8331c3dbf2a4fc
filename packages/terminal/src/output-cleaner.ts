/**
 * Output cleaning for the model: a PTY transcript becomes the text a person would read on the
 * screen. ANSI/OSC sequences are stripped, `\r` rewrites (progress bars) and backspaces are applied
 * the way a terminal applies them, and very long lines are capped.
 */
import { stripAnsi } from '@conch/process';

/* eslint-disable no-control-regex -- terminal control characters are the point */
// Control characters other than \t \n \r \b that mean nothing on a page (BEL, NUL, SO/SI, ...).
const OTHER_CONTROLS = /[\u0000-\u0007\u000b\u000c\u000e-\u001a\u001c-\u001f\u007f]/g;
/* eslint-enable no-control-regex */

export { stripAnsi };

/**
 * Applies `\r` and `\b` within one line the way a terminal does: `\r` returns the cursor to
 * column 0 and later text overwrites, `\b` moves the cursor one column left.
 */
export function applyLineEdits(line: string): string {
  if (!line.includes('\r') && !line.includes('\b')) return line;
  // Fast path for progress bars: only \r, each rewrite as long as the previous one.
  const cells: string[] = [];
  let cursor = 0;
  for (const ch of line) {
    if (ch === '\r') {
      cursor = 0;
    } else if (ch === '\b') {
      if (cursor > 0) cursor -= 1;
    } else {
      cells[cursor] = ch;
      cursor += 1;
    }
  }
  return cells.join('');
}

export interface CleanOptions {
  /** Lines longer than this are cut with a marker naming the omitted length. */
  maxLineChars: number;
}

export interface CleanResult {
  text: string;
  /** The text with every line whole (used for the spill file when lines were cut). */
  full: string;
  /** Whether a line was cut. */
  linesCut: boolean;
}

/** Cleans raw PTY output for a model: ANSI stripped, `\r`/`\b` applied, long lines capped. */
export function cleanOutput(raw: string, options: CleanOptions): CleanResult {
  let text = stripAnsi(raw);
  text = text.replace(/\r+\n/g, '\n');
  text = text.replace(OTHER_CONTROLS, '');
  const lines = text.split('\n').map(applyLineEdits);
  const full = lines.join('\n');
  let linesCut = false;
  const capped = lines.map((line) => {
    if (line.length <= options.maxLineChars) return line;
    linesCut = true;
    return `${line.slice(0, options.maxLineChars)}… [line cut: ${line.length - options.maxLineChars} more chars]`;
  });
  return { text: linesCut ? capped.join('\n') : full, full, linesCut };
}

/** The last non-empty line of a text, as shown on screen (for UIs). */
export function lastLine(text: string): string {
  const lines = text.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (line) return line;
  }
  return '';
}

/**
 * Shortens a cleaned text to `maxChars`: the head and the tail are kept (errors are usually at
 * the end) around a marker naming what was omitted and where the whole text is.
 */
export function capTotal(text: string, maxChars: number, fullPath: string | undefined): string {
  if (text.length <= maxChars) return text;
  const marker = (omitted: number) =>
    `\n… [${omitted} chars omitted of ${text.length}; full output: ${fullPath ?? '(not saved)'}] …\n`;
  const budget = Math.max(0, maxChars - marker(text.length).length);
  const head = Math.floor(budget / 4);
  const tail = budget - head;
  const omitted = text.length - head - tail;
  return `${text.slice(0, head)}${marker(omitted)}${tail > 0 ? text.slice(text.length - tail) : ''}`;
}
