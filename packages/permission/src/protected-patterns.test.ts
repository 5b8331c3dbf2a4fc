// Invariant: a write target known only as a glob pattern is judged by the protected names it can reach — a protected name with a leading dot whether or not such a file exists (a `*` skips dot names, so a pattern that reaches one names it on purpose), a protected name without one (`mise.toml`) only where the pattern's expansion finds it now — so `rm -rf "$dir"` or `rm build/*` asks like any write while `rm m*` beside a mise.toml is refused.
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { permissionConfigSchema } from './config.js';
import { PermissionEngine } from './gate.js';

let parser: ShellParser;
let ws: string;
beforeAll(async () => {
  parser = await loadShellParser();
});
beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-patterns-')));
  mkdirSync(join(ws, 'build'));
});
afterEach(() => rmSync(ws, { recursive: true, force: true }));

const verdict = (command: string) =>
  new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({ sandbox: 'off' }),
    cwd: ws,
    home: '/home/patterns-test',
  }).evaluate(command);

describe('patterns and protected names', () => {
  it.each([
    ['rm -rf "$dir"'],
    ['rm build/*'],
    ['rm -f *.log'],
    ['find . -name "*.tmp" -exec rm {} +'],
    ['echo x > m*'],
    ['cp notes.txt build/*'],
  ])('%j asks like any write when no protected name without a dot exists to match', (command) => {
    const a = verdict(command);
    expect(a.verdict, JSON.stringify(a.parts)).toBe('ask');
    expect(a.parts.some((p) => p.rule === 'safety:protectedPaths')).toBe(false);
  });

  it.each([
    ['rm m*', 'mise.toml'],
    ['echo x > *.toml', 'mise.toml'],
    ['truncate -s 0 build/../mise*', 'mise.toml'],
    ['rm -f mise.local.*', 'mise.local.toml'],
  ])('%j is refused where %s exists', (command, name) => {
    writeFileSync(join(ws, name), '[tools]\n');
    const a = verdict(command);
    expect(a.verdict).toBe('deny');
    expect(a.parts.find((p) => p.rule === 'safety:protectedPaths')?.reason).toContain(name);
  });

  it.each([['echo x > .e*'], ['rm .m*'], ['cp x .dev*'], ['rm -rf .z*']])(
    '%j is refused whether or not the dot name it can reach exists',
    (command) => {
      const a = verdict(command);
      expect(a.verdict).toBe('deny');
      expect(a.parts.some((p) => p.rule === 'safety:protectedPaths')).toBe(true);
    },
  );
});
