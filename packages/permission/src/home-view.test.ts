// Invariant: in the default workspace-write sandbox the home directory (and every other home) reads as empty but for what toolchains need — a planted fake of every credential store, another project's files and another workspace's output files stay hidden by every route (cat, grep -r, find -exec cat, python, node, tar), home config files keep their settings without their credentials, a .env file git tracks unchanged is an ordinary file (git commit -a, add -A, stash, diff work), and the real toolchains install, build and test a project offline without a prompt.
import 'reflect-metadata';
import { cliPlugin, definePluginFromTemplates } from '@conch/cli';
import { z } from 'zod';
import { PluginRegistry, TOKENS, type ApprovalRequest, type ToolResult } from '@conch/core';
import { defaultOutputDir, findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

/** Seconds one command may take: these machines are slow and loaded; nothing here is a timing goal. */
const STEP_TIMEOUT = 600;
const TEST_TIMEOUT = 20 * 60_000;

type Result = ToolResult & Record<string, any>;

const unique = (label: string) => `${label}-${randomBytes(12).toString('hex')}`;

let ws: string;
let home: string;
const registries: PluginRegistry[] = [];
const saved: Record<string, string | undefined> = {};

/**
 * Credential stores and private files of the user, by path under HOME: each must read as hidden.
 * A store added here and not closed by the policy fails the test. `{}` is replaced by a token.
 */
const STORES: Record<string, string> = {
  '.ssh/id_ed25519': '-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n',
  '.aws/credentials': '[default]\naws_secret_access_key = {}\n',
  '.netrc': 'machine example.com login me password {}\n',
  '.docker/config.json': '{"auths":{"x":{"auth":"{}"}}}\n',
  '.kube/config': 'users:\n- name: x\n  user:\n    token: {}\n',
  '.config/gh/hosts.yml': 'github.com:\n  oauth_token: {}\n',
  '.pgpass': 'db:5432:app:app:{}\n',
  '.my.cnf': '[client]\npassword={}\n',
  '.vault-token': '{}\n',
  '.terraform.d/credentials.tfrc.json': '{"credentials":{"app.terraform.io":{"token":"{}"}}}\n',
  '.config/rclone/rclone.conf': '[s3]\nsecret_access_key = {}\n',
  '.s3cfg': '[default]\nsecret_key = {}\n',
  '.m2/settings-security.xml': '<settingsSecurity><master>{}</master></settingsSecurity>\n',
  '.claude/.credentials.json': '{"claudeAiOauth":{"accessToken":"{}"}}\n',
  '.codex/auth.json': '{"OPENAI_API_KEY":"{}"}\n',
  '.config/github-copilot/apps.json': '{"github.com":{"oauth_token":"{}"}}\n',
  '.gemini/oauth_creds.json': '{"refresh_token":"{}"}\n',
  '.local/share/opencode/auth.json': '{"anthropic":{"key":"{}"}}\n',
  '.cursor/mcp.json': '{"mcpServers":{"x":{"env":{"KEY":"{}"}}}}\n',
  '.bash_history': 'curl -H "Authorization: Bearer {}" https://api\n',
  '.zsh_history': ': 1700000000:0;export TOKEN={}\n',
  '.python_history': 'openai.api_key = "{}"\n',
  '.psql_history': "ALTER USER app PASSWORD '{}';\n",
  '.config/google-chrome/Default/Cookies': 'SQLite format 3\0session={}\n',
  '.mozilla/firefox/x.default/logins.json': '{"logins":[{"encryptedPassword":"{}"}]}\n',
  // another project of the same user
  'src/other-app/.env': 'DATABASE_URL=postgres://app:{}@db/prod\n',
  'src/other-app/.git/config': '[remote "origin"]\n\turl = https://x-access-token:{}@github.com/me/other\n',
  'src/other-app/config/master.key': '{}\n',
  // another workspace's output file
  '.cache/conch/output/ws-0000000000000000/other-session.out': 'printed secret {}\n',
  // stores nobody listed
  '.config/brand-new-agent/token.json': '{"token":"{}"}\n',
  'notes/passwords.txt': 'bank: {}\n',
  // stores inside a toolchain directory the sandbox shows: the deny-list's layer
  '.cargo/credentials.toml': '[registry]\ntoken = "{}"\n',
  '.gem/credentials': '---\n:rubygems_api_key: {}\n',
};

/** Config files shown with their settings and without their credentials: path → [text, setting kept]. */
const CONFIGS: Record<string, [string, string]> = {
  '.npmrc': [
    '@corp:registry=https://npm.corp.example/\n//npm.corp.example/:_authToken={}\n',
    '@corp:registry=https://npm.corp.example/',
  ],
  '.yarnrc.yml': [
    'npmScopes:\n  corp:\n    npmRegistryServer: "https://npm.corp.example"\n    npmAuthToken: "{}"\n',
    'npmRegistryServer: "https://npm.corp.example"',
  ],
  '.config/pip/pip.conf': [
    '[global]\nindex-url = https://build:{}@pypi.corp.example/simple\n',
    'index-url = https://pypi.corp.example/simple',
  ],
  '.gitconfig': [
    '[user]\n\tname = Home User\n\temail = home@example.invalid\n[credential]\n\thelper = store --file /x/{}\n[url "https://x-access-token:{}@github.com/"]\n\tinsteadOf = https://github.com/\n',
    'name = Home User',
  ],
  '.bashrc': [
    'export PATH="$HOME/.local/bin:$PATH"\nexport SERVICE_TOKEN={}\n',
    'export PATH="$HOME/.local/bin:$PATH"',
  ],
  '.m2/settings.xml': [
    '<settings><servers><server><id>corp</id><username>me</username><password>{}</password></server></servers><mirrors><mirror><id>corp</id><url>https://maven.corp.example</url><mirrorOf>*</mirrorOf></mirror></mirrors></settings>\n',
    '<url>https://maven.corp.example</url>',
  ],
  '.gradle/gradle.properties': [
    'org.gradle.jvmargs=-Xmx2g\ncorpRepoPassword={}\n',
    'org.gradle.jvmargs=-Xmx2g',
  ],
};

/** Every token planted, by the file it is in (relative to HOME). */
let tokens: Map<string, string>;

function plant(root: string, rel: string, text: string): void {
  const path = join(root, rel);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-home-view-ws-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-home-view-home-')));
  for (const name of ['HOME', 'RUSTUP_HOME', 'CARGO_HOME', 'GOTOOLCHAIN', 'GOFLAGS'])
    saved[name] = process.env[name];
  process.env.HOME = home;
  // npx and pnpm point npm at the real user's config; this test's user is the throwaway home's.
  for (const name of Object.keys(process.env))
    if (/^npm_config_(userconfig|globalconfig)$/i.test(name)) {
      saved[name] = process.env[name];
      delete process.env[name];
    }
  tokens = new Map();
  for (const [rel, text] of [
    ...Object.entries(STORES),
    ...Object.entries(CONFIGS).map(([r, [t]]) => [r, t] as const),
  ]) {
    const token = unique(
      rel
        .replace(/[^a-z]+/gi, '-')
        .replace(/^-|-$/g, '')
        .toLowerCase(),
    );
    tokens.set(rel, token);
    plant(home, rel, text.replaceAll('{}', token));
  }
  // A toolchain in the home: a user-installed tool and a version manager's node.
  plant(home, '.local/bin/hello-tool', '#!/bin/sh\necho hello-from-local-bin\n');
  execFileSync('chmod', ['+x', join(home, '.local/bin/hello-tool')]);
  mkdirSync(join(home, '.nvm/versions/node/v0/bin'), { recursive: true });
  symlinkSync(process.execPath, join(home, '.nvm/versions/node/v0/bin/node'));
});
afterEach(async () => {
  for (const registry of registries.splice(0)) {
    const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
    await registry.dispose();
    if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
  }
  rmSync(ws, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

async function setup(permission: Record<string, unknown> = {}) {
  const asked: ApprovalRequest[] = [];
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
  registries.push(registry);
  await registry.expose('permission', {
    ...permission,
    approve: async (request: ApprovalRequest) => {
      asked.push(request);
      return 'deny' as const;
    },
  });
  await registry.expose('cli', {});
  const run = async (command: string, options: Record<string, unknown> = {}) =>
    (await registry.execute('cli_based_tool', {
      command,
      background: false,
      timeout: STEP_TIMEOUT,
      ...options,
    })) as Result;
  return { registry, run, asked };
}

/** What a result shows the model: stdout, stderr, the error and the spilled output file. */
function shown(result: Result): string {
  const file =
    typeof result.output_file === 'string' && existsSync(result.output_file)
      ? readFileSync(result.output_file, 'latin1')
      : '';
  return `${result.stdout ?? ''}\n${result.stderr ?? ''}\n${result.error ?? ''}\n${file}`;
}

function describeResult(command: string, result: Result): string {
  return `${command}\n${JSON.stringify(
    {
      returncode: result.returncode,
      error_code: result.error_code,
      error: result.error,
      sandbox: result.sandbox,
      stdout: result.stdout?.slice(0, 3000),
      stderr: result.stderr?.slice(0, 3000),
    },
    null,
    1,
  )}`;
}

/** git on the host with no user or system config. */
function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
  });
}

