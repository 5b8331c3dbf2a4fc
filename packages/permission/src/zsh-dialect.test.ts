// Invariant: under the zsh dialect (a zsh terminal session) the gate asks for what zsh evaluates and bash does not — subscripts of unbraced `$name[…]` with quoted text, glob qualifiers — and real zsh proves each refused command runs code; literal subscripts stay allowed and zsh runs them without side effects.
import { loadShellParser } from '@conch/shell-syntax';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema } from './config.js';
import { PermissionEngine } from './gate.js';

const ZSH = spawnSync('zsh', ['-fc', 'true']).status === 0;
if (process.env.CI && !ZSH) throw new Error('the zsh dialect tests need zsh under CI (apt-get install zsh)');

let dir: string;
let engine: PermissionEngine;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-permission-zsh-'));
  writeFileSync(join(dir, 'file.txt'), 'x\n'); // a name for glob qualifiers to run on
  engine = new PermissionEngine({
    parser: await loadShellParser(),
    config: permissionConfigSchema.parse({}),
    cwd: dir,
    home: dir,
  });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const marker = () => join(dir, 'ran');
/** Runs `command` under zsh (no rc files) in the temp dir; true when it created the marker. */
function zshRuns(command: string): boolean {
  rmSync(marker(), { force: true });
  try {
    execFileSync('zsh', ['-fc', command], { cwd: dir, stdio: 'ignore', timeout: 10_000 });
  } catch {
    // a failing command may still have run the payload
  }
  return existsSync(marker());
}

describe.skipIf(!ZSH)('zsh dialect', () => {
  it.each([
    "x=(a b); echo $x['$(touch ran)']",
    "w=(a); print -r -- ${#w} $w['$(touch ran)']",
    "files=(f); ls $files['`touch ran`'] 2>/dev/null",
    "y=(1 2); echo $y[' $(touch ran) ']",
    "z=(q); cat $z['$(touch ran)'] 2>/dev/null",
    "ls *(e:'touch ran':) 2>/dev/null",
  ])('asks (or, when it cannot be parsed, refuses), and zsh would run the payload: %s', (command) => {
    const verdict = engine.evaluate(command, dir, 'zsh');
    expect(verdict.verdict, verdict.decisive.reason).not.toBe('allow');
    // The same text under bash is a glob after $x: the payload is only text there.
    expect(zshRuns(command)).toBe(true);
  });

  it.each(['x=(a b c); echo $x[1] $x[-1] $x[2,3]', 'x=(a); echo "$x[1]"', 'x=(a); echo $x'])(
    'allows literal subscripts, and zsh runs them without side effects: %s',
    (command) => {
      expect(engine.evaluate(command, dir, 'zsh').verdict).toBe('allow');
      expect(zshRuns(command)).toBe(false);
    },
  );
});
