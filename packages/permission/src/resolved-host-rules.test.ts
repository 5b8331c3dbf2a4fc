// Invariant: host rules match the command that really runs — the program resolved through paths, quotes and wrappers, git's / npm's / docker's / kubectl's global options skipped to the subcommand — so no spelling of a denied command gets past a deny rule, a command whose name is only known at run time is asked (also in the sandbox), and allow rules only look through what changes nothing that runs.
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
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { PermissionEngine } from './gate.js';
import { permissionPlugin } from './plugin.js';

let parser: ShellParser;
let ws: string;
beforeAll(async () => {
  parser = await loadShellParser();
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-resolved-')));
});
afterAll(() => rmSync(ws, { recursive: true, force: true }));

function engine(config: PermissionConfigInput) {
  return new PermissionEngine({ parser, config: permissionConfigSchema.parse(config), cwd: ws });
}

const DENY = [
  'git push:*',
  'curl:*',
  'npm publish:*',
  'docker run:*',
  'kubectl delete:*',
  'helm uninstall:*',
];

describe('deny rules match every spelling of the command', () => {
  const e = {
    evaluate: (command: string) => engine({ sandbox: 'off', rules: { deny: DENY } }).evaluate(command),
  };
  it.each([
    ['git -C . push', 'git push:*'],
    ['git -C sub -C .. push origin main', 'git push:*'],
    ['command git push', 'git push:*'],
    ['env GIT_DIR=x git push', 'git push:*'],
    ['git --no-pager -c x=y push', 'git push:*'],
    ['git --git-dir=.git --work-tree=. push', 'git push:*'],
    ['git --git-dir .git push --force', 'git push:*'],
    ['/usr/bin/git -P push', 'git push:*'],
    ['nice -n 5 git -c core.askpass=true push', 'git push:*'],
    ['/usr/bin/curl https://example.invalid', 'curl:*'],
    ['\\curl x', 'curl:*'],
    ['"curl" x', 'curl:*'],
    ["'cu'rl x", 'curl:*'],
    ['timeout 5 /usr/bin/curl x', 'curl:*'],
    ['./curl x', 'curl:*'],
    ['env -i /usr/local/bin/curl x', 'curl:*'],
    ['npm --prefix x publish', 'npm publish:*'],
    ['npm --registry https://r.invalid --silent publish --tag next', 'npm publish:*'],
    ['npm -w pkg publish', 'npm publish:*'],
    ['docker --context x run ubuntu', 'docker run:*'],
    ['docker -H tcp://h:2375 --tls run -it ubuntu', 'docker run:*'],
    ['kubectl -n ns delete pod x', 'kubectl delete:*'],
    ['kubectl --namespace=ns --context prod delete deploy x', 'kubectl delete:*'],
    ['helm --kube-context prod uninstall app', 'helm uninstall:*'],
    ["bash -c 'git -C . push'", 'git push:*'],
  ])('%j is denied by %j', (command, rule) => {
    const a = e.evaluate(command);
    expect({ verdict: a.verdict, rule: a.decisive.rule }, a.decisive.reason).toEqual({
      verdict: 'deny',
      rule: `deny:${rule}`,
    });
  });

  it.each(['git status', 'git -C . log --oneline', 'npm --prefix x install', 'kubectl -n ns get pods'])(
    'leaves %j alone',
    (command) => {
      expect(e.evaluate(command).decisive.rule).not.toMatch(/^deny:/);
    },
  );

  it.each(['$(which curl) x', '"$tool" push', '`echo curl` x', '$CURL https://example.invalid'])(
    'asks for %j: a name only known at run time cannot be checked against the deny rules',
    (command) => {
      const a = e.evaluate(command);
      expect(a.verdict).toBe('ask');
      expect(a.parts.some((p) => p.rule === 'failClosed:hostRules')).toBe(true);
    },
  );

  it('without deny rules, a run-time name is judged as before', () => {
    const a = engine({ sandbox: 'off' }).evaluate('$(which curl) x');
    expect(a.parts.some((p) => p.rule === 'failClosed:hostRules')).toBe(false);
  });

  it('examples are checked against the resolved command', () => {
    const checked = engine({
      rules: {
        deny: [
          { pattern: 'git push:*', examples: { match: ['git -C . push', '/usr/bin/git --no-pager push'] } },
        ],
      },
    });
    expect(checked.checkExamples()).toEqual([]);
  });
});