const onPath = (program: string) =>
  (process.env.PATH ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, program)));

describe.runIf(findBwrap() || process.env.CI)('the home directory in the default sandbox', () => {
  it(
    'every planted store, another project and another workspace’s output read as hidden by every route',
    async () => {
      const { run, asked } = await setup();
      const paths = Object.keys(STORES).map((rel) => `~/${rel}`);
      const routes = [
        `for f in ${paths.join(' ')}; do cat "$f"; done 2>&1`,
        'grep -ra . ~ 2>&1',
        'find ~ -type f -exec cat {} + 2>&1',
        `python3 -c 'import os
for root, dirs, files in os.walk(os.path.expanduser("~")):
    for f in files:
        try:
            print(open(os.path.join(root, f), "rb").read().decode("latin1"))
        except OSError as e:
            print(e)'`,
        `node -e 'const fs = require("fs"), p = require("path");
const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const f = p.join(d, e.name);
  try { if (e.isDirectory()) walk(f); else console.log(fs.readFileSync(f, "latin1")); } catch (err) { console.log(err.message); } } };
walk(process.env.HOME)'`,
        "tar cf - ~ 2>&1 | tr -c '[:print:]\\n' .",
        'ls -laR ~ /home /root 2>&1',
      ];
      let sawSettings = false;
      for (const command of routes) {
        const result = await run(command);
        expect(result.sandbox, describeResult(command, result)).toBe('workspace-write');
        const text = shown(result);
        for (const [rel, token] of tokens) expect(text, `${rel} by ${command}`).not.toContain(token);
        if (command.startsWith('grep')) {
          // The route does read the home: what the sandbox shows is there.
          for (const [, setting] of Object.values(CONFIGS)) expect(text, setting).toContain(setting);
          sawSettings = true;
        }
      }
      expect(sawSettings).toBe(true);
      // A direct read of a path that exists outside says why it is not there.
      const other = await run('cat ~/src/other-app/.env');
      expect(other.returncode, describeResult('cat other', other)).not.toBe(0);
      expect(other.error_code, describeResult('cat other', other)).toBe('SECRET_HIDDEN');
      expect(other.error).toContain('readableRoots');
      // The machine's own secrets, readable by root outside.
      if (process.getuid?.() === 0 && existsSync('/etc/shadow')) {
        const shadow = await run('cat /etc/shadow; head -c 200 /etc/ssh/ssh_host_ed25519_key 2>&1');
        const real = readFileSync('/etc/shadow', 'utf8');
        const rootLine = real.split('\n').find((l) => l.startsWith('root:'))!;
        expect(shown(shadow)).not.toContain(rootLine);
        expect(shown(shadow)).not.toContain('PRIVATE KEY');
      }
      expect(asked).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    'home configs keep their settings, not their credentials; toolchain directories run',
    async () => {
      const { run, asked } = await setup();
      const files = Object.keys(CONFIGS).map((rel) => `~/${rel}`);
      const cat = await run(`cat ${files.join(' ')}`);
      expect(cat.returncode, describeResult('cat configs', cat)).toBe(0);
      for (const [rel, [, setting]] of Object.entries(CONFIGS)) {
        expect(cat.stdout, rel).toContain(setting);
        expect(shown(cat), rel).not.toContain(tokens.get(rel)!);
      }
      // The tools read them as they would the originals: a scoped registry is honoured, the
      // identity is git's, and nothing warns about an unreadable file.
      const npm = await run('npm config get @corp:registry');
      expect(npm.stdout.trim(), describeResult('npm', npm)).toBe('https://npm.corp.example/');
      expect(npm.error_code, describeResult('npm', npm)).toBeUndefined();
      const token = await run('npm config get //npm.corp.example/:_authToken');
      expect(shown(token)).not.toContain(tokens.get('.npmrc')!);
      const gitName = await run('git config --global user.name');
      expect(gitName.stdout.trim(), describeResult('git', gitName)).toBe('Home User');
      const pip = await run('python3 -m pip config list');
      expect(pip.stdout, describeResult('pip', pip)).toContain('https://pypi.corp.example/simple');
      expect(shown(pip)).not.toContain(tokens.get('.config/pip/pip.conf')!);
      // A toolchain the user installed in the home runs.
      const tools = await run(
        '~/.local/bin/hello-tool && ~/.nvm/versions/node/v0/bin/node -e "console.log(6*7)"',
      );
      expect(tools.returncode, describeResult('tools', tools)).toBe(0);
      expect(tools.stdout).toContain('hello-from-local-bin');
      expect(tools.stdout).toContain('42');
      expect(asked).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    'the real toolchains install, build and test a project offline without a prompt',
    async () => {
      // node + npm: a dependency from a local tarball; python: a venv and a local wheel; git; make + cc.
      plant(ws, 'dep/package.json', '{"name":"dep","version":"1.0.0","main":"index.js"}\n');
      plant(ws, 'dep/index.js', 'module.exports = () => 42;\n');
      plant(ws, 'app/package.json', '{"name":"app","version":"1.0.0","scripts":{"test":"node test.js"}}\n');
      plant(
        ws,
        'app/test.js',
        'if (require("dep")() !== 42) process.exit(1);\nconsole.log("node-tests-pass");\n',
      );
      mkdirSync(join(ws, 'wheels'));
      execFileSync('python3', [
        '-c',
        `import zipfile
w = zipfile.ZipFile("${join(ws, 'wheels', 'pkgx-1.0-py3-none-any.whl')}", "w")
w.writestr("pkgx/__init__.py", "def f():\\n    return 42\\n")
w.writestr("pkgx-1.0.dist-info/METADATA", "Metadata-Version: 2.1\\nName: pkgx\\nVersion: 1.0\\n")
w.writestr("pkgx-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
w.writestr("pkgx-1.0.dist-info/RECORD", "pkgx/__init__.py,,\\npkgx-1.0.dist-info/METADATA,,\\npkgx-1.0.dist-info/WHEEL,,\\npkgx-1.0.dist-info/RECORD,,\\n")
w.close()`,
      ]);
      plant(
        ws,
        'py/test_x.py',
        'import unittest, pkgx\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(pkgx.f(), 42)\n',
      );
      plant(ws, 'c/hello.c', '#include <stdio.h>\nint main(void) { puts("c-built"); return 0; }\n');
      plant(ws, 'c/Makefile', 'hello: hello.c\n\tcc -o hello hello.c\n');
      const steps = [
        'cd dep && npm pack --silent && cd ../app && npm install ../dep/dep-1.0.0.tgz --offline --no-audit --no-fund && npm test',
        'python3 -m venv .venv && .venv/bin/python -m pip install -q --no-index --find-links wheels pkgx && cd py && ../.venv/bin/python -m unittest -q',
        'git init -q repo && cd repo && echo a > a.txt && git add a.txt && git commit -qm first && git log --format=%an',
        'make -C c && ./c/hello',
      ];
      const expected = ['node-tests-pass', 'OK', 'Home User', 'c-built'];
      // cargo and go where the machine has them (a home-installed rustup toolchain included).
      const cargo = spawnSync('sh', ['-c', 'command -v cargo'], { encoding: 'utf8' }).stdout.trim();
      if (cargo) {
        const cargoHome = dirname(dirname(realpathSync(cargo)));
        if (existsSync(join(dirname(cargoHome), '.rustup'))) {
          process.env.RUSTUP_HOME = join(dirname(cargoHome), '.rustup');
          process.env.CARGO_HOME = cargoHome;
        }
        plant(ws, 'cr/Cargo.toml', '[package]\nname = "cr"\nversion = "0.1.0"\nedition = "2021"\n');
        plant(
          ws,
          'cr/src/main.rs',
          'fn main() { println!("rust-built"); }\n#[test]\nfn t() { assert_eq!(2, 1 + 1); }\n',
        );
        steps.push('cd cr && cargo test --offline -q 2>&1 && cargo run --offline -q');
        expected.push('rust-built');
      }
      if (onPath('go')) {
        process.env.GOTOOLCHAIN = 'local';
        plant(ws, 'gp/go.mod', 'module example.com/gp\n\ngo 1.19\n');
        plant(ws, 'gp/main.go', 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("go-built") }\n');
        plant(ws, 'gp/main_test.go', 'package main\n\nimport "testing"\n\nfunc TestX(t *testing.T) {}\n');
        steps.push('cd gp && go test ./... && go run .');
        expected.push('go-built');
      }
      const { run, asked } = await setup();
      for (const [i, command] of steps.entries()) {
        const result = await run(command);
        expect(result.returncode, describeResult(command, result)).toBe(0);
        expect(result.error_code, describeResult(command, result)).toBeUndefined();
        expect(`${result.stdout}${result.stderr}`, describeResult(command, result)).toContain(expected[i]);
      }
      expect(asked).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    'a .env file git tracks unchanged is ordinary; changed since, it is hidden again',
    async () => {
      const envToken = unique('tracked-env');
      plant(ws, '.env', 'FLASK_APP=app.py\n');
      plant(ws, '.env.example', 'API_KEY=\n');
      plant(ws, 'app.py', 'print("v1")\n');
      git(ws, 'init', '-q');
      git(ws, 'add', '-A');
      git(ws, 'commit', '-qm', 'first');
      const { run, asked } = await setup();
      const read = await run('cat .env .env.example && python3 -c "print(open(\'.env\').read())"');
      expect(read.returncode, describeResult('read', read)).toBe(0);
      expect(read.stdout).toContain('FLASK_APP=app.py');
      const steps = [
        'git status --porcelain',
        'echo \'print("v2")\' > app.py && git -c user.name=a -c user.email=a@x commit -qam second',
        'echo new > new.txt && git add -A && git -c user.name=a -c user.email=a@x commit -qm third',
        'echo \'print("v3")\' > app.py && git stash -q && git stash pop -q && git diff --stat',
        'git diff HEAD --stat && git log --oneline | wc -l',
      ];
      for (const command of steps) {
        const result = await run(command);
        expect(result.returncode, describeResult(command, result)).toBe(0);
        expect(result.error_code, describeResult(command, result)).toBeUndefined();
      }
      // The user adds a secret to it outside (in place): the sandbox never shows it.
      appendFileSync(join(ws, '.env'), `SECRET_KEY=${envToken}\n`);
      const after = await run('cat .env');
      expect(shown(after)).not.toContain(envToken);
      const { run: fresh } = await setup();
      const again = await fresh('cat .env');
      expect(shown(again)).not.toContain(envToken);
      expect(again.error_code, describeResult('cat .env', again)).toBe('SECRET_HIDDEN');
      expect(asked).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    "this workspace's output files are readable inside; another workspace's are not",
    async () => {
      const { run } = await setup();
      const big = await run('seq 1 200000');
      expect(typeof big.output_file, describeResult('seq', big)).toBe('string');
      expect(big.output_file.startsWith(defaultOutputDir(process.env, ws))).toBe(true);
      const tail = await run(`tail -n 1 '${big.output_file}'`);
      expect(tail.stdout.trim(), describeResult('tail', tail)).toBe('200000');
      const others = await run(
        `ls ${join(defaultOutputDir(process.env), 'ws-0000000000000000')} 2>&1; cat ~/.cache/conch/output/ws-0000000000000000/* 2>&1`,
      );
      expect(shown(others)).not.toContain(
        tokens.get('.cache/conch/output/ws-0000000000000000/other-session.out')!,
      );
    },
    TEST_TIMEOUT,
  );

  it(
    'secrets.openHome and readableRoots open what the host chooses; the deny-list still holds',
    async () => {
      const { run } = await setup({ readableRoots: ['~/src/other-app/config'] });
      const one = await run('cat ~/src/other-app/config/master.key; cat ~/notes/passwords.txt 2>&1');
      expect(one.stdout).toContain(tokens.get('src/other-app/config/master.key')!);
      expect(shown(one)).not.toContain(tokens.get('notes/passwords.txt')!);
      const { run: open } = await setup({ secrets: { openHome: true } });
      const all = await open('cat ~/notes/passwords.txt; cat ~/.ssh/id_ed25519 ~/.codex/auth.json 2>&1');
      expect(all.stdout).toContain(tokens.get('notes/passwords.txt')!);
      expect(shown(all)).not.toContain(tokens.get('.ssh/id_ed25519')!);
      expect(shown(all)).not.toContain(tokens.get('.codex/auth.json')!);
    },
    TEST_TIMEOUT,
  );

  it(
    "a command template's env_vars with ${VAR} reach its command in the sandbox, credential-shaped or not",
    async () => {
      const key = `sk-proj-${randomBytes(16).toString('hex')}`;
      saved.CONCH_SEED_API_KEY_VAR = process.env.CONCH_SEED_API_KEY_VAR;
      process.env.CONCH_SEED_API_KEY_VAR = key;
      const templates = definePluginFromTemplates({
        name: 'seed-003',
        version: '0.0.0',
        tools: [
          {
            name: 'call_api',
            description: 'uses an API key the template author chose to pass',
            inputSchema: z.strictObject({}),
            env_vars: {
              API_KEY: '${CONCH_SEED_API_KEY_VAR}',
              OTHER_SECRET_TOKEN: 'literal-${CONCH_SEED_API_KEY_VAR}',
            },
            commands: [{ command: 'printf "%s|%s" "$API_KEY" "$OTHER_SECRET_TOKEN"' }],
          },
        ],
      });
      const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin, templates] });
      registries.push(registry);
      await registry.expose('permission', { approve: async () => 'deny' as const });
      await registry.expose('cli', {});
      await registry.expose('seed-003', { variablesFromEnv: ['CONCH_SEED_API_KEY_VAR'] });
      const result = (await registry.execute('call_api', {})) as Result;
      expect(result.stdout, JSON.stringify(result)).toBe(`${key}|literal-${key}`);
      expect(result.sandbox, JSON.stringify(result)).toBe('workspace-write');
      // The host's own variable is still not in a plain command's environment.
      const { run } = await setup();
      const plain = await run('env');
      expect(plain.stdout).not.toContain(key);
    },
    TEST_TIMEOUT,
  );
});
