// Cleaned output reads like the screen: no escape codes, \r and \b applied, long lines cut, totals capped.
import { describe, expect, it } from 'vitest';
import { applyLineEdits } from '@conch/process';
import { capTotal, cleanOutput, lastLine } from './output-cleaner.js';

describe('cleanOutput', () => {
  it('strips colours, OSC titles and hyperlinks', () => {
    const raw =
      '\u001b[1;31merror\u001b[0m: \u001b]0;title\u0007bad \u001b]8;;http://x\u001b\\link\u001b]8;;\u001b\\\r\n';
    expect(cleanOutput(raw, { maxLineChars: 500 }).text).toBe('error: bad link\n');
  });

  it('collapses \\r progress bars to their last state and applies backspaces', () => {
    expect(cleanOutput('10%\r50%\r100%\r\ndone\r\n', { maxLineChars: 500 }).text).toBe('100%\ndone\n');
    expect(applyLineEdits('downloading 9/10\rdownloading 10/10')).toBe('downloading 10/10');
    expect(applyLineEdits('long status\rshort')).toBe('shortstatus');
    expect(applyLineEdits('abc\b\bX')).toBe('aXc');
    expect(applyLineEdits('\b\bx')).toBe('x');
  });

  it('drops other control characters', () => {
    expect(cleanOutput('a\u0007b\u0000c\n', { maxLineChars: 500 }).text).toBe('abc\n');
  });

  it('cuts long lines and keeps them whole in `full`', () => {
    const line = 'y'.repeat(1200);
    const result = cleanOutput(`${line}\nshort\n`, { maxLineChars: 500 });
    expect(result.linesCut).toBe(true);
    expect(result.text).toBe(`${'y'.repeat(500)}… [line cut: 700 more chars]\nshort\n`);
    expect(result.full).toBe(`${line}\nshort\n`);
  });
});

describe('capTotal', () => {
  it('keeps head and tail around a marker naming the file', () => {
    const text = Array.from({ length: 2000 }, (_, i) => `line ${i}`).join('\n');
    const capped = capTotal(text, 1000, '/tmp/full.txt');
    expect(capped.length).toBeLessThanOrEqual(1000);
    expect(capped.startsWith('line 0\nline 1\n')).toBe(true);
    expect(capped.endsWith('line 1999')).toBe(true);
    expect(capped).toMatch(/chars omitted of \d+; full output: \/tmp\/full\.txt/);
  });

  it('leaves short text alone', () => {
    expect(capTotal('short', 1000, undefined)).toBe('short');
  });
});

describe('lastLine', () => {
  it('is the last non-empty line', () => {
    expect(lastLine('a\nserving on :8000\n\n')).toBe('serving on :8000');
    expect(lastLine('')).toBe('');
  });
});
