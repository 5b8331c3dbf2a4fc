// Invariant: text meant for a model carries no terminal control sequences, and plain text is untouched.
import { describe, expect, it } from 'vitest';
import { applyLineEdits, cleanForModel, stripAnsi } from './strip-ansi.js';

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

// One renderer for every tool: what a terminal finally shows on each line.
describe('applyLineEdits', () => {
  it.each([
    ['100%\rok', 'ok0%'],
    ['downloading 9/10\rdownloading 10/10', 'downloading 10/10'],
    ['long status\rshort', 'shortstatus'],
    ['long status\r\u001b[Kshort', 'short'],
    ['long status\r\u001b[0Kshort', 'short'],
    ['long status\u001b[2K\rshort', 'short'],
    ['abcdef\r\u001b[3G\u001b[1KX', '  Xdef'],
    ['\u001b[1G50%\u001b[1G\u001b[0K100%', '100%'],
    ['abc\b\bX', 'aXc'],
    ['\b\bx', 'x'],
    ['\u001b[32mgreen\u001b[0m\rGR', 'GReen'],
    ['a\u001b[5Gb', 'a   b'],
    ['plain', 'plain'],
  ])('%j -> %j', (line, screen) => {
    expect(applyLineEdits(line)).toBe(screen);
  });
});

describe('cleanForModel renders every line and drops stray controls', () => {
  it.each([
    ['10%\r50%\r100%\ndone\r\n', '100%\ndone\n'],
    ['a\u0007b\u0000c\n', 'abc\n'],
    ['tab\tkept\r\r\nnext', 'tab\tkept\nnext'],
    ['one\r\ntwo\rTW\n', 'one\nTWo\n'],
    ['\u001b]0;title\u0007after\n', 'after\n'],
    ['\u001b]8;;http://x\u001b\\link\u001b]8;;\u001b\\ ok\r\n', 'link ok\n'],
    ['\u001b]0;multi\nline title\u0007shown\n', 'shown\n'],
  ])('%j -> %j', (text, clean) => {
    expect(cleanForModel(text)).toBe(clean);
  });
});
