/**
 * Output cleaning for the model: a PTY transcript becomes the text a person would read on the
 * screen. ANSI/OSC sequences are stripped, `\r` rewrites (progress bars) and backspaces are applied
 * the way a terminal applies them, and very long lines are capped.
 */
// The one renderer of control sequences, `\r` and `\b`, shared with cli_based_tool's captures.
import { cleanForModel } from '@conch/process';

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
  const lines = cleanForModel(raw).split('\n');
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
export function capTotal(
  text: string,
  maxChars: number,
  fullPath: string | undefined,
  headOnly?: number,
): string {
  if (text.length <= maxChars) return text;
  if (headOnly !== undefined) return capHead(text, maxChars, headOnly, fullPath);
  const marker = (omitted: number) =>
    `\n… [${omitted} chars omitted of ${text.length}; full output: ${fullPath ?? '(not saved)'}] …\n`;
  const budget = Math.max(0, maxChars - marker(text.length).length);
  const head = Math.floor(budget / 4);
  const tail = budget - head;
  const omitted = text.length - head - tail;
  return `${text.slice(0, head)}${marker(omitted)}${tail > 0 ? text.slice(text.length - tail) : ''}`;
}

/**
 * The reference terminal's shape (config `overflowPreviewChars`): the first `preview` characters
 * and a notice naming the whole size and the file, the whole within `maxChars`.
 */
function capHead(text: string, maxChars: number, preview: number, fullPath: string | undefined): string {
  const notice = `\n… [output truncated: ${text.length} chars; full output: ${fullPath ?? '(not saved)'}]\n`;
  const head = Math.max(0, Math.min(preview, maxChars - notice.length));
  return `${text.slice(0, head)}${notice}`;
}
