// Invariant: the terminal refuses exactly the exec that would replace the session's own shell — proved for each case against real bash (and zsh for pipelines), so the parser and the shell cannot disagree unnoticed — and recognises the shared slow-command table.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { analyzeCommand } from './command-analysis.js';

const ZSH = '/usr/bin/zsh';
const HAS_ZSH = existsSync(ZSH) || Boolean(process.env.CI);

/** `P` stands for the program exec would run. */
const REPLACES: readonly string[] = [
  'exec P',
  'cd /tmp && exec P',
  'exec -a name P',
  'exec -cl P',
  'exec -- P',
  '\\exec P',
  'builtin exec P',
  'command exec P',
  'eval "exec P"',
  "eval 'cd /; exec P'",
  'FOO=1 exec P',
  '{ exec P; }',
  'if true; then exec P; fi',
  'for i in 1; do exec P; done',
  'true || exec P; exec P',
  'exec "$PROG"',
  'exec P >/dev/null 2>&1',
];

const KEEPS: readonly string[] = [
  'exec 2>/dev/null',
  'exec 3>&1',
  'exec 3</dev/null',
  '(exec P)',
  'exec P &',
  'x=$(exec P)',
  'echo | exec P',
  'command -v exec',
  'echo exec P',
  "bash -c 'exec P'",
  'executable=1',
  'git exec-path',
];

/** Whether real bash (or zsh) is replaced: the line after the command never runs. */
function replacedIn(shell: 'bash' | 'zsh', line: string): boolean {
  const script = `${line.replace(/\bP\b/g, 'true')}\necho after`;
  const file = shell === 'bash' ? 'bash' : ZSH;
  const out = execFileSync(file, shell === 'bash' ? ['--norc', '-c', script] : ['-f', '-c', script], {
    encoding: 'utf8',
    env: { ...process.env, PROG: 'true' },
  });
  return !out.includes('after');
}

describe('exec over the session shell', () => {
  it.each(REPLACES)('refuses %s (and bash is replaced by it)', async (line) => {
    expect((await analyzeCommand(line.replace(/\bP\b/g, 'bash'))).replacesShell).toBeDefined();
    expect(replacedIn('bash', line)).toBe(true);
  });

  it.each(KEEPS)('lets %s run (bash keeps its shell)', async (line) => {
    expect((await analyzeCommand(line.replace(/\bP\b/g, 'bash'))).replacesShell).toBeUndefined();
    expect(replacedIn('bash', line)).toBe(false);
  });

  it.skipIf(!HAS_ZSH)(
    'reads a pipeline as the session shell does: zsh runs the last stage itself',
    async () => {
      expect((await analyzeCommand('echo | exec cat', { dialect: 'zsh' })).replacesShell).toBeDefined();
      expect(replacedIn('zsh', 'echo | exec P')).toBe(true);
      expect((await analyzeCommand('exec cat | cat', { dialect: 'zsh' })).replacesShell).toBeUndefined();
      expect(replacedIn('zsh', 'exec P | cat')).toBe(false);
    },
  );
});

describe('slow commands', () => {
  it.each([
    ['npm install', true],
    ['cd web && pnpm run build', true],
    ['FOO=1 cargo test --release', true],
    ['bundle exec rspec spec/models', true],
    ['docker-compose build api', true],
    ['npm run lint', false],
    ['echo "npm install"', false],
    ['ls -la', false],
  ])('%s -> slow: %s', async (line, slow) => {
    expect((await analyzeCommand(line)).slow).toBe(slow);
  });

  it('takes extra patterns', async () => {
    expect(
      (await analyzeCommand('make all', { slowPatterns: [{ pattern: 'make', seconds: 60 }] })).slow,
    ).toBe(true);
  });
});
