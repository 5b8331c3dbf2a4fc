// Invariant: with the default config and no approver, the everyday workflows of a developer agent (npm test and build, pytest, an offline pip install into a venv, make + cc, sed and git, a dev server queried from a later call, an npm install from a tarball) run to success in the workspace-write sandbox without asking anyone, and write only to the workspace and the sandbox-private cache.
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

/** Seconds a single step may take: these machines are slow and loaded, nothing here is a timing goal. */
const STEP_TIMEOUT = 600;
/** Milliseconds one workflow may take (vitest's limit). */
const WORKFLOW_TIMEOUT = 30 * 60_000;

let dir: string;
let home: string;
const registries: PluginRegistry[] = [];
const realHome = process.env.HOME;
const realDontWriteBytecode = process.env.PYTHONDONTWRITEBYTECODE;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-workflow-'));
  // A throwaway HOME: the sandbox keeps it visible read-only, like a real one.
  home = mkdtempSync(join(tmpdir(), 'conch-workflow-home-'));
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
  if (realDontWriteBytecode === undefined) delete process.env.PYTHONDONTWRITEBYTECODE;
  else process.env.PYTHONDONTWRITEBYTECODE = realDontWriteBytecode;
});

type Result = ToolResult & Record<string, any>;

/** Files under `root` (relative, directories ending in `/` when empty), skipping `skip` subtrees. */
function listTree(root: string, skip: (rel: string) => boolean = () => false): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    const entries = readdirSync(d, { withFileTypes: true });
    if (entries.length === 0 && d !== root) out.push(`${relative(root, d)}/`);
    for (const e of entries) {
      const path = join(d, e.name);
      const rel = relative(root, path);
      if (skip(rel)) continue;
      if (e.isDirectory()) walk(path);
      else out.push(rel);
    }
  };
  walk(root);
  return out.sort();
}

function write(files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
}

const SANDBOX_CACHE = join('.cache', 'conch', 'sandbox');
/** conch's own output files (made by the host at sandbox start; read-only inside the sandbox). */
const OUTPUT_DIR = join('.cache', 'conch', 'output');

/** A registry as a host builds it with the default permission config and no approver. */
async function setup(name: string) {
  const registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  registries.push(registry);
  await registry.expose('permission', {});
  await registry.expose('cli', {});
  const decisions: { outcome: string; askedHuman: boolean; sandbox?: string; command?: string }[] = [];
  registry.events.on('permission.decision', (e) => decisions.push(e));
  let calls = 0;
  const started = performance.now();
  const timings: string[] = [];
  const tool = async (toolName: string, args: Record<string, unknown>) => {
    if (toolName === 'cli_based_tool') calls++;
    return (await registry.execute(toolName, args)) as Result;
  };

  /** One cli_based_tool call that must succeed in the sandbox; returns its result. */
  const step = async (command: string, options: Record<string, unknown> = {}) => {
    const t0 = performance.now();
    const result = await tool('cli_based_tool', {
      command,
      background: false,
      timeout: STEP_TIMEOUT,
      ...options,
    });
    timings.push(`${((performance.now() - t0) / 1000).toFixed(1)}s ${command}`);
    const shown = JSON.stringify(
      { returncode: result.returncode, error: result.error, stdout: result.stdout, stderr: result.stderr },
      null,
      1,
    );
    expect(result, `${command}\n${shown}`).toMatchObject({ returncode: 0, sandbox: 'workspace-write' });
    expect(result.error_code, `${command}\n${shown}`).toBeUndefined();
    return result;
  };

  /** Nobody was asked, every call was allowed into the workspace-write sandbox, and HOME is untouched. */
  const finish = () => {
    expect(decisions).toHaveLength(calls);
    for (const d of decisions)
      expect(d).toMatchObject({ outcome: 'allow', askedHuman: false, sandbox: 'workspace-write' });
    expect(listTree(home, (rel) => rel === SANDBOX_CACHE || rel === OUTPUT_DIR)).toEqual([]);
    console.log(
      `[${name}] ${((performance.now() - started) / 1000).toFixed(1)}s in all\n  ${timings.join('\n  ')}`,
    );
  };
  return { registry, tool, step, decisions, finish };
}

