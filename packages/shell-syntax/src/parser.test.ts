// Invariant: the parser reads a command the way bash will (words after quote removal, every nested command, every risky construct flagged) and never throws.
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { loadShellParser, type ShellParser, type Syntax, type SyntaxFlags } from './index.js';

let parser: ShellParser;
beforeAll(async () => {
  parser = await loadShellParser();
});

const on = (source: string): (keyof SyntaxFlags)[] =>
  Object.entries(parser.parse(source).flags)
    .filter(([, v]) => v)
    .map(([k]) => k as keyof SyntaxFlags);

describe('loadShellParser', () => {
  it('returns the same cached parser', async () => {
    expect(await loadShellParser()).toBe(parser);
  });
});

describe('recent parses', () => {
  it('a repeated command gets the same deep-frozen result; a change anywhere in it throws', () => {
    for (const source of [
      'git status',
      'ls -la | head -3',
      'for f in *.ts; do wc -l "$f"; done',
      'echo $(',
    ]) {
      const first = parser.parse(source);
      expect(parser.parse(source)).toBe(first);
      expect(Object.isFrozen(first)).toBe(true);
      expect(() => first.commands.push(first.commands[0]!)).toThrow(TypeError);
      expect(() => {
        first.flags.commandSubstitution = !first.flags.commandSubstitution;
      }).toThrow(TypeError);
      if (first.commands[0]) {
        expect(first.commands[0].words.length).toBeGreaterThan(0);
        expect(() => first.commands[0]!.words.pop()).toThrow(TypeError);
      }
      if (first.syntax) expect(Object.isFrozen(first.syntax.body)).toBe(true);
    }
  });

  it('is keyed by the bounds too: the same source under other bounds is parsed under them', () => {
    const source = 'echo ' + 'a'.repeat(100);
    expect(parser.parse(source).ok).toBe(true);
    expect(parser.parse(source, { maxBytes: 50 })).toMatchObject({ ok: false, limit: 'size' });
    expect(parser.parse(source, { budget: 1 })).toMatchObject({ ok: false, limit: 'work' });
    expect(parser.parse(source).ok).toBe(true);
  });

  it('keeps at most 256 sources of up to 2,048 characters, least recently used evicted first', () => {
    const kept = parser.parse('echo kept-0');
    const dropped = parser.parse('echo dropped-0');
    for (let i = 1; i <= 255; i++) {
      parser.parse(`echo filler-${i}`);
      if (i % 50 === 0) expect(parser.parse('echo kept-0')).toBe(kept); // used: moves to the end
    }
    expect(parser.parse('echo kept-0')).toBe(kept);
    expect(parser.parse('echo dropped-0')).not.toBe(dropped);
    expect(parser.parse('echo dropped-0')).toEqual(dropped);
    const long = `echo ${'x'.repeat(2048)}`;
    expect(parser.parse(long)).not.toBe(parser.parse(long));
    expect(Object.isFrozen(parser.parse(long))).toBe(false);
  });

  it('never keeps a parse the wall clock stopped (a busy moment must not decide the next call)', () => {
    const source = 'echo a; ls | wc -l; x=1 && y=2; '.repeat(20) + 'if true; then (; fi';
    let t = 0;
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => (t += 200_000));
    let stopped;
    try {
      stopped = parser.parse(source);
    } finally {
      clock.mockRestore();
    }
    expect(stopped).toMatchObject({ ok: false, limit: 'time' });
    const again = parser.parse(source);
    expect(again.limit).toBeUndefined();
    expect(again.error).toMatch(/^parse error/);
    expect(parser.parse(source)).toBe(again);
  });
});

