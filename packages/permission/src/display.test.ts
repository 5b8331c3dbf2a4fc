// Invariant: escapeHidden escapes every character a human cannot see or tell apart as `\u{…}` and
// leaves the rest as it is, whatever the text's size (a 1 MB command is judged, and shown clipped).
import { describe, expect, it } from 'vitest';
import { escapeHidden, hasHidden } from './display.js';

/** One code point at a time, as the ranges in display.ts say (written out again, independently). */
function reference(text: string): string {
  const hidden = (c: number) =>
    c <= 0x08 ||
    (c >= 0x0b && c <= 0x1f) ||
    (c >= 0x7f && c <= 0x9f) ||
    c === 0xa0 ||
    c === 0xad ||
    c === 0x34f ||
    (c >= 0x370 && c <= 0x52f) ||
    c === 0x61c ||
    c === 0x115f ||
    c === 0x1160 ||
    c === 0x17b4 ||
    c === 0x17b5 ||
    (c >= 0x180b && c <= 0x180e) ||
    (c >= 0x1f00 && c <= 0x1fff) ||
    (c >= 0x2000 && c <= 0x200f) ||
    (c >= 0x2028 && c <= 0x202f) ||
    (c >= 0x205f && c <= 0x206f) ||
    c === 0x3000 ||
    c === 0x3164 ||
    (c >= 0xfe00 && c <= 0xfe0f) ||
    c === 0xfeff ||
    (c >= 0xff01 && c <= 0xff5e) ||
    c === 0xffa0 ||
    (c >= 0xfff0 && c <= 0xfffb) ||
    (c >= 0xe0000 && c <= 0xe007f) ||
    (c >= 0xe0100 && c <= 0xe01ef);
  let out = '';
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    out += hidden(c) ? `\\u{${c.toString(16).toUpperCase().padStart(4, '0')}}` : ch;
  }
  return out;
}

describe('escapeHidden', () => {
  it('escapes what the reference escapes, in random mixes of visible, hidden and lookalike characters', () => {
    const pool = [
      'a',
      ' ',
      '\n',
      '\t',
      '~',
      '\u0000',
      '\u001b',
      '\u007f',
      '\u200b',
      '\u202e',
      'е',
      'Ω',
      'é',
      '😀',
      '\u{e0041}',
      '\ud800',
      '\udc00',
      'Ａ',
      '\ufeff',
      '中',
      '\u00a0',
    ];
    let seed = 42;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let n = 0; n < 3000; n++) {
      let text = '';
      for (let i = Math.floor(next() * 40); i > 0; i--) text += pool[Math.floor(next() * pool.length)];
      expect(escapeHidden(text), JSON.stringify(text)).toBe(reference(text));
      expect(hasHidden(text)).toBe(reference(text) !== text);
    }
  });

  it('returns a long command with nothing hidden as it is, and escapes one hidden character at its end', () => {
    const visible = `echo ${'x'.repeat(1 << 20)}`;
    expect(escapeHidden(visible)).toBe(visible);
    expect(escapeHidden(`${visible}\u202e`)).toBe(`${visible}\\u{202E}`);
    expect(escapeHidden(`\u0007${visible}`)).toBe(`\\u{0007}${visible}`);
  });

  it('clips past maxChars and says how much is not shown', () => {
    expect(escapeHidden('abc\u200bdef', 4)).toBe('abc\\u{200B}… (3 more characters not shown)');
  });
});
