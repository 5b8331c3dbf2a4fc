// Invariant: for every command a rule can let run with the user's rights, the gate knows which files define what it runs and which part of each counts — the package.json scripts it runs (not the rest of the file), the Makefiles, the repository's configs and hooks (found the way git finds them), a script run by path or handed to an interpreter — and a rule's own text, wildcard and all, covers the same files over the workspace.
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema } from './config.js';
import { executedBy, grantedBy, type Executed } from './executed-files.js';
import { ABSENT, reader } from './executed-pieces.js';
import { PermissionEngine } from './gate.js';
import { compileRule } from './host-rules.js';
import { rulePattern } from './rule-grants.js';
import { indexWorkspace } from './workspace-index.js';

let parser: ShellParser;
let ws: string;
let home: string;

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, HOME: home } });

function write(files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(ws, rel)), { recursive: true });
    writeFileSync(join(ws, rel), text);
  }
}

beforeAll(async () => {
  parser = await loadShellParser();
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-executed-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-executed-home-')));
  write({
    'package.json': JSON.stringify({
      name: 'app',
      scripts: { test: 'node --test', 'test:unit': 'vitest run', build: 'tsc', start: 'node .' },
      dependencies: { 'left-pad': '1.3.0' },
    }),
    'packages/a/package.json': JSON.stringify({ name: 'a', scripts: { 'test:unit': 'echo a' } }),
    Makefile: 'include rules.mk\n-include $(DEPS)\nbuild:\n\techo build\n',
    'rules.mk': 'CFLAGS = -O2\n',
    'sub/Makefile': 'all:\n\techo sub\n',
    'other.mk': 'x:\n\techo x\n',
    'scripts/release.sh': '#!/bin/sh\necho release\n',
    'scripts/env.sh': 'export A=1\n',
    'tools/x.py': 'print(1)\n',
    'tools/x.js': 'console.log(1)\n',
    'tools/pre.js': '',
    'tools/x.rb': 'puts 1\n',
    'tools/x.pl': 'print 1;\n',
    'x.ts': 'console.log(1)\n',
    '.yarnrc.yml': 'yarnPath: .yarn/releases/yarn-4.cjs\n',
    '.yarn/releases/yarn-4.cjs': '// yarn\n',
  });
  git(ws, 'init', '-q', '-b', 'main');
  git(ws, 'config', 'user.name', 'Conch Test');
  git(ws, 'config', 'user.email', 'conch-test@example.invalid');
  writeFileSync(join(ws, '.git/hooks/pre-commit'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  git(ws, 'add', '-A');
  git(ws, 'commit', '-q', '-m', 'initial');
  git(ws, 'worktree', 'add', '-q', 'wt');
  mkdirSync(join(ws, 'nested'));
  git(join(ws, 'nested'), 'init', '-q');
  mkdirSync(join(ws, 'husky/.husky'), { recursive: true });
  git(join(ws, 'husky'), 'init', '-q');
  git(join(ws, 'husky'), 'config', 'core.hooksPath', '.husky');
});
afterAll(() => {
  rmSync(ws, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

/** What a command line's parts execute, as the gate resolves them (wrappers, cd, env -C). */
function executed(command: string, cwd = '.'): Executed & { labels: string[]; existing: string[] } {
  const e = new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({ sandbox: 'off' }),
    cwd: ws,
    home,
  });
  const analysis = e.evaluate(command, join(ws, cwd));
  const r = reader(ws, home);
  const pieces = [];
  for (const p of analysis.parts) {
    if (!p.run) continue;
    const x = executedBy(p.run, r);
    if (x.unknown) return { pieces: [], unknown: x.unknown, labels: [], existing: [] };
    pieces.push(...x.pieces);
  }
  return {
    pieces,
    labels: pieces.map((p) => p.label),
    existing: pieces.filter((p) => p.digest !== ABSENT).map((p) => p.label),
  };
}

const scripts = (pkg: string, ...names: string[]) =>
  names.flatMap((n) => [n, `pre${n}`, `post${n}`]).map((n) => `${pkg}'s scripts[${JSON.stringify(n)}]`);

describe('what a command executes', () => {
  it.each([
    ['npm run test:unit', '.', [...scripts('package.json', 'test:unit'), '.npmrc']],
    ['npm run-script build', '.', [...scripts('package.json', 'build'), '.npmrc']],
    ['npm test', '.', [...scripts('package.json', 'test'), '.npmrc']],
    ['npm t', '.', [...scripts('package.json', 'test'), '.npmrc']],
    ['npm start', '.', [...scripts('package.json', 'start'), 'server.js', '.npmrc']],
    ['npm --silent run test:unit -- --watch', '.', [...scripts('package.json', 'test:unit'), '.npmrc']],
    [
      'npm run test:unit',
      'packages/a',
      [...scripts('packages/a/package.json', 'test:unit'), 'packages/a/.npmrc', '.npmrc'],
    ],
    ['npm run test:unit', 'tools', [...scripts('package.json', 'test:unit'), '.npmrc']],
    [
      'npm --prefix packages/a run test:unit',
      '.',
      [...scripts('packages/a/package.json', 'test:unit'), 'packages/a/.npmrc', '.npmrc'],
    ],
    ['pnpm test:unit', '.', [...scripts('package.json', 'test:unit'), '.npmrc', '.pnpmfile.cjs']],
    ['pnpm run test:unit', '.', [...scripts('package.json', 'test:unit'), '.npmrc', '.pnpmfile.cjs']],
    [
      'pnpm -C packages/a test:unit',
      '.',
      [
        ...scripts('packages/a/package.json', 'test:unit'),
        'packages/a/.npmrc',
        'packages/a/.pnpmfile.cjs',
        '.npmrc',
        '.pnpmfile.cjs',
      ],
    ],
    [
      'yarn test:unit',
      '.',
      [
        ...scripts('package.json', 'test:unit'),
        '.npmrc',
        '.yarnrc',
        '.yarnrc.yml',
        '.yarn/releases/yarn-4.cjs',
      ],
    ],
    [
      'yarn run test:unit',
      '.',
      [
        ...scripts('package.json', 'test:unit'),
        '.npmrc',
        '.yarnrc',
        '.yarnrc.yml',
        '.yarn/releases/yarn-4.cjs',
      ],
    ],
    ['bun run test:unit', '.', [...scripts('package.json', 'test:unit'), '.npmrc', 'bunfig.toml']],
    ['timeout 60 npm run test:unit', '.', [...scripts('package.json', 'test:unit'), '.npmrc']],
    [
      'env -C packages/a npm run test:unit',
      '.',
      [...scripts('packages/a/package.json', 'test:unit'), 'packages/a/.npmrc', '.npmrc'],
    ],
    [
      'cd packages/a && npm run test:unit',
      '.',
      [...scripts('packages/a/package.json', 'test:unit'), 'packages/a/.npmrc', '.npmrc'],
    ],
  ])('%j in %s: the scripts it runs and the config of the tool', (command, cwd, labels) => {
    expect(executed(command, cwd).labels.sort()).toEqual([...new Set(labels)].sort());
  });

  it('npm install runs the install scripts', () => {
    expect(executed('npm install').labels).toEqual(
      expect.arrayContaining([
        ...scripts('package.json', 'install', 'prepare'),
        'package.json\'s scripts["preinstall"]',
      ]),
    );
    expect(executed('yarn').labels).toEqual(expect.arrayContaining(scripts('package.json', 'install')));
  });

  it.each([
    ['make', '.', ['GNUmakefile', 'makefile', 'Makefile', 'rules.mk']],
    ['make build', '.', ['GNUmakefile', 'makefile', 'Makefile', 'rules.mk']],
    ['make -j 4 build', '.', ['GNUmakefile', 'makefile', 'Makefile', 'rules.mk']],
    ['make -C sub all', '.', ['sub/GNUmakefile', 'sub/makefile', 'sub/Makefile']],
    ['make --directory=sub', '.', ['sub/GNUmakefile', 'sub/makefile', 'sub/Makefile']],
    ['make all', 'sub', ['sub/GNUmakefile', 'sub/makefile', 'sub/Makefile']],
    ['make -f other.mk x', '.', ['other.mk']],
    ['make -fother.mk x', '.', ['other.mk']],
    ['gmake --file=other.mk', '.', ['other.mk']],
  ])('%j in %s: the makefiles (and what they include by name)', (command, cwd, labels) => {
    expect(executed(command, cwd).labels.sort()).toEqual(labels.sort());
  });

  it.each([
    ['git status', '.', ['.git/config', '.git/config.worktree', '.git/hooks']],
    ['git commit -m x', 'tools', ['.git/config', '.git/config.worktree', '.git/hooks']],
    ['git -C nested status', '.', ['nested/.git/config', 'nested/.git/config.worktree', 'nested/.git/hooks']],
    ['git status', 'nested', ['nested/.git/config', 'nested/.git/config.worktree', 'nested/.git/hooks']],
    [
      'git --no-pager log',
      'husky',
      ['husky/.git/config', 'husky/.git/config.worktree', 'husky/.git/hooks', 'husky/.husky'],
    ],
    [
      'git status',
      'wt',
      [
        '.git/config',
        '.git/worktrees/wt/config',
        '.git/config.worktree',
        '.git/worktrees/wt/config.worktree',
        '.git/hooks',
      ],
    ],
  ])('%j in %s: the repository git finds, its configs and hooks', (command, cwd, labels) => {
    expect(executed(command, cwd).labels.sort()).toEqual(labels.sort());
  });

  it.each([
    ['./scripts/release.sh', ['scripts/release.sh']],
    ['scripts/release.sh --dry-run', ['scripts/release.sh']],
    ['bash scripts/release.sh', ['scripts/release.sh']],
    ['sh -x scripts/release.sh', ['scripts/release.sh']],
    ['bash -o pipefail scripts/release.sh', ['scripts/release.sh']],
    // bash reads no rc file when it runs a script.
    ['bash --rcfile scripts/env.sh scripts/release.sh', ['scripts/release.sh']],
    ['source scripts/env.sh', ['scripts/env.sh']],
    ['python3 tools/x.py', ['tools/x.py']],
    ['python3 -u -W ignore tools/x.py arg', ['tools/x.py']],
    ['python3.12 tools/x.py', ['tools/x.py']],
    ['node tools/x.js', ['tools/x.js']],
    ['node -r ./tools/pre.js tools/x.js', ['tools/pre.js', 'tools/x.js']],
    ['ruby tools/x.rb', ['tools/x.rb']],
    ['perl -w tools/x.pl', ['tools/x.pl']],
    ['npx tsx x.ts', ['x.ts']],
    ['npx -y tsx x.ts', ['x.ts']],
    ['tsx watch x.ts', ['x.ts']],
    ['pnpm exec tsx x.ts', ['x.ts']],
  ])('%j: the script it runs', (command, labels) => {
    expect(executed(command).labels).toEqual(labels);
  });

  it.each([
    ['ls -la'],
    ['touch x'],
    ['python3 -m pytest -q'],
    ['python3 -c "print(1)"'],
    ['bash -c "echo hi"'],
    ['node -e 1'],
    ['npx vitest run'],
    ['npm ls'],
    ['cargo test'],
  ])('%j executes nothing the table knows: its rule stands on the command line', (command) => {
    expect(executed(command)).toMatchObject({ pieces: [] });
    expect(executed(command).unknown).toBeUndefined();
  });

  it.each([
    ['npm run test:unit -w packages/a', /-w runs scripts of other packages/],
    ['npm run test:unit --workspaces', /--workspaces/],
    ['npm run test:unit --script-shell=/tmp/x', /--script-shell sets the program scripts run with/],
    ['pnpm -r test', /-r runs scripts of other packages/],
    ['pnpm --filter a test', /--filter/],
    ['yarn workspaces foreach run test', /workspaces runs scripts of other packages/],
    ['npm run "$S"', /only known at run time/],
    ['make $TARGET', /only known at run time/],
    ['git -C "$D" status', /only known at run time/],
    ['cd "$D" && npm run test:unit', /the directory it runs in is only known at run time/],
    ['echo test:unit | xargs npm run', /supplied at run time/],
    ['ruby -C sub x.rb', /-C runs what the gate does not follow/],
  ])('%j: which files it runs cannot be told (%s)', (command, reason) => {
    expect(executed(command).unknown).toMatch(reason);
  });

  it('counts only the scripts entries: a new dependency changes no digest, a changed script does', () => {
    const before = executed('npm run test:unit').pieces;
    const pkg = join(ws, 'package.json');
    const json = JSON.parse(execFileSync('cat', [pkg], { encoding: 'utf8' }));
    writeFileSync(
      pkg,
      JSON.stringify({ ...json, dependencies: { ...json.dependencies, x: '1' }, version: '2.0.0' }),
    );
    expect(executed('npm run test:unit').pieces).toEqual(before);
    writeFileSync(pkg, JSON.stringify({ ...json, scripts: { ...json.scripts, 'posttest:unit': 'x' } }));
    const after = executed('npm run test:unit').pieces;
    expect(after.filter((p, i) => p.digest !== before[i]!.digest).map((p) => p.label)).toEqual([
      'package.json\'s scripts["posttest:unit"]',
    ]);
    writeFileSync(pkg, JSON.stringify(json));
  });
});

describe("a rule's own text covers what the commands it matches execute", () => {
  const keys = (rule: string | { regex: string }) => {
    const compiled = compileRule('allow', 0, rule);
    if (typeof compiled === 'string') throw new Error(compiled);
    const pieces = grantedBy(rulePattern(compiled), () => indexWorkspace(ws), reader(ws, home));
    return new Set(pieces.map((p) => p.key));
  };

  it.each([
    ['npm run test:*', ['npm run test:unit', 'npm run test', 'npm run test:unit -- --watch']],
    ['npm run test:*', ['cd packages/a && npm run test:unit']],
    ['npm test', ['npm test']],
    ['pnpm test:*', ['pnpm test:unit', 'pnpm -C packages/a test:unit']],
    ['yarn *', ['yarn test:unit', 'yarn build']],
    ['timeout 60 npm run build', ['timeout 60 npm run build']],
    ['make build', ['make build', 'make -C sub build']],
    ['make *', ['make', 'make -C sub']],
    ['git status', ['git status', 'git -C nested status', 'cd wt && git status', 'cd husky && git status']],
    ['git commit:*', ['git commit -m x']],
    ['./scripts/release.sh', ['./scripts/release.sh']],
    ['bash scripts/release.sh', ['bash scripts/release.sh']],
    ['python3 tools/x.py', ['python3 tools/x.py']],
    ['npx tsx x.ts', ['npx tsx x.ts']],
    [{ regex: '^make( [a-z]+)?$' }, ['make build']],
    [{ regex: '^npm run (test|build)$' }, ['npm run build']],
  ] as const)('%j covers %j', (rule, commands) => {
    const granted = keys(rule);
    for (const command of commands) {
      const e = executed(command);
      expect(e.unknown, command).toBeUndefined();
      const missing = e.pieces.filter((p) => p.digest !== ABSENT && !granted.has(p.key)).map((p) => p.label);
      expect(missing, command).toEqual([]);
    }
  });

  it.each([
    ['python3 *', 'python3 tools/x.py'],
    ['make *', 'make -f other.mk'],
    ['bash scripts/*', 'bash scripts/release.sh'],
    ['npm run build', 'npm run test:unit'],
  ])('%j leaves %j out: what it would run is not snapshotted, so it asks', (rule, command) => {
    const granted = keys(rule);
    expect(executed(command).pieces.filter((p) => p.digest !== ABSENT && !granted.has(p.key))).not.toEqual(
      [],
    );
  });
});