describe('seed commands', () => {
  it('ls -la is one direct command', () => {
    const r = parser.parse('ls -la');
    expect(r.ok).toBe(true);
    expect(r.needsShell).toBe(false);
    expect(r.direct).toEqual({ argv: ['ls', '-la'] });
    expect(on('ls -la')).toEqual([]);
  });

  it.each([
    [
      "find . -name '*.py' | head -20",
      ['|'],
      [
        ['find', '.', '-name', '*.py'],
        ['head', '-20'],
      ],
    ],
    [
      'npm install && npm test',
      ['&&'],
      [
        ['npm', 'install'],
        ['npm', 'test'],
      ],
    ],
    ["echo 'hello' > output.txt", [], [['echo', 'hello']]],
    [
      "cat file.txt || echo 'not found'",
      ['||'],
      [
        ['cat', 'file.txt'],
        ['echo', 'not found'],
      ],
    ],
    [
      'export FOO=bar; echo $FOO',
      [';'],
      [
        ['export', 'FOO=bar'],
        ['echo', '$FOO'],
      ],
    ],
  ])('%s needs a shell', (source, operators, words) => {
    const r = parser.parse(source);
    expect(r.ok).toBe(true);
    expect(r.needsShell).toBe(true);
    expect(r.direct).toBeUndefined();
    expect(r.operators).toEqual(operators);
    expect(r.commands.map((c) => c.words)).toEqual(words);
  });

  it('records the redirect of echo > output.txt on the command and globally', () => {
    const r = parser.parse("echo 'hello' > output.txt");
    const redirect = { operator: '>', target: 'output.txt', targetLiteral: true };
    expect(r.redirects).toEqual([redirect]);
    expect(r.commands[0]!.redirects).toEqual([redirect]);
  });
});

describe('quote removal', () => {
  it.each([
    ["echo 'a b'", ['echo', 'a b']],
    ['echo "a\\"b"', ['echo', 'a"b']],
    ['\\rm -f x', ['rm', '-f', 'x']],
    ['r"m" -f x', ['rm', '-f', 'x']],
    ["'r'm x", ['rm', 'x']],
    ['echo "a\\$b" "c\\d"', ['echo', 'a$b', 'c\\d']],
    ['echo a\\ b', ['echo', 'a b']],
    ['echo é "ü"', ['echo', 'é', 'ü']],
  ])('%s -> %j', (source, argv) => {
    const r = parser.parse(source);
    expect(r.commands[0]!.words).toEqual(argv);
    expect(r.direct).toEqual({ argv });
  });

  it("decodes $'\\x72m' and flags ANSI-C quoting", () => {
    const r = parser.parse("$'\\x72m' -rf x");
    expect(r.commands[0]!.name).toBe('rm');
    expect(r.flags.ansiCQuoting).toBe(true);
    expect(r.direct).toBeUndefined();
    expect(parser.parse("echo $'a\\tb\\101\\u00e9\\cA'").commands[0]!.words[1]).toBe('a\tbAé\x01');
  });

  it('keeps non-literal parts as source text and marks them', () => {
    const r = parser.parse('echo "$HOME/x" pre$(id)post *.ts');
    expect(r.commands[0]!.words).toEqual(['echo', '"$HOME/x"', 'pre$(id)post', '*.ts']);
    expect(r.commands[0]!.literal).toEqual([true, false, false, false]);
  });

  it('an escaped glob is literal', () => {
    expect(parser.parse('echo \\*').direct).toEqual({ argv: ['echo', '*'] });
    expect(parser.parse("echo '*'").direct).toEqual({ argv: ['echo', '*'] });
  });
});

