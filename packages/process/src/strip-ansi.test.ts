// Invariant: text meant for a model carries no terminal control sequences, and plain text is untouched.
import { describe, expect, it } from 'vitest';
import { cleanForModel, stripAnsi } from './strip-ansi.js';

describe('stripAnsi', () => {
  it.each([
    ['\u001b[31mred\u001b[0m', 'red'],
    ['\u001b[1;38;5;196mbold\u001b[m', 'bold'],
    ['\u001b]0;title\u0007after', 'after'],
    ['\u001b]8;;https://x.y\u001b\\link\u001b]8;;\u001b\\', 'link'],
    ['a\u001b[2Kb\u001b[1Gc', 'abc'],
    ['\u001b(Bplain', 'plain'],
    ['\u001bPq#0;2;0;0;0\u001b\\x', 'x'],
    ['\u009b32mgreen', 'green'],
    ['no escapes here\tok\n', 'no escapes here\tok\n'],
    ['€ ünïcödé', '€ ünïcödé'],
  ])('%j -> %j', (input, expected) => {
    expect(stripAnsi(input)).toBe(expected);
  });

  it('drops an unterminated OSC at the end instead of leaking it', () => {
    expect(stripAnsi('ok\u001b]0;partial')).toBe('ok');
  });
});

describe('cleanForModel', () => {
  it('collapses carriage-return progress lines and CRLF', () => {
    expect(cleanForModel('10%\r50%\r100%\ndone\r\n')).toBe('100%\ndone\n');
  });
});
