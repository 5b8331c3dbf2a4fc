// The command modules' grammars build their option tables at first use (grammar.ts): a malformed
// spec would throw only when a command that uses it is judged. This builds every declared one.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadShellParser } from '@conch/shell-syntax';
import { describe, expect, it } from 'vitest';
import './index.js';
import { permissionConfigSchema } from './config.js';
import { PermissionEngine } from './gate.js';
import { buildDeclaredGrammars, grammar, parseArgs } from './grammar.js';
import { literalArg } from './words.js';

describe('grammars', () => {
  it('every grammar the command modules declare builds', () => {
    expect(buildDeclaredGrammars()).toBeGreaterThan(100);
  });

  it('judging commands declares no grammar: every one is declared once, at import (a grammar made per judgement would be kept forever)', async () => {
    const before = buildDeclaredGrammars();
    const dir = mkdtempSync(join(tmpdir(), 'conch-grammar-'));
    try {
      const engine = new PermissionEngine({
        parser: await loadShellParser(),
        config: permissionConfigSchema.parse({ sandbox: 'off' }),
        cwd: dir,
        home: dir,
      });
      for (let i = 0; i < 3; i++)
        for (const command of [
          'read -r line < f',
          'mapfile -t lines < f',
          'readarray arr < f',
          'wait -n -p pid',
          'grep -rn x .',
          'git log --oneline -3',
          'git range-diff a...b',
          'tar -tf x.tar',
          'ls -la | sort | head -3',
          "sed -n '1,5p' f",
          "awk '{print $1}' f",
          'pgrep -f node',
        ])
          engine.evaluate(command);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(buildDeclaredGrammars()).toBe(before);
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
