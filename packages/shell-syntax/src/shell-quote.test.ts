// Invariant: shellQuote(word) is read back as exactly `word` — one literal argument — by real bash, dash and zsh (interactive ones too) and by our own parser; shellJoin(argv) runs exactly argv.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { literalValue, loadShellParser, shellJoin, shellQuote, type ShellParser } from './index.js';
import { runInteractive, runShell, splitNul, type ShellName } from './test-support/run-shell.js';

/** 200+ words: every ASCII character alone and inside a word, and the troublemakers. */
const WORDS: string[] = (() => {
  const out = new Set<string>(['']);
  for (let c = 1; c < 128; c++) out.add(String.fromCharCode(c));
  for (const ch of ` \t\n\r!"#$%&'()*+,-./:;<=>?@[\\]^\`{|}~\x7f`) out.add(`a${ch}b`);
  for (const w of [
    '-',
    '--',
    '-rf',
    '--opt=value',
    '-n',
    '-e',
    '-E',
    '=',
    '=ls',
    '==',
    'a=b',
    'A=1',
    'PATH=/tmp',
    '%1',
    '%',
    '~',
    '~/x',
    '~root',
    'x~',
    'a:~/b',
    '!',
    '!!',
    '!$',
    '!-1',
    '!#',
    'a!b',
    '^a^b',
    "'",
    "''",
    "'a'",
    "\\'",
    "a'b'c",
    '\\',
    '\\\\',
    'a\\',
    '\\n',
    '"',
    '""',
    '"a"',
    '$',
    '$HOME',
    '${x}',
    '${x:-y}',
    '$(id)',
    '`id`',
    '$((1+1))',
    '$[1]',
    "$'\\n'",
    '$"x"',
    '*',
    '?',
    '[a]',
    '[!a]',
    '{a,b}',
    '{1..3}',
    'a b',
    ' ',
    '  ',
    '\t',
    '\n',
    'a\nb',
    '\n\n',
    '\r\n',
    'a\\\nb',
    '#x',
    'x#',
    '&',
    ';',
    ';;',
    '|',
    '||',
    '&&',
    '<',
    '>',
    '>>',
    '(',
    ')',
    '<(x)',
    '>(x)',
    '@(a|b)',
    '*(a)',
    'é',
    'naïve',
    '日本語',
    '😀',
    'e\u0301',
    '\u202e',
    '\u00a0',
    '\u2028',
    '\u0085',
    '\x1b[31m',
    'ÿ',
    '\x01\x02',
    'x'.repeat(1000),
    "'".repeat(5),
    'if',
    'then',
    'time',
    'function',
    'declare',
    'export',
    '.',
    '..',
    '/',
    ':',
    '@',
    '+',
    ',',
    'a,b',
    'user@host:/path',
    'key=value=x',
    '100%',
    'a+b',
    'C:/dir',
    '-=',
    '-~',
    '--\n',
    'end\\',
  ])
    out.add(w);
  return [...out];
})();

const SHELLS: ShellName[] = ['bash', 'sh', 'zsh'];

let parser: ShellParser;
beforeAll(async () => {
  parser = await loadShellParser();
});