describe('flags', () => {
  it.each<[string, keyof SyntaxFlags]>([
    ['echo $(id)', 'commandSubstitution'],
    ['echo `id`', 'commandSubstitution'],
    ['diff <(ls) <(ls -a)', 'processSubstitution'],
    ['echo $((1 + 2))', 'arithmetic'],
    ['echo ${x:-y}', 'parameterExpansion'],
    ['echo ${x@P}', 'parameterTransform'],
    ['echo ${!name}', 'parameterTransform'],
    ['echo $HOME', 'variables'],
    ['(cd /tmp && ls)', 'subshell'],
    ['{ ls; }', 'braceGroup'],
    ['cat <<EOF\nhi\nEOF', 'heredoc'],
    ['cat <<< hi', 'herestring'],
    ['sleep 1 &', 'background'],
    ['ls *.ts', 'glob'],
    ['ls file?.txt', 'glob'],
    ['ls [ab].txt', 'glob'],
    ['echo {a,b}', 'braceExpansion'],
    ['echo {1..3}', 'braceExpansion'],
    ['ls ~/x', 'tilde'],
    ['ls | wc -l', 'pipeline'],
    ['ls |& cat', 'pipeline'],
    ['a && b', 'chaining'],
    ['a || b', 'chaining'],
    ['a; b', 'chaining'],
    ['a\nb', 'multipleStatements'],
    ['echo hi > out', 'redirection'],
    ["echo $'x'", 'ansiCQuoting'],
    ['echo $"x"', 'localeString'],
    ['ls \\\n-la', 'lineContinuation'],
    ['ls # note', 'comment'],
    ['f() { ls; }', 'functionDefinition'],
    ['if true; then ls; fi', 'controlFlow'],
    ['for f in a b; do echo $f; done', 'controlFlow'],
    ['while false; do :; done', 'controlFlow'],
    ['case x in x) ls;; esac', 'controlFlow'],
    ['[[ -f x ]]', 'testCommand'],
    ['! ls', 'negation'],
    ['export A=1', 'declaration'],
    ['unset A', 'declaration'],
    ['A=1 ls', 'assignment'],
    ['A=1', 'assignment'],
    ['cd /tmp', 'shellBuiltin'],
    ['command -v node', 'shellBuiltin'],
    ['command cp a b', 'shellBuiltin'],
    ['help cd', 'shellBuiltin'],
    ['times', 'shellBuiltin'],
    ['time pytest -q', 'shellBuiltin'],
    ['compopt -o nospace', 'shellBuiltin'],
    ['echo "open', 'parseError'],
    // MISSING nodes (tree-sitter's error recovery) count as parse errors too.
    ['echo $(ls', 'parseError'],
    ['a &&', 'parseError'],
  ])('%j sets %s', (source, flag) => {
    const r = parser.parse(source);
    expect(r.flags[flag]).toBe(true);
    expect(r.needsShell).toBe(true);
    expect(r.direct).toBeUndefined();
  });
});

describe('commands', () => {
  it('finds commands nested in substitutions, subshells and heredocs, in source order', () => {
    const r = parser.parse('git status $(touch x) && (sudo ls) | cat <(curl y) <<EOF\n$(whoami)\nEOF');
    expect(r.commands.map((c) => c.name)).toEqual(['git', 'touch', 'sudo', 'cat', 'curl', 'whoami']);
    expect(r.commands.map((c) => c.nested)).toEqual([false, true, true, false, true, true]);
    expect(r.commands.find((c) => c.name === 'touch')!.inSubstitution).toBe(true);
    expect(r.commands.find((c) => c.name === 'sudo')!.inSubstitution).toBe(false);
  });

  it('separates assignments from words', () => {
    const r = parser.parse('FOO=1 BAR="a b" rm -rf /');
    expect(r.commands[0]!.assignments).toEqual([
      { name: 'FOO', value: '1', literal: true },
      { name: 'BAR', value: 'a b', literal: true },
    ]);
    expect(r.commands[0]!.words).toEqual(['rm', '-rf', '/']);
    expect(parser.parse('FOO=$(id) ls').commands.map((c) => c.name)).toEqual(['ls', 'id']);
  });

  it('records bare assignments as commands without words', () => {
    const r = parser.parse('a=r;b=m;$a$b');
    expect(r.commands).toHaveLength(3);
    expect(r.commands[0]).toMatchObject({
      words: [],
      assignments: [{ name: 'a', value: 'r', literal: true }],
    });
    expect(r.commands[2]).toMatchObject({ name: '$a$b', literal: [false] });
  });

  it('gives start and end offsets', () => {
    const source = 'ls -la && pwd';
    const r = parser.parse(source);
    expect(r.commands.map((c) => source.slice(c.start, c.end))).toEqual(['ls -la', 'pwd']);
  });

  it('does not parse bash -c strings (callers do)', () => {
    const r = parser.parse("bash -c 'rm -rf x'");
    expect(r.commands).toHaveLength(1);
    expect(r.commands[0]!.words).toEqual(['bash', '-c', 'rm -rf x']);
  });
});

