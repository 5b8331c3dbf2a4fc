// Invariant: in the default workspace-write sandbox, credentials never reach a command — no variable whose name looks like one is visible by any spelling (env, /proc, ps, a background task), and ~/.ssh, ~/.aws, ~/.netrc, ~/.npmrc's token and the workspace's .env files read as nothing by any route (cat, open, cp, tar, git) — unless the host keeps a variable (secrets.keepEnv) or exposes .env files (secrets.exposeDotEnv, still read-only).
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ApprovalRequest, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  linkSync,
  symlinkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { once } from 'node:events';
import { watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { inflateSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

/** Seconds one command may take: these machines are slow and loaded; nothing here is a timing goal. */
const STEP_TIMEOUT = 600;
/** Milliseconds one test may take (vitest's limit). */
const TEST_TIMEOUT = 20 * 60_000;

type Result = ToolResult & Record<string, any>;

const unique = (label: string) => `${label}-${randomBytes(12).toString('hex')}`;

/** Variables that look like credentials, each with a value found nowhere else. */
const SECRET_VARS = [
  'CONCH_TEST_API_TOKEN',
  'CONCH_TEST_SECRET',
  'CONCH_TEST_PASSWORD',
  'CONCH_TEST_SIGNING_KEY',
  'AWS_CONCH_TEST_ACCESS',
  'GITHUB_CONCH_TEST',
  'CONCH_TEST_DATABASE_URL',
] as const;

/** Variables whose names miss every pattern and whose values are credentials. */
const VALUE_SECRET_VARS = [
  'CONCH_VALUE_HOOK_URL',
  'CONCH_VALUE_MONGODB_URI',
  'CONCH_VALUE_AUTH',
  'CONCH_VALUE_SMTP_PASS',
] as const;

let dir: string;
let home: string;
let secrets: Record<string, string>;
/** File path (relative to HOME as `~/…`, or to the workspace) → its secret contents. */
let secretFiles: Record<string, string>;
const registries: PluginRegistry[] = [];
const saved: Record<string, string | undefined> = {};

function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-secrets-'));
  home = mkdtempSync(join(tmpdir(), 'conch-secrets-home-'));
  for (const name of ['HOME', ...SECRET_VARS, ...VALUE_SECRET_VARS, 'CONCH_TEST_PLAIN'])
    saved[name] = process.env[name];
  process.env.HOME = home;
  secrets = Object.fromEntries(SECRET_VARS.map((name) => [name, unique(name.toLowerCase())]));
  // Names no pattern matches, values that give them away (judged by value).
  const hex = () => randomBytes(16).toString('hex');
  Object.assign(secrets, {
    CONCH_VALUE_HOOK_URL: `https://hooks.slack.com/services/T0/B0/${hex()}`,
    CONCH_VALUE_MONGODB_URI: `mongodb://app:${hex()}@db.internal:27017/prod`,
    CONCH_VALUE_AUTH: `eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx${hex()}.${hex()}`,
    CONCH_VALUE_SMTP_PASS: `p${hex().slice(0, 12)}`,
  });
  Object.assign(process.env, secrets);
  // Not a credential: visible, which shows the dumps below really print the environment.
  process.env.CONCH_TEST_PLAIN = 'plain-value-visible';
  secretFiles = {
    '~/.ssh/id_ed25519': `-----BEGIN OPENSSH PRIVATE KEY-----\n${unique('ssh-key')}\n-----END OPENSSH PRIVATE KEY-----\n`,
    '~/.aws/credentials': `[default]\naws_secret_access_key = ${unique('aws-credentials')}\n`,
    '~/.netrc': `machine example.com login me password ${unique('netrc')}\n`,
    '~/.npmrc': `//registry.npmjs.org/:_authToken=${unique('npmrc')}\n`,
    '~/.docker/config.json': `{"auths":{"x":{"auth":"${unique('docker')}"}}}\n`,
    '.env': `API_TOKEN=${unique('dotenv')}\n`,
    'sub/dir/.env.local': `DB_PASSWORD=${unique('dotenv-local')}\n`,
    // other agents' credentials, a history with a token typed on a command line, a database's
    '~/.claude/.credentials.json': `{"claudeAiOauth":{"accessToken":"${unique('claude')}"}}\n`,
    '~/.codex/auth.json': `{"OPENAI_API_KEY":"${unique('codex')}"}\n`,
    '~/.gemini/oauth_creds.json': `{"refresh_token":"${unique('gemini')}"}\n`,
    '~/.config/github-copilot/apps.json': `{"github.com":{"oauth_token":"${unique('copilot')}"}}\n`,
    '~/.cursor/mcp.json': `{"mcpServers":{"x":{"env":{"KEY":"${unique('cursor-mcp')}"}}}}\n`,
    '~/.bash_history': `curl -H "Authorization: Bearer ${unique('history')}" https://api\n`,
    '~/.pgpass': `db:5432:app:app:${unique('pgpass')}\n`,
  };
  for (const [path, text] of Object.entries(secretFiles))
    writeTree(path.startsWith('~/') ? home : dir, { [path.replace(/^~\//, '')]: text });
  writeTree(dir, { 'README.md': 'a project\n', 'sub/dir/notes.txt': 'notes\n' });
});
afterEach(async () => {
  for (const registry of registries.splice(0)) {
    const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
    await registry.dispose();
    if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
  }
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

interface Decision {
  tool: string;
  outcome: string;
  askedHuman: boolean;
  sandbox?: string;
}

/** A registry as a host builds it (permission + cli + background), created after the environment is set. */
async function setup(permission: Record<string, unknown> = {}) {
  const asked: ApprovalRequest[] = [];
  const registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  registries.push(registry);
  await registry.expose('permission', {
    ...permission,
    // Anything asked is recorded and refused: no test here expects a question.
    approve: async (request: ApprovalRequest) => {
      asked.push(request);
      return 'deny' as const;
    },
  });
  await registry.expose('cli', {});
  const decisions: Decision[] = [];
  registry.events.on('permission.decision', (e) => decisions.push(e as Decision));
  const run = async (command: string, options: Record<string, unknown> = {}) =>
    (await registry.execute('cli_based_tool', {
      command,
      background: false,
      timeout: STEP_TIMEOUT,
      ...options,
    })) as Result;
  /** No human was asked; what the gate allowed ran in the workspace-write sandbox. */
  const nobodyAsked = () => {
    expect(asked).toEqual([]);
    for (const d of decisions) {
      expect(d, JSON.stringify(d)).toMatchObject({ askedHuman: false });
      if (d.outcome === 'allow') expect(d, JSON.stringify(d)).toMatchObject({ sandbox: 'workspace-write' });
    }
  };
  return { registry, run, decisions, asked, nobodyAsked };
}

/**
 * The host writes files into the workspace, and waits until the change has been seen: its own
 * watch on the workspace fires (the registry's watchers read the same inotify queue), then one
 * more turn of the event loop lets every other callback of that batch run.
 */
async function hostWrites(files: Record<string, string>): Promise<void> {
  const watcher = watch(dir);
  try {
    const seen = once(watcher, 'change');
    writeTree(dir, files);
    await seen;
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    watcher.close();
  }
}

/** The unique part of a secret file's contents. */
function token(file: string): string {
  return /[a-z-]+-[0-9a-f]{24}/.exec(secretFiles[file]!)![0];
}

/** What a result shows the model: stdout, stderr and the spilled output file, if any. */
function shown(result: Result): string {
  const file =
    typeof result.output_file === 'string' && existsSync(result.output_file)
      ? readFileSync(result.output_file, 'utf8')
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
      stdout: result.stdout?.slice(0, 4000),
      stderr: result.stderr?.slice(0, 4000),
    },
    null,
    1,
  )}`;
}

/** Every file under `root`, with git's loose objects inflated (a staged .env lands there compressed). */
function filesUnder(root: string): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.isFile()) {
        const data = readFileSync(path);
        let text = data.toString('latin1');
        if (/\.git\/objects\/[0-9a-f]{2}\/[0-9a-f]{38}$/.test(path)) {
          try {
            text += inflateSync(data).toString('latin1');
          } catch {
            // not a loose object after all
          }
        }
        out.push({ path: relative(root, path), text });
      }
    }
  };
  walk(root);
  return out;
}

describe.runIf(findBwrap() || process.env.CI)('secrets in the default workspace-write sandbox', () => {
  it(
    'no credential variable is visible to a command, by any spelling',
    async () => {
      const { run, nobodyAsked } = await setup();
      const hasJq = spawnSync('jq', ['--version']).status === 0;
      const commands = [
        'env',
        'printenv',
        'export -p',
        'declare -x',
        'set',
        'bash -lc env',
        'sh -c export',
        'cat /proc/self/environ',
        'cat /proc/1/environ',
        'cat /proc/$PPID/environ',
        'cat /proc/$$/environ',
        'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat $f; echo; done 2>/dev/null',
        'ps eww -o args -p $$,$PPID,1',
        'ps -e eww -o pid,args',
        `python3 -c 'import os; print(dict(os.environ))'`,
        `node -e 'console.log(process.env)'`,
        ...(hasJq ? ['jq -n env'] : []),
        `printenv ${SECRET_VARS.join(' ')}; echo "$CONCH_TEST_API_TOKEN" "\${CONCH_TEST_SECRET:-unset}"`,
        'perl -e \'print "$_=$ENV{$_}\\n" for keys %ENV\'',
      ];
      for (const command of commands) {
        const result = await run(command);
        const text = shown(result);
        expect(result.sandbox, describeResult(command, result)).toBe('workspace-write');
        // Each dump does print the environment: a variable that is not a credential is there. (The
        // sandbox's own init and supervisor are out of reach: their environ is not readable at all.)
        if (/^cat \/proc\/(1|\$PPID)\/environ$/.test(command))
          expect(result.returncode, describeResult(command, result)).not.toBe(0);
        else if (!command.startsWith('printenv CONCH'))
          expect(text, describeResult(command, result)).toContain('plain-value-visible');
        for (const [name, value] of Object.entries(secrets)) {
          expect(text, `${name} by ${command}`).not.toContain(value);
          // /proc/*/cmdline and a shell's own `set` may show the command text, which names a variable.
          if (!/printenv |cmdline|^set$/.test(command))
            expect(text, `${name} by ${command}`).not.toContain(name);
        }
      }
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'a background task does not see them either',
    async () => {
      const { registry, run, nobodyAsked } = await setup();
      const command =
        "env; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' '\\n' < /proc/$PPID/environ; echo background-done";
      const started = await run(command, { background: true });
      expect(started.background_task_id, JSON.stringify(started)).toBeDefined();
      let done: Result;
      do {
        done = (await registry.execute('check_background_task', {
          task_id: started.background_task_id,
          wait_seconds: 300,
        })) as Result;
      } while (done.status === 'running' || done.status === 'queued');
      expect(done.status, JSON.stringify(done)).toBe('completed');
      const result = done.result as Result;
      expect(result.stdout).toContain('background-done');
      expect(result.stdout).toContain('CONCH_TEST_PLAIN=plain-value-visible');
      for (const [name, value] of Object.entries(secrets)) {
        expect(shown(result), name).not.toContain(value);
        expect(shown(result), name).not.toContain(name);
      }
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'secrets.hideEnv hides more names; secrets.keepEnv passes a credential the host chose to keep',
    async () => {
      process.env.CONCH_TEST_PLAIN = unique('now-hidden');
      const { run, nobodyAsked } = await setup({
        secrets: { keepEnv: ['CONCH_TEST_API_TOKEN'], hideEnv: ['CONCH_TEST_PLAIN'] },
      });
      const result = await run('printenv CONCH_TEST_API_TOKEN; env');
      expect(result.stdout.split('\n')[0]).toBe(secrets.CONCH_TEST_API_TOKEN);
      expect(result.stdout).not.toContain(process.env.CONCH_TEST_PLAIN);
      for (const name of SECRET_VARS.filter((n) => n !== 'CONCH_TEST_API_TOKEN'))
        expect(result.stdout, name).not.toContain(secrets[name]!);
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    '~/.ssh, ~/.aws, ~/.netrc, ~/.npmrc, ~/.docker/config.json and the workspace .env files cannot be read by any route',
    async () => {
      const { run, nobodyAsked } = await setup();
      const files = Object.keys(secretFiles);
      const commands: string[] = [];
      // Every route for a file in a masked directory, a masked file in HOME and the workspace's
      // .env files; the mechanism is the same for the rest, which get the three plainest routes
      // (each command is a sandboxed spawn: the whole matrix took ten minutes on a loaded machine).
      const everyRoute = new Set(['~/.ssh/id_ed25519', '~/.npmrc', '.env', 'sub/dir/.env.local']);
      for (const file of files) {
        if (!everyRoute.has(file)) {
          commands.push(
            `cat ${file}`,
            `python3 -c "print(open('${file.replace('~', home)}').read())"`,
            `cp ${file} copied-$RANDOM && cat copied-*`,
          );
          continue;
        }
        commands.push(
          `cat ${file}`,
          `cat < ${file}`,
          `head -c 4096 ${file}`,
          `python3 -c "print(open('${file.replace('~', home)}').read())"`,
          `node -e "console.log(require('fs').readFileSync('${file.replace('~', home)}', 'utf8'))"`,
          `cp ${file} copied-$RANDOM && cat copied-*`,
          `ln -s ${file.replace('~', home)} link-$RANDOM && cat link-*`,
          `python3 -c "import os; os.symlink('${file.replace('~', home)}', 'pylink')"; cat pylink; rm -f pylink`,
          `ln ${file.replace('~', home)} hard-$RANDOM && cat hard-*`,
          `dd if=${file} status=none`,
        );
      }
      commands.push(
        'tar cf ws.tar . && tar xOf ws.tar',
        'tar cf home.tar -C ~ . && tar xOf home.tar',
        'ls -la ~/.ssh ~/.aws && cat ~/.ssh/* ~/.aws/*',
        'grep -r . ~/.ssh ~/.aws .env sub',
        'find ~ . -type f -exec cat {} +',
        'mv sub moved && cat moved/dir/.env.local; mv moved sub',
        'git init -q && git add -A && git show :.env; git show :sub/dir/.env.local',
        'git -c user.name=t -c user.email=t@example.invalid commit -qm all && git show HEAD:.env',
        'zip -qr ws.zip . 2>/dev/null; python3 -m zipfile -c ws2.zip . && python3 -m zipfile -l ws2.zip',
      );
      for (const command of commands) {
        const result = await run(command);
        const text = shown(result);
        // Refused by the gate (it reads some of these as writes to a protected path), or run confined.
        if (!result.permission_denied)
          expect(result.sandbox, describeResult(command, result)).toBe('workspace-write');
        for (const file of files) expect(text, `${file} by ${command}`).not.toContain(token(file));
      }
      // Nor in any file the commands wrote (copies, links, archives, git's objects).
      const originals = new Set(files.filter((f) => !f.startsWith('~/')));
      for (const { path, text } of filesUnder(dir)) {
        if (originals.has(path)) continue;
        for (const file of files) expect(text, `${file} in ${path}`).not.toContain(token(file));
      }
      // The originals are untouched.
      for (const [file, contents] of Object.entries(secretFiles)) {
        const path = file.startsWith('~/') ? join(home, file.slice(2)) : join(dir, file);
        if (existsSync(path)) expect(readFileSync(path, 'utf8')).toBe(contents);
      }
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'reading a masked file is reported as SECRET_HIDDEN, naming it',
    async () => {
      const { run, nobodyAsked } = await setup();
      for (const file of ['.env', 'sub/dir/.env.local', '~/.netrc', '~/.docker/config.json']) {
        const command = `cat ${file}`;
        const result = await run(command);
        expect(result, describeResult(command, result)).toMatchObject({
          error_code: 'SECRET_HIDDEN',
          refused_path: file.replace('~', home),
        });
        expect(shown(result)).not.toContain(token(file));
      }
      // ~/.npmrc is shown as a copy without its credential lines (its settings stay): no error.
      const npmrc = await run('cat ~/.npmrc');
      expect(npmrc.returncode, describeResult('cat ~/.npmrc', npmrc)).toBe(0);
      expect(npmrc.error_code).toBeUndefined();
      expect(shown(npmrc)).not.toContain(token('~/.npmrc'));
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'reading a file inside a masked directory (~/.ssh, ~/.aws) is reported as SECRET_HIDDEN too',
    async () => {
      const { run } = await setup();
      for (const file of ['~/.ssh/id_ed25519', '~/.aws/credentials']) {
        const command = `cat ${file}`;
        const result = await run(command);
        expect(shown(result)).not.toContain(token(file));
        expect(result.error_code, describeResult(command, result)).toBe('SECRET_HIDDEN');
      }
    },
    TEST_TIMEOUT,
  );

  it(
    'a tool that warns about a hidden file and goes on succeeds: the hidden path is a notice, not an error',
    async () => {
      const { run, nobodyAsked } = await setup();
      const warners: [string, string][] = [
        ['cat ~/.aws/credentials 2>&1; echo went-on', '~/.aws/credentials'],
        ['head -c 10 .env || echo went-on', '.env'],
        [
          `python3 -c 'import sys
try: open(".env").read()
except OSError as e: print("warning:", e, file=sys.stderr)
print("went-on")'`,
          '.env',
        ],
        [
          `node -e 'try { require("fs").readFileSync(process.env.HOME + "/.netrc") } catch (e) { console.warn("warning: " + e.message) } console.log("went-on")'`,
          '~/.netrc',
        ],
      ];
      for (const [command, file] of warners) {
        const result = await run(command);
        expect(result.returncode, describeResult(command, result)).toBe(0);
        expect(result.stdout, describeResult(command, result)).toContain('went-on');
        expect(result.error, describeResult(command, result)).toBeUndefined();
        expect(result.error_code, describeResult(command, result)).toBeUndefined();
        expect(result, describeResult(command, result)).toMatchObject({
          notice_code: 'SECRET_HIDDEN',
          refused_path: file.replace('~', home),
        });
        expect(result.notice).toMatch(/succeeded.*hides/);
        expect(shown(result)).not.toContain(token(file));
      }
      // The same read failing is still the command's error.
      const failed = await run('cat .env');
      expect(failed, describeResult('cat .env', failed)).toMatchObject({ error_code: 'SECRET_HIDDEN' });
      expect(failed.notice).toBeUndefined();
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'the target of a .env symlink is unreadable under its own name too',
    async () => {
      writeTree(dir, { 'config/prod.txt': `PROD=${unique('linked')}\n` });
      symlinkSync('config/prod.txt', join(dir, '.env.prod'));
      const secret = readFileSync(join(dir, 'config/prod.txt'), 'utf8');
      const { run, nobodyAsked } = await setup();
      for (const command of [
        'cat .env.prod',
        'cat config/prod.txt',
        'cp config/prod.txt copy.txt; cat copy.txt',
      ]) {
        const result = await run(command);
        expect(result.returncode, describeResult(command, result)).not.toBe(0);
        expect(shown(result)).not.toContain(secret.trim());
      }
      expect(existsSync(join(dir, 'copy.txt'))).toBe(false);
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'a hard link to a .env under another name is unreadable too',
    async () => {
      linkSync(join(dir, '.env'), join(dir, 'env-backup.txt'));
      const { run } = await setup();
      const command = 'cat env-backup.txt';
      const result = await run(command);
      expect(shown(result), describeResult(command, result)).not.toContain(token('.env'));
    },
    TEST_TIMEOUT,
  );

  it(
    'a .env the host adds while the session runs is masked once conch has seen it appear',
    async () => {
      const { run, nobodyAsked } = await setup();
      expect(await run('cat README.md')).toMatchObject({ returncode: 0, stdout: 'a project\n' });
      const later = unique('later');
      await hostWrites({ '.env.production': `PROD=${later}\n`, 'new/deep/.env': `NEW=${later}\n` });
      for (const command of ['cat .env.production', 'cat new/deep/.env']) {
        const result = await run(command);
        expect(result, describeResult(command, result)).toMatchObject({ error_code: 'SECRET_HIDDEN' });
        expect(shown(result)).not.toContain(later);
      }
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it(
    'a .env the host adds is masked from the very next command on',
    async () => {
      const { run } = await setup();
      expect(await run('cat README.md')).toMatchObject({ returncode: 0 });
      const later = unique('later');
      writeTree(dir, { '.env.production': `PROD=${later}\n` });
      const command = 'cat .env.production';
      const result = await run(command);
      expect(shown(result), describeResult(command, result)).not.toContain(later);
    },
    TEST_TIMEOUT,
  );

  it(
    'a .env the host adds while a background task runs is masked from later commands too',
    async () => {
      const { registry, run } = await setup();
      const task = await run('while [ ! -e go ]; do sleep 0.1; done; echo task-done', { background: true });
      expect(task.background_task_id, JSON.stringify(task)).toBeDefined();
      try {
        const later = unique('later');
        await hostWrites({ '.env.production': `PROD=${later}\n` });
        const command = 'cat .env.production';
        const result = await run(command);
        expect(shown(result), describeResult(command, result)).not.toContain(later);
      } finally {
        writeTree(dir, { go: '' });
        let done: Result;
        do {
          done = (await registry.execute('check_background_task', {
            task_id: task.background_task_id,
            wait_seconds: 300,
          })) as Result;
        } while (done.status === 'running' || done.status === 'queued');
      }
    },
    TEST_TIMEOUT,
  );

  it(
    'secrets.exposeDotEnv makes the workspace .env files readable, still read-only, and nothing else',
    async () => {
      const { run, nobodyAsked } = await setup({ secrets: { exposeDotEnv: true } });
      const read = await run('cat .env sub/dir/.env.local');
      expect(read).toMatchObject({ returncode: 0, sandbox: 'workspace-write' });
      expect(read.stdout).toBe(secretFiles['.env']! + secretFiles['sub/dir/.env.local']!);
      const write = `python3 -c "open('.env', 'a').write('X=1')"`;
      expect(await run(write)).toMatchObject({ error_code: 'SANDBOX_REFUSED_WRITE', refused_path: '.env' });
      expect(readFileSync(join(dir, '.env'), 'utf8')).toBe(secretFiles['.env']);
      for (const file of ['~/.netrc', '~/.ssh/id_ed25519', '~/.aws/credentials']) {
        const result = await run(`cat ${file}`);
        expect(result.returncode).not.toBe(0);
        expect(shown(result)).not.toContain(token(file));
      }
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );

  it.each(['.env.example', '.env.sample', '.env.template', 'config/.env.local.example', '.env-example'])(
    '%s is an ordinary file: read, written, created and removed, while .env stays masked',
    async (template) => {
      const { run, nobodyAsked } = await setup();
      writeTree(dir, { [template]: 'API_TOKEN=changeme\n' });
      const read = await run(`cat ${template}`);
      expect(read).toMatchObject({
        returncode: 0,
        stdout: 'API_TOKEN=changeme\n',
        sandbox: 'workspace-write',
      });
      const write = await run(`echo 'DB_URL=postgres://localhost/app' >> ${template} && cat ${template}`);
      expect(write, JSON.stringify(write)).toMatchObject({ returncode: 0 });
      expect(readFileSync(join(dir, template), 'utf8')).toBe(
        'API_TOKEN=changeme\nDB_URL=postgres://localhost/app\n',
      );
      // made new by a command (as `cp .env.example` scaffolds do), then removed
      const fresh = await run(
        `mkdir -p new && printf 'A=1\\n' > new/${template.split('/').pop()} && cat new/${template.split('/').pop()} && rm new/${template.split('/').pop()}`,
      );
      expect(fresh, JSON.stringify(fresh)).toMatchObject({ returncode: 0, stdout: 'A=1\n' });
      // the real one next to it is still a secret
      const env = await run('cat .env');
      expect(env.returncode).not.toBe(0);
      expect(shown(env)).not.toContain(token('.env'));
      nobodyAsked();
    },
    TEST_TIMEOUT,
  );
});
