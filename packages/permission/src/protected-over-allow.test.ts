// Invariant: a host allow rule never opens a protected path — a command it allows that names a shell start-up file, .env*, .ssh/, a git hook or an editor's settings (as an argument, an option's value, NAME=value) is denied, with the sandbox off, in it, or leaving it, unless the rule itself names that path.
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { PermissionEngine } from './gate.js';
import { permissionPlugin } from './plugin.js';

let parser: ShellParser;
let ws: string;
const HOME = '/home/allow-test';
beforeAll(async () => {
  parser = await loadShellParser();
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-allow-protected-')));
});
afterAll(() => rmSync(ws, { recursive: true, force: true }));

function engine(config: PermissionConfigInput) {
  return new PermissionEngine({ parser, config: permissionConfigSchema.parse(config), cwd: ws, home: HOME });
}

const ALLOW = ['git log*', 'make:*', 'npm test:*', 'python3 tools/gen.py:*', 'node:*'];

describe('an allowed command that names a protected path is denied', () => {
  it.each([
    'git log --output=~/.bash_aliases',
    `git log --output=${HOME}/.bash_aliases`,
    'git log --output ~/.bashrc',
    'git log --output=$HOME/.zshrc',
    'git log -p --output=.env.local',
    'git log --output=.git/hooks/pre-commit',
    'git log --output=.vscode/tasks.json',
    'git log --output=sub/../.mcp.json',
    'make stage DESTDIR=~/.ssh',
    'make -C . deploy PREFIX=~/.config/git',
    'npm test -- --outputFile=.env.production',
    'python3 tools/gen.py --out ~/.profile',
    'node build.js -o.envrc',
    'timeout 60 npm test -- --reporter-out ~/.bash_login',
  ])('%j', (command) => {
    for (const sandbox of ['off', 'workspace-write'] as const) {
      const a = engine({ sandbox, rules: { allow: ALLOW } }).evaluate(command);
      expect({ verdict: a.verdict, rule: a.decisive.rule }, `${sandbox}: ${a.decisive.reason}`).toEqual({
        verdict: 'deny',
        rule: 'safety:protectedPaths',
      });
    }
  });

  it.each([
    'git log --output=log.txt',
    'make install DESTDIR=./stage',
    'npm test -- --outputFile=report.json',
    'node build.js --env-name production',
    'curl https://example.invalid/.env -o x',
  ])('%j, which names none, stays allowed by its rule', (command) => {
    const a = engine({
      sandbox: 'off',
      rules: { allow: [...ALLOW, 'curl https://example.invalid/.env -o x'] },
    }).evaluate(command);
    expect(a.verdict, a.decisive.reason).toBe('allow');
  });

  it.each([
    ['git log --output=~/.bash_aliases', 'git log --output=~/.bash_aliases'],
    ['node --env-file=.env server.js', 'node --env-file=.env server.js'],
    ['node --env-file=.env server.js', 'node --env-file=.env:*'],
    // bash expands the ~ of a NAME=value word: the rule names the path it becomes.
    ['make stage DESTDIR=~/.ssh', { regex: '^make stage DESTDIR=/home/allow-test/\\.ssh$' }],
  ] as const)('%j is allowed by a rule that names the path itself', (command, rule) => {
    const a = engine({ sandbox: 'off', rules: { allow: [rule] } }).evaluate(command);
    expect(a.verdict, a.decisive.reason).toBe('allow');
  });

  it('without a rule the command is asked as before (a human sees it)', () => {
    expect(engine({ sandbox: 'off' }).evaluate('git log --output=~/.bash_aliases').verdict).toBe('ask');
  });

  it('with the protected-paths rule off, the allow rule decides', () => {
    const e = engine({
      sandbox: 'off',
      rules: { allow: ALLOW },
      safety: {
        privilegeEscalation: true,
        downloadToInterpreter: true,
        protectedPaths: false,
        recursiveDeleteRoot: true,
        sourceDownloaded: true,
        forkBomb: true,
        selfKill: true,
      },
    });
    expect(e.evaluate('git log --output=~/.bash_aliases').verdict).toBe('allow');
  });
});

describe('an escalation a host allow rule would let out', () => {
  it('is denied when it names a protected path', async () => {
    const e = engine({ sandbox: 'workspace-write', rules: { allow: ALLOW } });
    const request = (command: string) => ({
      kind: 'command' as const,
      tool: 'cli_based_tool',
      command,
      cwd: ws,
      sandboxAvailable: true,
      escalation: { justification: 'needs the log' },
    });
    expect(await e.check(request('git log --output=~/.bash_aliases'), { callId: '1' })).toMatchObject({
      outcome: 'deny',
      rule: 'safety:protectedPaths',
    });
    const fine = await e.check(request('git log --output=log.txt'), { callId: '2' });
    expect(fine).toMatchObject({ outcome: 'allow', sandbox: 'outside' });
  });
});

describe('through cli_based_tool', () => {
  const realHome = process.env.HOME;
  const registries: PluginRegistry[] = [];
  let dir: string;
  let home: string;
  beforeEach(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-allow-e2e-')));
    home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-allow-home-')));
    process.env.HOME = home;
    const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
    execFileSync('git', ['init', '-q'], { cwd: dir, env });
    execFileSync(
      'git',
      ['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'x'],
      {
        cwd: dir,
        env,
      },
    );
  });
  afterEach(async () => {
    for (const registry of registries.splice(0)) {
      const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
      await registry.dispose();
      if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
    }
    rmSync(dir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
    process.env.HOME = realHome;
  });

  const run = async (permission: Record<string, unknown>, args: Record<string, unknown>) => {
    const registry = new PluginRegistry({
      cwd: dir,
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin],
    });
    registries.push(registry);
    registry.exposeSync('permission', permission);
    registry.exposeSync('cli', {});
    return (await registry.execute('cli_based_tool', args)) as ToolResult & Record<string, any>;
  };

  it.each([
    'git log --output=$HOME/.bash_aliases',
    'git log --output "$HOME/.bashrc"',
    'git log -1 --output=.env.local',
  ])('%j is refused with git log* allowed, and git would have written the file', async (command) => {
    const target = command.includes('.env.local')
      ? join(dir, '.env.local')
      : join(home, command.includes('aliases') ? '.bash_aliases' : '.bashrc');
    const result = await run({ sandbox: 'off', rules: { allow: ['git log*'] } }, { command });
    expect(result).toMatchObject({ permission_denied: true, rule: 'safety:protectedPaths' });
    expect(existsSync(target)).toBe(false);
    execFileSync('bash', ['-c', command], {
      cwd: dir,
      env: { ...process.env, HOME: home, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
      stdio: 'pipe',
    });
    expect(existsSync(target)).toBe(true);
  });

  it.runIf(findBwrap() || process.env.CI)(
    'an escalation of such a command is refused before it leaves the sandbox',
    async () => {
      const result = await run(
        { rules: { allow: ['git log*'] } },
        { command: 'git log --output=$HOME/.bash_aliases', sandbox: false, justification: 'the log' },
      );
      expect(result).toMatchObject({ permission_denied: true, rule: 'safety:protectedPaths' });
      expect(existsSync(join(home, '.bash_aliases'))).toBe(false);
    },
  );
});
