// Invariant: the process panel's last line is plain text: every terminal control sequence a real program prints (CSI with parameters, 256 colours, cursor moves, OSC 8 hyperlinks ended by BEL or ST) is removed, by @conch/process's stripAnsi.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { lastNonEmptyLine } from './processes.js';

/** What `printf` (a real process) writes for a format with `\033`-style escapes. */
const printed = (format: string) => execFileSync('printf', [format], { encoding: 'utf8' });

describe('lastNonEmptyLine', () => {
  it.each([
    [
      'CSI with parameters (bold red, reset)',
      String.raw`\033[1;31mFAIL\033[0m src/a.test.ts`,
      'FAIL src/a.test.ts',
    ],
    [
      '256 colours and truecolour',
      String.raw`\033[38;5;208mwarn\033[39m \033[48;2;10;20;30mbg\033[49m`,
      'warn bg',
    ],
    ['cursor movement and erase', String.raw`\033[2K\033[1G\033[3Adone\033[?25h`, 'done'],
    [
      'an OSC 8 hyperlink ended by BEL',
      String.raw`see \033]8;;https://example.com/docs\007the docs\033]8;;\007 now`,
      'see the docs now',
    ],
    [
      'an OSC 8 hyperlink ended by ST',
      String.raw`see \033]8;id=1;https://example.com\033\\the docs\033]8;;\033\\ now`,
      'see the docs now',
    ],
    ['a window title, a charset designation', String.raw`\033]0;build\007\033(Bbuilt in 3s`, 'built in 3s'],
  ])('%s', (_what, line, expected) => {
    const output = printed(`first line\\n${line}\\n\\n`);
    expect(output).toContain('\u001b');
    expect(lastNonEmptyLine(output)).toBe(expected);
  });

  it('a line that is only control sequences does not hide the line before it', () => {
    expect(lastNonEmptyLine(printed(String.raw`compiled\n\033[2K\033]8;;\007\033[0m\n`))).toBe('compiled');
  });
});