describe('redirects', () => {
  it('reads fd, operator and target', () => {
    const r = parser.parse('cmd 2>&1 >out.txt <in.txt >>log &>all');
    expect(r.redirects).toEqual([
      { operator: '>&', fd: 2, target: '1', targetLiteral: true },
      { operator: '>', target: 'out.txt', targetLiteral: true },
      { operator: '<', target: 'in.txt', targetLiteral: true },
      { operator: '>>', target: 'log', targetLiteral: true },
      { operator: '&>', target: 'all', targetLiteral: true },
    ]);
  });

  it('marks non-literal targets', () => {
    expect(parser.parse('echo x > "$HOME/.bashrc"').redirects[0]).toMatchObject({ targetLiteral: false });
    expect(parser.parse('echo x > ~/.bashrc').redirects[0]).toMatchObject({ targetLiteral: false });
    expect(parser.parse("echo x > '.env'").redirects[0]).toMatchObject({
      target: '.env',
      targetLiteral: true,
    });
  });

  it('records redirects of compound commands', () => {
    const r = parser.parse('{ echo a; echo b; } > out');
    expect(r.redirects).toEqual([{ operator: '>', target: 'out', targetLiteral: true }]);
  });
});

describe('heredocs', () => {
  it('keeps the delimiter and the body', () => {
    const r = parser.parse("cat <<'EOF' > f.txt\nline $x\nEOF");
    expect(r.flags.heredoc).toBe(true);
    expect(r.redirects[0]).toMatchObject({ operator: '<<', target: 'EOF' });
    expect(r.redirects[0]!.heredocBody).toContain('line $x');
    expect(r.redirects[1]).toMatchObject({ operator: '>', target: 'f.txt' });
  });

  it('finds substitutions in an unquoted heredoc body', () => {
    const r = parser.parse('cat <<EOF\n$(rm -rf x)\nEOF');
    expect(r.commands.map((c) => c.name)).toContain('rm');
  });
});

describe('line continuations', () => {
  it('parses the command the shell will see', () => {
    const r = parser.parse('$\\\n(id)');
    expect(r.flags.lineContinuation).toBe(true);
    expect(r.flags.commandSubstitution).toBe(true);
    expect(r.normalizedSource).toBe('$(id)');
    expect(r.commands.map((c) => c.name)).toContain('id');
    expect(parser.parse('r\\\nm -rf x').commands[0]!.name).toBe('rm');
  });

  it('leaves backslash-newline in single quotes alone', () => {
    const r = parser.parse("echo 'a\\\nb'");
    expect(r.flags.lineContinuation).toBe(false);
    expect(r.commands[0]!.words[1]).toBe('a\\\nb');
  });
});

