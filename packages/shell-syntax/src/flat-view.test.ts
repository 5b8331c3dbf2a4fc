// Invariant: the flat view (commands, operators, redirects, flags, direct) is derived from the typed tree alone, so it reads a command exactly as the tree does — as bash does.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadShellParser, type ParsedCommand, type ShellParser, type SyntaxFlags } from './index.js';

let parser: ShellParser;
beforeAll(async () => {
  parser = await loadShellParser();
});

const parse = (source: string): ParsedCommand => {
  const parsed = parser.parse(source);
  expect(parsed.ok, parsed.error).toBe(true);
  return parsed;
};
const on = (parsed: ParsedCommand): (keyof SyntaxFlags)[] =>
  Object.entries(parsed.flags)
    .filter(([, v]) => v)
    .map(([k]) => k as keyof SyntaxFlags);

describe('here-document continuations', () => {
  it('`cat <<EOF | sh`: cat is stage 0 and sh stage 1 of one pipeline', () => {
    const r = parse('cat <<EOF | sh\nid\nEOF');
    expect(r.commands.map((c) => [c.name, c.pipeline?.stage])).toEqual([
      ['cat', 0],
      ['sh', 1],
    ]);
    expect(r.operators).toEqual(['|']);
  });

  it('`cat <<EOF && rm x` chains', () => {
    const r = parse('cat <<EOF && rm x\nhi\nEOF');
    expect(r.operators).toEqual(['&&']);
    expect(r.flags.chaining).toBe(true);
    expect(r.commands.map((c) => c.words)).toEqual([['cat'], ['rm', 'x']]);
  });

  it('`cat <<EOF file` gives cat its argument', () => {
    expect(parse('cat <<EOF file1 file2\nhi\nEOF').commands[0]!.words).toEqual(['cat', 'file1', 'file2']);
  });

  it('a substitution in an unquoted body is a nested command of the stage it feeds', () => {
    const r = parse('cat <<EOF | wc -l\n$(whoami)\nEOF');
    expect(r.commands.find((c) => c.name === 'whoami')).toMatchObject({
      nested: true,
      inSubstitution: true,
      pipeline: { stage: 0 },
    });
  });
});

describe('operators', () => {
  it('include the separators inside substitutions, and `&` there is background', () => {
    const r = parse('echo $(a; b) $(c & d) <(e; f)');
    expect(r.operators).toEqual([';', '&', ';']);
    expect(on(r)).toEqual(expect.arrayContaining(['background', 'chaining', 'commandSubstitution']));
  });

  it('a `|` between case patterns is no pipeline', () => {
    const r = parse('case $x in a|b) ls;; esac');
    expect(r.operators).toEqual([]);
    expect(r.flags.pipeline).toBe(false);
  });

  it('a pipeline binds tighter than && even after a redirect', () => {
    const r = parse('a && b 2>&1 | c');
    expect(r.commands.map((c) => [c.name, c.pipeline?.stage])).toEqual([
      ['a', undefined],
      ['b', 0],
      ['c', 1],
    ]);
    expect(r.operators).toEqual(['&&', '|']);
  });
});

describe('commands', () => {
  it('`time ( … )` is the timed compound: its commands, nested', () => {
    expect(parse('time ( ls )').commands.map((c) => [c.name, c.nested])).toEqual([['ls', true]]);
  });

  it('`for ((…))` and `(( … ))` are arithmetic, with no assignment commands', () => {
    const loop = parse('for ((i=0; i<3; i++)); do echo $i; done');
    expect(loop.commands.map((c) => c.name)).toEqual(['echo']);
    expect(on(loop)).toEqual(expect.arrayContaining(['arithmetic', 'controlFlow']));
    expect(loop.flags.assignment).toBe(false);
    const arith = parse('(( x = $(id) + 1 ))');
    expect(on(arith)).toEqual(expect.arrayContaining(['arithmetic', 'commandSubstitution']));
    expect(arith.flags.braceGroup).toBe(false);
    expect(arith.commands.map((c) => c.name)).toEqual(['id']);
  });

  it('a command text includes its redirections', () => {
    expect(parse('echo hi > f').commands[0]).toMatchObject({ text: 'echo hi > f', start: 0, end: 11 });
  });

  it('`> f` alone is a command of no words that writes f', () => {
    const r = parse('> f');
    expect(r.commands).toMatchObject([{ words: [], redirects: [{ operator: '>', target: 'f' }] }]);
    expect(r.direct).toBeUndefined();
  });

  it('a redirect after a negated command is the command’s', () => {
    expect(parse('! a < in').commands[0]!.redirects).toEqual([
      { operator: '<', target: 'in', targetLiteral: true },
    ]);
  });

  it('lists every redirect in source order', () => {
    const r = parse('{ ( cat <<EOF\n`id`\nEOF\n); } 2>&1');
    expect(r.redirects.map((x) => x.operator)).toEqual(['<<', '>&']);
  });
});

describe('words', () => {
  it.each([
    ['echo ~\\x', ['echo', '~x']],
    ['echo nested$', ['echo', 'nested$']],
    ['echo $', ['echo', '$']],
    ['echo $ x', ['echo', '$', 'x']],
  ])('%j runs directly as %j (bash reads it so)', (source, argv) => {
    expect(parse(source).direct).toEqual({ argv });
  });

  it("`$'…'` ends at a NUL escape, as bash's C strings do", () => {
    expect(parse("echo $'a\\0b'c").commands[0]!.words).toEqual(['echo', 'ac']);
  });

  it('`$"…"` is not literal (a catalog may translate it)', () => {
    const r = parse('echo $"x"');
    expect(r.commands[0]).toMatchObject({
      words: ['echo', '$"x"'],
      literal: [true, false],
      rawWords: ['echo', '$"x"'],
    });
    expect(r.flags.localeString).toBe(true);
  });

  it('`~` after the = of an assignment-like argument expands, as bash does', () => {
    const r = parse('dd if=x of=~/y');
    expect(r.commands[0]!.literal).toEqual([true, true, false]);
    expect(r.flags.tilde).toBe(true);
  });

  it('a for loop’s values glob; case patterns and test operands do not', () => {
    expect(parse('for f in *.ts; do :; done').flags.glob).toBe(true);
    expect(parse('case $x in *.ts) :;; esac').flags.glob).toBe(false);
    expect(parse('[[ $x == *.ts ]]').flags.glob).toBe(false);
  });

  it('declaration arguments without a value are literal words', () => {
    expect(parse('export A=1 B').commands[0]).toMatchObject({
      words: ['export', 'A=1', 'B'],
      literal: [true, true, true],
    });
    expect(parse('declare a[1]=x').commands[0]!.literal).toEqual([true, false]);
  });
});
