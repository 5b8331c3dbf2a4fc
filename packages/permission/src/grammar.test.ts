// The command modules' grammars build their option tables at first use (grammar.ts): a malformed
// spec would throw only when a command that uses it is judged. This builds every declared one.
import { describe, expect, it } from 'vitest';
import './index.js';
import { buildDeclaredGrammars, grammar, parseArgs } from './grammar.js';
import { literalArg } from './words.js';

describe('grammars', () => {
  it('every grammar the command modules declare builds', () => {
    expect(buildDeclaredGrammars()).toBeGreaterThan(100);
  });

  it('a malformed long option is reported when its tables are first used', () => {
    const bad = grammar({ long: 'fine bad!item' });
    expect(bad.permute).toBe(true);
    expect(() => bad.long).toThrow(/bad grammar item bad!item/);
  });

  it('a lazily built grammar parses as it did when built at once', () => {
    const g = grammar({ flags: 'ab', values: 'n', long: 'lines=:n all color?' });
    const parsed = parseArgs(
      g,
      ['-ab', '-n', '5', '--all', 'file'].map((w) => literalArg(w)),
      'x',
    );
    expect(parsed.ok).toBe(true);
    if (parsed.ok) expect(parsed.args.options.map((o) => o.def.key)).toEqual(['-a', '-b', '-n', '--all']);
    expect(g.short.get('n')?.arg).toBe('required');
    expect(g.long.get('lines')?.key).toBe('-n');
    expect(g.long.get('color')?.arg).toBe('optional');
  });
});