describe('failures', () => {
  it.each(['echo "open', 'if true; then', 'ls )', '{rm,-rf,x}'])('%j is not ok and says why', (source) => {
    const r = parser.parse(source);
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/parse error/);
    expect(r.needsShell).toBe(true);
    expect(r.direct).toBeUndefined();
  });

  it('refuses input over the size bound without parsing', () => {
    const r = parser.parse(`echo ${'a'.repeat(70_000)}`);
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/over the 65536-byte parse limit/);
    expect(parser.parse('echo hi', { maxBytes: 4 }).ok).toBe(false);
    expect(parser.parse(`echo ${'é'.repeat(40_000)}`).ok).toBe(false);
  });

  it('refuses a parse over its budget of work, counted, not timed', () => {
    const huge = 'echo $(a && b) | c; '.repeat(50_000);
    const r = parser.parse(huge, { maxBytes: 10 * 1024 * 1024, budget: 20_000 });
    expect(r).toMatchObject({ ok: false, limit: 'work' });
    expect(r.error).toMatch(/more work than its budget of 20,000 steps/);
    // The deprecated timeoutMs is an alias: read as work, and said so.
    const old = parser.parse(huge, { maxBytes: 10 * 1024 * 1024, timeoutMs: 1 });
    expect(old).toMatchObject({ ok: false, limit: 'work' });
    expect(old.error).toMatch(/budget of 1,000 steps .*longer than 1 ms on the reference machine/);
    // The parser is reusable afterwards.
    expect(parser.parse('ls -la').direct).toEqual({ argv: ['ls', '-la'] });
  });

  it('gives a command the same answer whatever the machine is doing: the least budget it needs never changes', () => {
    const source = 'for f in *.ts; do grep -n "x" "$f" | head -3; done && echo $(date) || true; '.repeat(40);
    const least = (): number => {
      let lo = 1;
      let hi = 1_000_000;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (parser.parse(source, { budget: mid }).ok) hi = mid;
        else lo = mid + 1;
      }
      return lo;
    };
    const first = least();
    expect(first).toBeGreaterThan(1_000);
    // Busy the event loop's thread between runs: time must not change the count.
    const burn = (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    for (let i = 0; i < 3; i++) {
      burn(20);
      expect(least()).toBe(first);
    }
  });

  it('stops a parse on the wall clock only when it fails anyway: tree-sitter reports hasError for trees with errors only', async () => {
    // The early wall-clock stop (`limit: 'time'`) waits for the progress callback's `hasError`:
    // every version of the parse recovering from an error. A tree that comes out whole never had it.
    const { Language, Parser } = await import('web-tree-sitter');
    const { BASH_GRAMMAR_WASM } = await import('./parser.js');
    await Parser.init();
    const raw = new Parser();
    raw.setLanguage(await Language.load(BASH_GRAMMAR_WASM));
    const lines = ['echo a; ', 'ls | wc -l; ', 'x=1 && y=2; ', 'if true; then :; fi; ', 'cat <<E\nx\nE\n'];
    const junk = '$( ) ( { } ; && || | & if then fi for in do done case esac ;; > < [[ ]] ` x=( "s'.split(
      ' ',
    );
    let seed = 7;
    const next = (n: number) => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) % n;
    const seen = { valid: 0, flagged: 0 };
    for (let i = 0; i < 150; i++) {
      // Whole commands, commands with a stray token, and malformed text.
      const junkPerMille = [0, 15, 500][i % 3]!;
      let source = '';
      for (let k = 150 + next(250); k > 0; k--)
        source += next(1000) >= junkPerMille ? lines[next(lines.length)] : `${junk[next(junk.length)]} `;
      let flagged = false;
      const tree = raw.parse(source, null, {
        progressCallback: (state) => {
          if (state.hasError) flagged = true;
        },
      })!;
      if (!tree.rootNode.hasError) seen.valid++;
      if (flagged) {
        seen.flagged++;
        expect(tree.rootNode.hasError, source.slice(0, 200)).toBe(true);
      }
      tree.delete();
    }
    expect(seen.valid).toBeGreaterThan(30);
    expect(seen.flagged).toBeGreaterThan(5);
    raw.delete();
  });

  it('stops input that makes tree-sitter rescan the source (an unterminated here-document, stray parentheses) at its budget', () => {
    for (const source of ['<<'.repeat(20_000), ')'.repeat(30_000), 'a=('.repeat(10_000)]) {
      const r = parser.parse(source);
      expect(r.ok, source.slice(0, 10)).toBe(false);
      expect(['work', 'time'], source.slice(0, 10)).toContain(r.limit);
    }
    expect(parser.parse('ls -la').direct).toEqual({ argv: ['ls', '-la'] });
  });

  it('reads 2,500 chained commands (&&, ||, ;, |, newlines) and a 16,000-link list without recursing through the chain', () => {
    for (const sep of [' && ', ' || ', '; ', ' | ', '\n']) {
      const r = parser.parse(Array(2_500).fill('true').join(sep));
      expect(r.ok, sep).toBe(true);
      expect(r.commands, sep).toHaveLength(2_500);
      expect(r.operators.length, sep).toBe(sep === '\n' ? 0 : 2_499);
    }
    const long = parser.parse(Array(16_000).fill('a').join('&&'));
    expect(long.ok).toBe(true);
    expect(long.commands).toHaveLength(16_000);
    // A long run of one operator is a balanced tree: readers that recurse through it stay shallow.
    const depth = (st: Syntax.Statement): number =>
      st.kind === 'and-or' ? 1 + Math.max(depth(st.left), depth(st.right)) : 0;
    expect(depth(long.syntax!.body.items[0]!.statement)).toBeLessThan(20);
    const alternating = parser.parse(Array(120).fill('a && b').join(' || '));
    expect(alternating.ok).toBe(true);
    expect(alternating.commands).toHaveLength(240);
    const tooMany = parser.parse(Array(300).fill('a && b').join(' || '));
    expect(tooMany).toMatchObject({ ok: false, limit: 'depth' });
    expect(tooMany.error).toMatch(/alternates && and \|\| more than 256 times/);
    // The and-or list keeps bash's grouping: ((a && b) || c) && d.
    const mixed = parser.parse('a && b || c && d').syntax!.body.items[0]!.statement;
    expect(mixed).toMatchObject({
      kind: 'and-or',
      operator: '&&',
      left: { kind: 'and-or', operator: '||', left: { kind: 'and-or', operator: '&&' } },
    });
  });

  it('refuses a command nested deeper than maxDepth (chains aside), naming the limit', () => {
    const deep = `echo ${'$('.repeat(100)}x${')'.repeat(100)}`;
    const r = parser.parse(deep);
    expect(r).toMatchObject({ ok: false, limit: 'depth' });
    expect(r.error).toMatch(/nests more than 256 levels deep/);
    expect(parser.parse(`echo ${'$('.repeat(20)}x${')'.repeat(20)}`).ok).toBe(true);
    expect(parser.parse(`echo ${'$('.repeat(20)}x${')'.repeat(20)}`, { maxDepth: 40 }).limit).toBe('depth');
    expect(parser.parse(`${'{ '.repeat(200)}x${'; }'.repeat(200)}`).ok).toBe(true);
  });

  it('never throws on odd input', () => {
    for (const source of [
      '',
      ' ',
      '\0',
      '\u202e',
      ';;',
      '&&',
      '$(',
      '`',
      '<<',
      "$'",
      '\\',
      '\n\n',
      'a'.repeat(1000),
    ]) {
      expect(() => parser.parse(source)).not.toThrow();
    }
    expect(parser.parse('echo a\0b').ok).toBe(false);
    expect(parser.parse(42 as unknown as string).ok).toBe(false);
    expect(parser.parse('').commands).toEqual([]);
    expect(parser.parse('').direct).toBeUndefined();
  });
});