describe('allow rules look only through what changes nothing that runs', () => {
  const allow = ['git push:*', 'curl https://example.invalid/x', 'npm test'];
  const e = { evaluate: (command: string) => engine({ sandbox: 'off', rules: { allow } }).evaluate(command) };
  it.each([
    ['git push origin main', 'allow'],
    ['git --no-pager push', 'allow'],
    ['/usr/bin/git push', 'allow'],
    ['git -C ../other push', 'ask'],
    ['git -c core.sshCommand=evil push', 'ask'],
    ['./git push', 'ask'],
    ['/tmp/bin/git push', 'ask'],
    ['/usr/bin/curl https://example.invalid/x', 'allow'],
    ['npm --silent test', 'allow'],
    ['npm --prefix ../other test', 'ask'],
  ])('%j: %s', (command, verdict) => {
    expect(e.evaluate(command).verdict).toBe(verdict);
  });
});

describe.runIf(findBwrap() || process.env.CI)('in the sandbox', () => {
  it('a name only known at run time is asked even inside when the host has deny rules', async () => {
    const e = engine({ sandbox: 'workspace-write', rules: { deny: ['curl:*'] } });
    const d = await e.check(
      { kind: 'command', tool: 'cli_based_tool', command: '$(which curl) https://example.invalid', cwd: ws },
      { callId: '1' },
    );
    expect(d).toMatchObject({ outcome: 'deny', rule: 'failClosed:hostRules' });
    const plain = await engine({ sandbox: 'workspace-write' }).check(
      { kind: 'command', tool: 'cli_based_tool', command: '$(which true) x', cwd: ws },
      { callId: '2' },
    );
    expect(plain).toMatchObject({ outcome: 'allow', sandbox: 'workspace-write' });
  });
});

describe('through cli_based_tool: a denied spelling never runs, and bash would have run it', () => {
  const registries: PluginRegistry[] = [];
  let dir: string;
  afterEach(async () => {
    for (const registry of registries.splice(0)) {
      const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
      await registry.dispose();
      if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', args, {
      cwd,
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
      stdio: 'pipe',
    });

  it.each([
    ['git -C . tag v1', 'git tag:*', '.git/refs/tags/v1'],
    ['git --no-pager -c user.name=x tag v1', 'git tag:*', '.git/refs/tags/v1'],
    ['/usr/bin/git tag v1', 'git tag:*', '.git/refs/tags/v1'],
    ['command git tag v1', 'git tag:*', '.git/refs/tags/v1'],
    ['env GIT_PAGER=cat git tag v1', 'git tag:*', '.git/refs/tags/v1'],
    ['/usr/bin/touch marker', 'touch:*', 'marker'],
    ['\\touch marker', 'touch:*', 'marker'],
    ['"touch" marker', 'touch:*', 'marker'],
    ['timeout 5 /usr/bin/touch marker', 'touch:*', 'marker'],
    ['nice env X=1 touch marker', 'touch:*', 'marker'],
  ])('%j (deny %j)', async (command, rule, marker) => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-resolved-e2e-')));
    git(dir, 'init', '-q');
    git(dir, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'x');
    const registry = new PluginRegistry({
      cwd: dir,
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin],
    });
    registries.push(registry);
    registry.exposeSync('permission', { sandbox: 'off', mode: 'acceptAll', rules: { deny: [rule] } });
    registry.exposeSync('cli', {});
    const result = (await registry.execute('cli_based_tool', { command })) as ToolResult &
      Record<string, any>;
    expect(result).toMatchObject({ permission_denied: true, rule: `deny:${rule}` });
    expect(existsSync(join(dir, marker))).toBe(false);
    // The same line under real bash does what the rule forbids.
    execFileSync('bash', ['-c', command], {
      cwd: dir,
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
      stdio: 'pipe',
    });
    expect(existsSync(join(dir, marker))).toBe(true);
  });
});