describe.runIf(findBwrap() || process.env.CI)(
  'developer workflows in the default workspace-write sandbox, with no approver',
  () => {
    it(
      'npm test runs node --test, then npm run build writes dist/',
      async () => {
        write({
          'package.json': JSON.stringify(
            {
              name: 'calc',
              version: '1.0.0',
              private: true,
              scripts: { test: 'node --test', build: 'node build.mjs' },
            },
            null,
            2,
          ),
          'src/add.js': 'exports.add = (a, b) => a + b;\n',
          'test/add.test.js': [
            "const { test } = require('node:test');",
            "const assert = require('node:assert');",
            "const { add } = require('../src/add.js');",
            "test('adds', () => assert.strictEqual(add(2, 3), 5));",
            '',
          ].join('\n'),
          'build.mjs': [
            "import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';",
            "mkdirSync('dist', { recursive: true });",
            "writeFileSync('dist/add.js', '// built\\n' + readFileSync('src/add.js', 'utf8'));",
            "console.log('built dist/add.js');",
            '',
          ].join('\n'),
        });
        const { step, finish } = await setup('npm');
        const tested = await step('npm test');
        expect(tested.stdout).toMatch(/^[#ℹ] pass 1$/m); // node 20 prints TAP, node 24 its spec reporter
        expect(tested.stdout).toMatch(/^[#ℹ] fail 0$/m);
        const built = await step('npm run build');
        expect(built.stdout).toMatch(/built dist\/add\.js/);
        expect(readFileSync(join(dir, 'dist/add.js'), 'utf8')).toMatch(/^\/\/ built\nexports\.add/);
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    const pytest = spawnSync('python3', ['-m', 'pytest', '--version'], { encoding: 'utf8' });
    const hasPytest = pytest.status === 0;
    it.skipIf(!hasPytest && !process.env.CI)(
      'pytest runs a test suite and writes .pytest_cache and __pycache__ in the workspace',
      async () => {
        if (!hasPytest)
          throw new Error(
            `python3 -m pytest is not available on this CI machine (exit ${pytest.status}): ${pytest.stderr || pytest.error?.message}`,
          );
        write({
          'pyproject.toml': '[tool.pytest.ini_options]\npythonpath = ["src"]\ntestpaths = ["tests"]\n',
          'src/calc.py': 'def add(a, b):\n    return a + b\n',
          'tests/test_calc.py': 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n',
        });
        // The machine's environment may set it (this one does); a developer's shell does not, and pytest writes __pycache__.
        delete process.env.PYTHONDONTWRITEBYTECODE;
        const { step, finish } = await setup('pytest');
        const result = await step('python3 -m pytest -q');
        expect(result.stdout).toMatch(/1 passed/);
        expect(existsSync(join(dir, '.pytest_cache'))).toBe(true);
        expect(readdirSync(join(dir, 'tests/__pycache__')).some((f) => f.startsWith('test_calc.'))).toBe(
          true,
        );
        expect(readdirSync(join(dir, 'src/__pycache__')).some((f) => f.startsWith('calc.'))).toBe(true);
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      'a venv, a wheel of a local library and an editable install of the project, all offline',
      async () => {
        // Tiny in-tree PEP 517 backend: wheels from the standard library alone, so nothing is fetched.
        const backend = [
          '"""A PEP 517 build backend in the tree: wheels built offline with the standard library alone."""',
          'import base64, hashlib, os, tomllib, zipfile',
          '',
          '',
          'def _project():',
          "    with open('pyproject.toml', 'rb') as f:",
          "        return tomllib.load(f)['project']",
          '',
          '',
          'def _digest(data):',
          "    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()",
          '',
          '',
          'def _wheel(directory, files):',
          '    p = _project()',
          "    name, version = p['name'], p['version']",
          "    info = f'{name}-{version}.dist-info'",
          "    meta = f'Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n'",
          "    meta += ''.join(f'Requires-Dist: {d}\\n' for d in p.get('dependencies', []))",
          "    files[f'{info}/METADATA'] = meta.encode()",
          "    files[f'{info}/WHEEL'] = b'Wheel-Version: 1.0\\nGenerator: backend.py\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'",
          "    record = ''.join(f'{path},{_digest(data)},{len(data)}\\n' for path, data in files.items())",
          "    files[f'{info}/RECORD'] = (record + f'{info}/RECORD,,\\n').encode()",
          "    filename = f'{name}-{version}-py3-none-any.whl'",
          "    with zipfile.ZipFile(os.path.join(directory, filename), 'w') as whl:",
          '        for path, data in files.items():',
          '            whl.writestr(path, data)',
          '    return filename',
          '',
          '',
          'def get_requires_for_build_wheel(config_settings=None):',
          '    return []',
          '',
          '',
          'def get_requires_for_build_editable(config_settings=None):',
          '    return []',
          '',
          '',
          'def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):',
          '    files = {}',
          "    for root, _, names in os.walk('src'):",
          '        for n in names:',
          "            if n.endswith('.py'):",
          "                with open(os.path.join(root, n), 'rb') as f:",
          "                    files[os.path.relpath(os.path.join(root, n), 'src')] = f.read()",
          '    return _wheel(wheel_directory, files)',
          '',
          '',
          'def build_editable(wheel_directory, config_settings=None, metadata_directory=None):',
          '    pth = f\'{os.path.abspath("src")}\\n\'.encode()',
          '    return _wheel(wheel_directory, {f\'_{_project()["name"]}_editable.pth\': pth})',
          '',
        ].join('\n');
        const pyproject = (name: string, version: string, deps: string[]) =>
          [
            '[build-system]',
            'requires = []',
            'build-backend = "backend"',
            'backend-path = ["."]',
            '',
            '[project]',
            `name = "${name}"`,
            `version = "${version}"`,
            `dependencies = [${deps.map((d) => `"${d}"`).join(', ')}]`,
            '',
          ].join('\n');
        write({
          'backend.py': backend,
          'pyproject.toml': pyproject('app', '0.1.0', ['greetlib']),
          'src/app/__init__.py': 'from greetlib import greet\n\n\ndef main():\n    return greet("app")\n',
          'lib/backend.py': backend,
          'lib/pyproject.toml': pyproject('greetlib', '1.0.0', []),
          'lib/src/greetlib/__init__.py': 'def greet(name):\n    return f"hello, {name}"\n',
        });
        mkdirSync(join(dir, 'wheels'));
        const { step, finish } = await setup('pip');
        // python3 is pyenv's here; its venv bundles pip (ensurepip), so nothing is downloaded.
        await step('python3 -m venv .venv');
        expect(existsSync(join(dir, '.venv/bin/pip'))).toBe(true);
        await step('.venv/bin/pip wheel --no-index --no-build-isolation ./lib -w wheels');
        expect(readdirSync(join(dir, 'wheels'))).toEqual(['greetlib-1.0.0-py3-none-any.whl']);
        const installed = await step('.venv/bin/pip install --no-index --find-links ./wheels -e .');
        expect(installed.stdout).toMatch(/Successfully installed app-0\.1\.0 greetlib-1\.0\.0/);
        const ran = await step(
          '.venv/bin/python -c "import app, greetlib; print(app.main()); print(app.__file__); print(greetlib.__file__)"',
        );
        expect(ran.stdout.trim().split('\n')).toEqual([
          'hello, app',
          // editable: the project's own source; the library: installed into the venv
          expect.stringMatching(/\/src\/app\/__init__\.py$/),
          expect.stringMatching(/\/\.venv\/lib\/python3\.\d+\/site-packages\/greetlib\/__init__\.py$/),
        ]);
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      'make compiles a C program with cc and runs it',
      async () => {
        write({
          'hello.c': '#include <stdio.h>\nint main(void) { printf("hello from C\\n"); return 0; }\n',
          Makefile: [
            'CC ?= cc',
            '',
            'hello: hello.c',
            '\t$(CC) -O1 -o $@ $<',
            '',
            'run: hello',
            '\t./hello',
            '',
            '.PHONY: run',
            '',
          ].join('\n'),
        });
        const { step, finish } = await setup('make');
        const made = await step('make run');
        expect(made.stdout).toMatch(/cc -O1 -o hello hello\.c/);
        expect(made.stdout).toMatch(/^hello from C$/m);
        expect(existsSync(join(dir, 'hello'))).toBe(true);
        const again = await step('make');
        expect(again.stdout).toMatch(/'hello' is up to date/);
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      'sed -i a source file, commit it, and branch, stash and tag in the repository',
      async () => {
        write({ 'src/greet.js': "module.exports = () => 'hello';\n", 'README.md': '# greet\n' });
        const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });
        git('init', '-q', '-b', 'main');
        git('config', 'user.name', 'Conch Test');
        git('config', 'user.email', 'conch-test@example.invalid');
        git('add', '-A');
        git('commit', '-q', '-m', 'initial');
        const { step, finish } = await setup('git');
        await step("sed -i 's/hello/goodbye/' src/greet.js");
        expect(readFileSync(join(dir, 'src/greet.js'), 'utf8')).toBe("module.exports = () => 'goodbye';\n");
        await step('git add -A && git commit -m x');
        const log = await step('git log --oneline');
        expect(log.stdout.trim().split('\n')).toEqual([
          expect.stringMatching(/^[0-9a-f]+ x$/),
          expect.stringMatching(/^[0-9a-f]+ initial$/),
        ]);
        expect((await step('git status --short')).stdout).toBe('');
        await step('git checkout -b feature');
        expect((await step('git branch --show-current')).stdout.trim()).toBe('feature');
        await step('echo "more" >> README.md');
        await step('git stash');
        expect(readFileSync(join(dir, 'README.md'), 'utf8')).toBe('# greet\n');
        expect((await step('git stash list')).stdout).toMatch(/^stash@\{0\}: WIP on feature: /);
        await step('git stash pop');
        expect(readFileSync(join(dir, 'README.md'), 'utf8')).toBe('# greet\nmore\n');
        await step('git tag v1.0.0');
        expect((await step('git tag')).stdout.trim()).toBe('v1.0.0');
        expect(git('rev-parse', 'v1.0.0')).toBe(git('rev-parse', 'main'));
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      'a dev server started in the background answers a later command in the same sandbox',
      async () => {
        write({
          'server.js': [
            "const http = require('node:http');",
            "const server = http.createServer((req, res) => res.end('hello from the dev server\\n'));",
            "server.listen(0, '127.0.0.1', () => console.log(`listening on ${server.address().port}`));",
            '',
          ].join('\n'),
        });
        const { tool, step, finish, decisions } = await setup('dev server');
        const started = await tool('cli_based_tool', { command: 'node server.js', background: true });
        expect(started).toMatchObject({ status: 'running' });
        const taskId = started.background_task_id as string;
        const ready = await tool('check_background_task', {
          task_id: taskId,
          wait_for: 'listening on',
          wait_seconds: 60,
        });
        expect(ready, JSON.stringify(ready)).toMatchObject({ status: 'running', wait_for_matched: true });
        const port = Number(/listening on (\d+)/.exec(ready.matched_line as string)![1]);
        expect(port).toBeGreaterThan(0);
        const curled = await step(`curl -s --max-time 60 http://127.0.0.1:${port}/`);
        expect(curled.stdout).toBe('hello from the dev server\n');
        const fetched = await step(
          `node -e "fetch('http://127.0.0.1:${port}/').then(r => r.text()).then(t => process.stdout.write(t))"`,
        );
        expect(fetched.stdout).toBe('hello from the dev server\n');
        const cancelled = await tool('cancel_background_task', { task_id: taskId });
        expect(cancelled).toMatchObject({ status: 'cancelled' });
        expect(decisions[0]).toMatchObject({ command: 'node server.js' });
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      'npm install of a packed local tarball writes only to the workspace and the sandbox cache',
      async () => {
        write({
          'package.json': JSON.stringify({ name: 'app', version: '1.0.0', private: true }, null, 2),
          'packages/x/package.json': JSON.stringify(
            { name: 'x', version: '1.0.0', main: 'index.js' },
            null,
            2,
          ),
          'packages/x/index.js': "module.exports = 'x works';\n",
        });
        const { step, finish } = await setup('npm cache');
        const packed = await step('npm pack ./packages/x');
        expect(packed.stdout.trim()).toBe('x-1.0.0.tgz');
        expect(existsSync(join(dir, 'x-1.0.0.tgz'))).toBe(true);
        await step('npm install ./x-1.0.0.tgz --offline');
        expect(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))).toMatchObject({
          dependencies: { x: 'file:x-1.0.0.tgz' },
        });
        expect(existsSync(join(dir, 'package-lock.json'))).toBe(true);
        const ran = await step(`node -e "console.log(require('x'))"`);
        expect(ran.stdout).toBe('x works\n');
        // npm's cache (and its logs) went to the sandbox-private cache, not ~/.npm.
        const cache = join(home, SANDBOX_CACHE);
        const [hash] = readdirSync(cache);
        const cached = listTree(join(cache, hash!));
        expect(cached.some((f) => f.startsWith('npm/_cacache/content-v2/'))).toBe(true);
        expect(cached.some((f) => /^npm\/_logs\/.*-debug-0\.log$/.test(f))).toBe(true);
        expect(existsSync(join(home, '.npm'))).toBe(false);
        finish();
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      'a dev server stays reachable after the sandbox policy changes (git init in the workspace)',
      async () => {
        // A new .git changes the mounts the gate asks for, but while anything runs in the sandbox
        // later commands join it (one network namespace): the server stays on their loopback.
        write({
          'server.js': [
            "const http = require('node:http');",
            "const server = http.createServer((req, res) => res.end('hello from the dev server\\n'));",
            "server.listen(0, '127.0.0.1', () => console.log(`listening on ${server.address().port}`));",
            '',
          ].join('\n'),
        });
        const { tool, step } = await setup('dev server after git init');
        const started = await tool('cli_based_tool', { command: 'node server.js', background: true });
        const taskId = started.background_task_id as string;
        try {
          const ready = await tool('check_background_task', {
            task_id: taskId,
            wait_for: 'listening on',
            wait_seconds: 60,
          });
          expect(ready).toMatchObject({ status: 'running', wait_for_matched: true });
          const port = Number(/listening on (\d+)/.exec(ready.matched_line as string)![1]);
          await step('git init -q');
          const curled = await step(`curl -sS --max-time 60 http://127.0.0.1:${port}/`);
          expect(curled.stdout).toBe('hello from the dev server\n');
        } finally {
          await tool('cancel_background_task', { task_id: taskId });
        }
      },
      WORKFLOW_TIMEOUT,
    );

    it(
      "git config on the repository's own config is reported as a refused write, naming .git/config",
      async () => {
        // .git/config is read-only by design (core.hooksPath, core.fsmonitor run code); git writes it
        // by renaming config.lock over the mount point, which fails with EBUSY: reported as a
        // refused write, with the per-command alternative (git -c …) in the message.
        const { step, tool } = await setup('git config');
        await step('git init -q');
        const result = await tool('cli_based_tool', {
          command: 'git config user.email conch-test@example.invalid',
          background: false,
          timeout: STEP_TIMEOUT,
        });
        expect(result.stderr).toMatch(/could not write config file \.git\/config/);
        expect(result).toMatchObject({
          error_code: 'SANDBOX_REFUSED_WRITE',
          refused_path: expect.stringMatching(/\.git\/config(\.lock)?$/),
        });
        expect(result.error).toMatch(/git -c user\.name/);
      },
      WORKFLOW_TIMEOUT,
    );
  },
);
