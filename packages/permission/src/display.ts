import type { PermissionRequest } from '@conch/core';
import { shellQuote } from '@conch/shell-syntax';

// Characters a human cannot see or tell apart: control and format characters, BiDi controls,
// odd spaces, variation selectors, tag characters, and letters from scripts that look like Latin
// (Cyrillic, Greek, fullwidth forms). Kept as code-point ranges so no regex hides them either.
const HIDDEN_RANGES: readonly [number, number][] = [
  [0x00, 0x08],
  [0x0b, 0x1f],
  [0x7f, 0x9f],
  [0xa0, 0xa0],
  [0xad, 0xad],
  [0x34f, 0x34f],
  [0x370, 0x3ff],
  [0x400, 0x52f],
  [0x61c, 0x61c],
  [0x115f, 0x1160],
  [0x17b4, 0x17b5],
  [0x180b, 0x180e],
  [0x1f00, 0x1fff],
  [0x2000, 0x200f],
  [0x2028, 0x202f],
  [0x205f, 0x206f],
  [0x3000, 0x3000],
  [0x3164, 0x3164],
  [0xfe00, 0xfe0f],
  [0xfeff, 0xfeff],
  [0xff01, 0xff5e],
  [0xffa0, 0xffa0],
  [0xfff0, 0xfffb],
  [0xe0000, 0xe007f],
  [0xe0100, 0xe01ef],
];

/** The first character that could be hidden (anything but tab, newline and printable ASCII). */
const MAYBE_HIDDEN = /[^\t\n\x20-\x7e]/;

function isHidden(code: number): boolean {
  if (code >= 0x20 && code < 0x7f) return false;
  for (const [from, to] of HIDDEN_RANGES) if (code >= from && code <= to) return true;
  return false;
}

/** The command with hidden and lookalike characters escaped as `\u{...}`, so a human sees what runs. */
export function escapeHidden(text: string, maxChars = Infinity): string {
  if (text.length > maxChars) {
    return `${escapeHidden(text.slice(0, maxChars))}… (${text.length - maxChars} more characters not shown)`;
  }
  // Copies runs of visible text whole (a 1 MB command built one character at a time cost ~200 ms),
  // and the text itself when nothing is hidden.
  const first = text.search(MAYBE_HIDDEN);
  if (first < 0) return text;
  let out = '';
  let from = 0;
  for (let i = first; i < text.length;) {
    const code = text.codePointAt(i)!;
    const width = code > 0xffff ? 2 : 1;
    if (isHidden(code)) {
      out += `${text.slice(from, i)}\\u{${code.toString(16).toUpperCase().padStart(4, '0')}}`;
      from = i + width;
    }
    i += width;
  }
  return from === 0 ? text : out + text.slice(from);
}

/** Whether the text contains characters escapeHidden would escape. */
export function hasHidden(text: string): boolean {
  for (const ch of text) if (isHidden(ch.codePointAt(0)!)) return true;
  return false;
}

/**
 * The longest command a human is shown: a prompt shows the whole command or is not made (the gate
 * refuses a longer command it would ask about; an approver refuses a display that is not whole).
 */
export const MAX_DISPLAY_CHARS = 20_000;

/** The line a command request runs (extra `args` appended shell-quoted), or an action's summary. */
export function requestLine(request: PermissionRequest): string {
  if (request.kind === 'action') return request.summary;
  if (request.plan) return request.plan.line;
  const line = request.args?.length
    ? `${request.command} ${request.args.map(shellQuote).join(' ')}`
    : request.command;
  const exports = envExports(request.env, Number.POSITIVE_INFINITY);
  return exports.length === 1 ? `${exports[0]}\n${line}` : line;
}

/** Bytes of `export` line judged together with the command; past it, in pieces (see envExports). */
export const ENV_INLINE_BYTES = 32 * 1024;

/**
 * A command's per-call variables as the `export` lines that set them, each at most `maxBytes` long
 * (one line per variable past it). One line when they fit `ENV_INLINE_BYTES`: the command is then
 * judged after it (its `$NAME`s known); more lines are judged each on its own.
 */
export function envExports(
  env: Readonly<Record<string, string>> | undefined,
  maxBytes = ENV_INLINE_BYTES,
): string[] {
  const entries = Object.entries(env ?? {});
  if (entries.length === 0) return [];
  const words = entries.map(([name, value]) => `${name}=${shellQuote(value)}`);
  const all = `export ${words.join(' ')}`;
  if (maxBytes === Number.POSITIVE_INFINITY) {
    return Buffer.byteLength(all) <= ENV_INLINE_BYTES ? [all] : [];
  }
  if (Buffer.byteLength(all) <= maxBytes) return [all];
  const lines: string[] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const word of words) {
    const size = Buffer.byteLength(word) + 1;
    if (current.length > 0 && bytes + size > maxBytes) {
      lines.push(`export ${current.join(' ')}`);
      current = [];
      bytes = 0;
    }
    current.push(word);
    bytes += size;
  }
  if (current.length > 0) lines.push(`export ${current.join(' ')}`);
  return lines;
}

/**
 * What a human must be shown for a request: the whole command (or action), hidden and lookalike
 * characters escaped. An approver can compare an `ApprovalRequest.display` with it to refuse a
 * prompt that does not show everything that will run.
 */
export function approvalDisplay(request: PermissionRequest): string {
  return escapeHidden(requestLine(request));
}