describe('extra command fields', () => {
  it('keeps raw words and pipeline positions', () => {
    const r = parser.parse("curl -s x | (cd /; $'ba\\x73h') && ls");
    expect(r.commands.map((c) => [c.name, c.pipeline?.stage])).toEqual([
      ['curl', 0],
      ['cd', 1],
      ['bash', 1],
      ['ls', undefined],
    ]);
    expect(r.commands[2]!.rawWords).toEqual(["$'ba\\x73h'"]);
    expect(r.commands[0]!.pipeline!.id).toBe(r.commands[2]!.pipeline!.id);
  });
});

describe('heredoc with more redirects', () => {
  it('attaches redirects written after the heredoc start to the command', () => {
    const r = parser.parse("cat <<'EOF' > .bashrc 2>&1\nx\nEOF");
    expect(r.commands[0]!.redirects.map((x) => [x.operator, x.target])).toEqual([
      ['<<', 'EOF'],
      ['>', '.bashrc'],
      ['>&', '1'],
    ]);
    expect(r.redirects).toHaveLength(3);
  });

  it('finds a pipeline written after the heredoc start', () => {
    const r = parser.parse('cat <<EOF | sh\nid\nEOF');
    expect(r.commands.map((c) => c.name)).toEqual(['cat', 'sh']);
    expect(r.operators).toEqual(['|']);
  });
});

describe('redirects after a list or pipeline', () => {
  it('belong to the last command, as bash reads them', () => {
    const r = parser.parse('cd /tmp && echo x > .bashrc');
    expect(r.commands[0]!.redirects).toEqual([]);
    expect(r.commands[1]!.redirects).toEqual([{ operator: '>', target: '.bashrc', targetLiteral: true }]);
    const p = parser.parse('ls | grep a | cat > out 2>&1');
    expect(p.commands.map((c) => c.redirects.length)).toEqual([0, 0, 2]);
    expect(p.redirects).toHaveLength(2);
  });
});