describe('shellQuote', () => {
  it('has 200+ sample words', () => {
    expect(WORDS.length).toBeGreaterThan(200);
  });

  it.each([
    ['ls', 'ls'],
    ['-rf', '-rf'],
    ['--opt=a,b', '--opt=a,b'],
    ['user@host:/p/a_b.c+%', 'user@host:/p/a_b.c+%'],
    ['', "''"],
    ['a b', "'a b'"],
    ["it's", "'it'\\''s'"],
    ["'", "''\\'''"],
    ['=ls', "'=ls'"],
    ['~', "'~'"],
    ['$HOME', "'$HOME'"],
    ['a\nb', "'a\nb'"],
    ['!', "'!'"],
    ['*', "'*'"],
    ['é', "'é'"],
  ])('quotes %j as %s', (word, quoted) => {
    expect(shellQuote(word)).toBe(quoted);
  });

  it('refuses what no shell argument can hold, with a TypeError that says why', () => {
    expect(() => shellQuote('a\0b')).toThrow(TypeError);
    expect(() => shellQuote('a\0b')).toThrow(/NUL/);
    expect(() => shellQuote('a\ud800b')).toThrow(/surrogate/);
    expect(() => shellQuote('\udc00')).toThrow(TypeError);
    expect(() => shellJoin(['echo', '\0'])).toThrow(TypeError);
    expect(() => shellQuote(42 as unknown as string)).toThrow(/expected a string/);
    // A surrogate pair is one character, not a lone surrogate.
    expect(shellQuote('\ud83d\ude00')).toBe("'😀'");
  });

  it.each(SHELLS)('%s reads every quoted word back as itself', (shell) => {
    const out = runShell(shell, `printf '%s\\0' ${WORDS.map(shellQuote).join(' ')}`);
    expect(splitNul(out)).toEqual(WORDS);
  });

  it.each(SHELLS)('%s runs shellJoin(argv) as exactly argv', (shell) => {
    const out = runShell(shell, shellJoin(['printf', '%s\\0', ...WORDS]));
    expect(splitNul(out)).toEqual(WORDS);
  });

  it.each<ShellName>(['bash', 'zsh'])(
    'interactive %s (history expansion on) reads them back too',
    (shell) => {
      const enable = shell === 'bash' ? 'set -o histexpand' : 'setopt BANG_HIST';
      // Control characters are left out: bash's line editor acts on them (Ctrl-A, Tab) before any
      // quoting is read, as it would for a person typing them.
      const typeable = WORDS.filter((w) => ![...w].some((ch) => ch !== '\n' && (ch < ' ' || ch === '\x7f')));
      // The control line proves history expansion is live: its `"!!"` becomes the line before.
      const out = runInteractive(
        shell,
        `${enable}\nprintf '%s\\0' control\nprintf '%s\\0' "!!"\nprintf '%s\\0' ${typeable.map(shellQuote).join(' ')}\n`,
      );
      const words = splitNul(out);
      expect(words.slice(0, 2)).toEqual(['control', "printf '%s\\0' control"]);
      expect(words.slice(2)).toEqual(typeable);
      expect(typeable.length).toBeGreaterThan(150);
    },
  );

  it('our parser reads every quoted word as one literal word with that value', () => {
    for (const word of WORDS) {
      const parsed = parser.parse(`printf %s ${shellQuote(word)}`);
      expect(parsed.ok, JSON.stringify(word)).toBe(true);
      expect(parsed.syntax!.unknowns, JSON.stringify(word)).toEqual([]);
      const [item, ...rest] = parsed.syntax!.body.items;
      expect(rest).toEqual([]);
      const st = item!.statement;
      expect(st.kind).toBe('simple');
      if (st.kind !== 'simple') return;
      expect(st.words).toHaveLength(3);
      expect(literalValue(st.words[2]!), JSON.stringify(word)).toBe(word);
    }
  });
});

describe('shellJoin', () => {
  let bin: string;
  beforeAll(() => {
    bin = mkdtempSync(join(tmpdir(), 'conch-shell-join-'));
  });
  afterAll(() => rmSync(bin, { recursive: true, force: true }));

  it('joins quoted words with spaces', () => {
    expect(shellJoin(['git', 'commit', '-m', "it's done"])).toBe("git commit -m 'it'\\''s done'");
    expect(shellJoin([])).toBe('');
  });

  // Programs named like reserved words and assignments: argv[0] is a program to run, so each
  // shell must run the file, not read the word as syntax. (Not here: names bash reads as a job
  // spec however quoted, `%1`, and zsh's precommand modifiers `noglob` and `-`; see shellJoin.)
  const NAMES = [
    'time',
    'if',
    'then',
    'function',
    'coproc',
    'select',
    'foreach',
    'repeat',
    'nocorrect',
    'A=1',
    'a+=b',
  ];

  it.each(SHELLS)('%s runs a program whose name is a reserved word or an assignment', (shell) => {
    for (const name of NAMES) {
      writeFileSync(join(bin, name), `#!/bin/sh\nprintf '%s\\0' ran "$@"\n`);
      chmodSync(join(bin, name), 0o755);
    }
    const script = NAMES.map((name) => shellJoin([name, name, 'x y'])).join('\n');
    const out = runShell(shell, `PATH=${shellQuote(bin)}:"$PATH"\n${script}`);
    expect(splitNul(out)).toEqual(NAMES.flatMap((name) => ['ran', name, 'x y']));
  });

  it('our parser reads shellJoin(argv) as one command with exactly argv', () => {
    for (const argv of [
      ['printf', ...WORDS.slice(0, 60)],
      ['A=1', 'x'],
      ['time', '-p'],
      ['%1'],
      ['=ls', '~'],
    ]) {
      const parsed = parser.parse(shellJoin(argv));
      expect(parsed.ok).toBe(true);
      const st = parsed.syntax!.body.items[0]!.statement;
      expect(parsed.syntax!.body.items).toHaveLength(1);
      expect(st.kind).toBe('simple');
      if (st.kind !== 'simple') return;
      expect(st.assignments).toEqual([]);
      expect(st.words.map(literalValue)).toEqual(argv);
    }
  });
});
