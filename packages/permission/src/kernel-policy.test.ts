// Invariant: the kernel policy makes every protected path in the workspace read-only at any depth — .env*, tool settings, every git dir git will open (nested, bare, behind a gitdir: pointer, modules, worktrees) with its hooks and config, hard links of protected files — pins each git dir, fails closed on what it cannot resolve or visit, and is walked again after a change.
import { execFileSync } from 'node:child_process';
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, sep } from 'node:path';
import type { KernelPolicy, Logger } from '@conch/core';
import { KernelPolicyBuilder, type KernelPolicyOptions } from '@conch/sandbox';
import { programRuns, requireUnderCi, waitFor } from '@conch/test-support';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { compileProtected } from './paths.js';

let root: string;
let home: string;
let ws: string;
const builders: KernelPolicyBuilder[] = [];

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-kernel-policy-')));
  home = join(root, 'home');
  ws = join(root, 'ws');
  mkdirSync(home);
  mkdirSync(ws);
});
afterEach(() => {
  for (const b of builders.splice(0)) b.dispose();
  rmSync(root, { recursive: true, force: true });
});

/** git with no user or system config (the machine's must not change what a repository looks like). */
function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], {
    cwd,
    stdio: 'pipe',
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', HOME: home },
  });
}

/** A file with its directories. */
function file(path: string, text = 'x\n'): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  return path;
}

function dir(path: string): string {
  mkdirSync(path, { recursive: true });
  return path;
}

interface Build extends Partial<KernelPolicyOptions> {
  /** The permission config the paths come from (protectedFiles, protectedPaths), defaults applied. */
  config?: PermissionConfigInput;
  workspace?: string;
}

function builder(options: Build = {}): KernelPolicyBuilder {
  const { config: input = {}, workspace = ws, ...rest } = options;
  const config = permissionConfigSchema.parse(input);
  const b = new KernelPolicyBuilder({
    mode: 'workspace-write',
    paths: {
      home,
      workspaceRoot: workspace,
      extra: compileProtected(config.protectedPaths),
      names: new Set(config.protectedFiles),
    },
    cacheDir: join(home, '.cache', 'conch', 'sandbox', 'test'),
    secrets: config.secrets,
    ...rest,
  });
  builders.push(b);
  return b;
}

const policy = (options: Build = {}): KernelPolicy => builder(options).policy();

/** Whether `path` is read-only under the policy: it or a directory above it is a read-only path. */
function covered(p: KernelPolicy, path: string): boolean {
  return p.readOnlyPaths.some((ro) => path === ro || path.startsWith(ro + sep));
}

function warnings(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const logger: Logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
  return { logger, lines };
}

describe('protected names at any depth', () => {
  it('.env files are read-only wherever they are; names that only start like one are not', () => {
    const envs = [
      file(join(ws, '.env')),
      file(join(ws, 'a', '.env.local')),
      file(join(ws, 'a', 'b', 'c', '.env-prod')),
      file(join(ws, 'x', 'y', '.env_test')),
      file(join(ws, 'deep', '1', '2', '3', '4', '5', '6', '.envrc')),
    ];
    const others = [
      file(join(ws, 'a', '.environment')),
      file(join(ws, 'a', '.envy')),
      file(join(ws, 'a', 'env')),
      file(join(ws, 'a', 'b', 'env.txt')),
    ];
    const p = policy();
    expect(p.readOnlyPaths).toEqual(expect.arrayContaining(envs));
    for (const path of others) expect(covered(p, path), path).toBe(false);
    expect(p.writableRoots).toContain(ws);
    expect(covered(p, ws)).toBe(false);
  });

  it('tool settings directories and files are read-only at any depth, Gemfile, Gemfile.lock and .aws/ by default', () => {
    const dirs = [
      dir(join(ws, '.vscode')),
      dir(join(ws, 'p', '.idea')),
      dir(join(ws, 'p', 'q', '.claude')),
      dir(join(ws, 'r', '.gemini')),
      dir(join(ws, 'r', 's', 't', '.cursor')),
      dir(join(ws, '.devcontainer')),
      dir(join(ws, 'svc', '.zed')),
      dir(join(ws, '.codex')),
      dir(join(ws, 'p', '.continue')),
      dir(join(ws, 'tools', '.mise')),
    ];
    const files = [
      file(join(ws, '.mcp.json'), '{}'),
      file(join(ws, 'p', 'q', '.mcp.json'), '{}'),
      file(join(ws, '.gitmodules')),
      file(join(ws, 'vendor', 'lib', '.gitmodules')),
      file(join(ws, 'r', 's', '.ripgreprc')),
      file(join(ws, 'tools', '.envrc')),
      file(join(ws, 'mise.toml')),
      file(join(ws, 'svc', '.mise.toml')),
      file(join(ws, 'svc', 'mise.local.toml')),
      file(join(ws, 'apps', 'web', '.devcontainer.json'), '{}'),
      file(join(ws, 'Gemfile')),
      file(join(ws, 'apps', 'web', 'Gemfile')),
      file(join(ws, 'Gemfile.lock')),
      file(join(ws, 'apps', 'web', 'Gemfile.lock')),
    ];
    const p = policy();
    expect(p.readOnlyPaths).toEqual(expect.arrayContaining([...dirs, ...files]));
    // What is inside a protected directory is covered by the directory itself.
    const inside = file(join(ws, 'p', 'q', '.claude', 'settings.json'), '{}');
    expect(covered(policy(), inside)).toBe(true);
    // The reference terminal's credential directory, at any depth: the directory and what is in it.
    const aws = dir(join(ws, 'deploy', '.aws'));
    const p2 = policy();
    expect(p2.readOnlyPaths).toContain(aws);
    expect(covered(p2, file(join(ws, 'deploy', '.aws', 'credentials')))).toBe(true);
    expect(covered(p2, file(join(ws, 'Gemfile.lock.bak')))).toBe(false);
  });

  it('protectedFiles: [] turns the Gemfile default off; other names are protected at any depth', () => {
    const gemfile = file(join(ws, 'apps', 'Gemfile'));
    const makefile = file(join(ws, 'apps', 'api', 'Makefile'));
    expect(policy({ config: { protectedFiles: [] } }).readOnlyPaths).not.toContain(gemfile);
    const p = policy({ config: { protectedFiles: ['Makefile'] } });
    expect(p.readOnlyPaths).toContain(makefile);
    expect(p.readOnlyPaths).not.toContain(gemfile);
  });

  it('host globs (protectedPaths): base-name globs at any depth, paths relative to the workspace, absolute paths', () => {
    const pem = file(join(ws, 'certs', 'deep', 'server.pem'));
    const key = file(join(ws, 'secrets', 'key'));
    const nestedKey = file(join(ws, 'a', 'secrets', 'key'));
    const deploy = file(join(ws, 'deploy', 'prod', 'app.yaml'));
    const secretsDir = dir(join(ws, 'vault'));
    const p = policy({
      config: { protectedPaths: ['*.pem', 'secrets/*', `${ws}/deploy/**/*.yaml`, 'vault'] },
    });
    expect(p.readOnlyPaths).toEqual(expect.arrayContaining([pem, key, deploy, secretsDir]));
    // 'secrets/*' names the workspace's own secrets directory, not every one.
    expect(covered(p, nestedKey)).toBe(false);
  });

  it('start-up files in the home directory are read-only, or not there at all (a closed home)', () => {
    const shown = [file(join(home, '.bashrc')), file(join(home, '.profile')), file(join(home, '.gitconfig'))];
    const hidden = [dir(join(home, '.ssh')), dir(join(home, '.config', 'git'))];
    // Open home: each one a read-only mount.
    const open = policy({ config: { secrets: { openHome: true } } });
    expect(open.closedPaths ?? []).toEqual([]);
    expect(open.readOnlyPaths).toEqual(expect.arrayContaining([...shown, ...hidden]));
    // Closed home (the default): the start-up files are shown read-only (as sanitized copies on
    // top), the rest is not in the sandbox at all, so needs no mount of its own.
    const closed = policy();
    expect(closed.closedPaths).toContain(home);
    expect(closed.readOnlyPaths).toEqual(expect.arrayContaining(shown));
    expect((closed.substitutes ?? []).map((s) => s.path)).toEqual(expect.arrayContaining(shown));
    for (const path of hidden) {
      expect(closed.readOnlyPaths).not.toContain(path);
      expect((closed.readablePaths ?? []).some((r) => path === r || path.startsWith(r + sep))).toBe(false);
    }
  });
});

describe('git directories', () => {
  it('the workspace repository: .git pinned and writable, its hooks, config and config.worktree read-only', () => {
    git(ws, 'init', '-q');
    git(ws, 'config', 'extensions.worktreeConfig', 'true');
    git(ws, 'config', '--worktree', 'conch.test', 'yes');
    const gitDir = join(ws, '.git');
    expect(readFileSync(join(gitDir, 'config.worktree'), 'utf8')).toMatch(/conch/);
    const p = policy();
    expect(p.pinnedPaths).toContain(gitDir);
    expect(p.readOnlyPaths).toEqual(
      expect.arrayContaining([
        join(gitDir, 'hooks'),
        join(gitDir, 'config'),
        join(gitDir, 'config.worktree'),
      ]),
    );
    // git must still be able to write its objects, index and refs.
    expect(covered(p, join(gitDir, 'objects'))).toBe(false);
    expect(covered(p, join(gitDir, 'HEAD'))).toBe(false);
  });

  it('nested repositories at any depth are pinned with their hooks and config read-only', () => {
    git(ws, 'init', '-q');
    const inner = dir(join(ws, 'packages', 'inner'));
    git(inner, 'init', '-q');
    const innermost = dir(join(inner, 'vendor', 'deeper', 'innermost'));
    git(innermost, 'init', '-q');
    const p = policy();
    for (const repo of [ws, inner, innermost]) {
      expect(p.pinnedPaths).toContain(join(repo, '.git'));
      expect(p.readOnlyPaths).toEqual(
        expect.arrayContaining([join(repo, '.git', 'hooks'), join(repo, '.git', 'config')]),
      );
    }
  });

  it('a bare repository committed inside the workspace (named *.git or not) is protected like a .git dir', () => {
    git(ws, 'init', '-q');
    const mirror = dir(join(ws, 'vendor', 'mirror.git'));
    git(mirror, 'init', '-q', '--bare');
    const plain = dir(join(ws, 'fixtures', 'store'));
    git(plain, 'init', '-q', '--bare');
    git(ws, 'add', '-A');
    git(ws, 'commit', '-q', '-m', 'vendor a bare repository');
    const p = policy();
    for (const bare of [mirror, plain]) {
      expect(p.pinnedPaths).toContain(bare);
      expect(p.readOnlyPaths).toEqual(expect.arrayContaining([join(bare, 'hooks'), join(bare, 'config')]));
    }
  });

  it('a .git file (gitdir:) protects the directory it points to, inside or outside the workspace', () => {
    // Absolute pointer to a git dir outside the workspace (git init --separate-git-dir).
    const elsewhere = join(dir(join(root, 'elsewhere')), 'wt.git');
    const wt = join(ws, 'wt');
    git(root, 'init', '-q', '--separate-git-dir', elsewhere, wt);
    expect(readFileSync(join(wt, '.git'), 'utf8')).toMatch(/^gitdir: /);
    // Relative pointer to a git dir inside the workspace.
    const hidden = dir(join(ws, '.store', 'rel.git'));
    git(hidden, 'init', '-q', '--bare');
    const rel = file(join(ws, 'rel', '.git'), 'gitdir: ../.store/rel.git\n');
    const p = policy();
    expect(p.readOnlyPaths).toEqual(
      expect.arrayContaining([
        join(wt, '.git'),
        join(elsewhere, 'hooks'),
        join(elsewhere, 'config'),
        rel,
        join(hidden, 'hooks'),
        join(hidden, 'config'),
      ]),
    );
    expect(p.pinnedPaths).toContain(hidden);
    // Outside every writable root: read-only anyway, nothing to pin.
    expect(p.pinnedPaths).not.toContain(elsewhere);
  });

  it('a .git file pointing to a missing directory fails closed: the nearest existing directory is read-only', () => {
    const m = dir(join(ws, 'm'));
    const pointer = file(join(m, 'n', 'broken', '.git'), 'gitdir: ../../gone/deeper/x.git\n');
    const { logger, lines } = warnings();
    const p = policy({ logger });
    // git would open m/gone/deeper/x.git: creating it (hooks and all) must be impossible.
    expect(p.readOnlyPaths).toEqual(expect.arrayContaining([pointer, m]));
    expect(covered(p, join(m, 'gone', 'deeper', 'x.git', 'hooks', 'pre-commit'))).toBe(true);
    // Not broader than needed.
    expect(covered(p, ws)).toBe(false);
    expect(covered(p, file(join(ws, 'src', 'index.ts')))).toBe(false);
    expect(lines.join('')).toMatch(/unresolvable gitdir/);
  });

  it('submodules: .git/modules/<x> (nested too) have their hooks and config read-only; the pointer and .gitmodules too', () => {
    const src = dir(join(root, 'src-repo'));
    git(src, 'init', '-q');
    git(src, 'commit', '-q', '--allow-empty', '-m', 'init');
    git(ws, 'init', '-q');
    git(ws, '-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', src, 'lib');
    const modules = join(ws, '.git', 'modules');
    const lib = join(modules, 'lib');
    expect(statSync(join(lib, 'hooks')).isDirectory()).toBe(true);
    const nested = dir(join(lib, 'modules', 'nested'));
    git(nested, 'init', '-q', '--bare');
    const p = policy();
    expect(p.readOnlyPaths).toEqual(
      expect.arrayContaining([
        join(lib, 'hooks'),
        join(lib, 'config'),
        join(nested, 'hooks'),
        join(nested, 'config'),
        join(ws, 'lib', '.git'),
        join(ws, '.gitmodules'),
      ]),
    );
    expect(p.pinnedPaths).toEqual(expect.arrayContaining([join(ws, '.git'), lib, nested]));
  });

  it('worktrees: .git/worktrees/<x>/{commondir,gitdir} are read-only, and the worktree .git file', () => {
    git(ws, 'init', '-q');
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'init');
    const inside = join(ws, 'wt-inside');
    const outside = join(root, 'wt-outside');
    git(ws, 'worktree', 'add', '-q', '-b', 'inside', inside);
    git(ws, 'worktree', 'add', '-q', '-b', 'outside', outside);
    const worktrees = join(ws, '.git', 'worktrees');
    const p = policy();
    expect(p.readOnlyPaths).toEqual(
      expect.arrayContaining([
        join(worktrees, 'wt-inside', 'commondir'),
        join(worktrees, 'wt-inside', 'gitdir'),
        join(worktrees, 'wt-outside', 'commondir'),
        join(worktrees, 'wt-outside', 'gitdir'),
        join(inside, '.git'),
      ]),
    );
  });

  it('a workspace that is a linked worktree: the common dir it names has its hooks and config read-only', () => {
    const main = dir(join(root, 'main'));
    git(main, 'init', '-q');
    git(main, 'commit', '-q', '--allow-empty', '-m', 'init');
    const linked = join(root, 'linked');
    git(main, 'worktree', 'add', '-q', '-b', 'feature', linked);
    const p = policy({ workspace: linked });
    expect(p.readOnlyPaths).toEqual(
      expect.arrayContaining([
        join(linked, '.git'),
        join(main, '.git', 'hooks'),
        join(main, '.git', 'config'),
        join(main, '.git', 'worktrees', 'linked', 'commondir'),
        join(main, '.git', 'worktrees', 'linked', 'gitdir'),
      ]),
    );
  });

  it('a repository enclosing the workspace (workspace = repo/sub) stays read-only: its history would land outside the workspace at the next checkout', () => {
    const repo = dir(join(root, 'repo'));
    git(repo, 'init', '-q');
    const sub = dir(join(repo, 'packages', 'sub'));
    const p = policy({ workspace: sub });
    const gitDir = join(repo, '.git');
    expect(p.writableRoots).toContain(sub);
    expect(p.writableRoots).not.toContain(gitDir);
    expect(p.writableRoots).not.toContain(repo);
    // A host that wants commits from the package directory names the git dir itself.
    const allowed = policy({ workspace: sub, writableRoots: [gitDir] });
    expect(allowed.writableRoots).toContain(gitDir);
    expect(allowed.readOnlyPaths).toEqual(
      expect.arrayContaining([join(gitDir, 'hooks'), join(gitDir, 'config')]),
    );
    expect(allowed.pinnedPaths).toContain(gitDir);
  });
});

describe('hard links, node_modules and the walk budget', () => {
  it('a hard link in the workspace to $HOME/.bashrc or to a protected file is read-only under its other name', () => {
    const bashrc = file(join(home, '.bashrc'), 'export PATH\n');
    const twin = join(dir(join(ws, 'docs')), 'notes.txt');
    linkSync(bashrc, twin);
    const env = file(join(ws, 'config', '.env'), 'TOKEN=1\n');
    const envTwin = join(dir(join(ws, 'tmp', 'deep')), 'settings.txt');
    linkSync(env, envTwin);
    // Two names of an ordinary file are ordinary.
    const plain = file(join(ws, 'plain.txt'));
    const plainTwin = join(ws, 'docs', 'plain-copy.txt');
    linkSync(plain, plainTwin);
    const p = policy();
    expect(p.readOnlyPaths).toEqual(expect.arrayContaining([twin, envTwin, env]));
    expect(covered(p, plain)).toBe(false);
    expect(covered(p, plainTwin)).toBe(false);
  });

  it('node_modules is not walked: protected names and repositories inside it are not protected (documented)', () => {
    const env = file(join(ws, 'node_modules', 'pkg', '.env'));
    const nested = file(join(ws, 'apps', 'web', 'node_modules', 'x', '.vscode', 'settings.json'));
    const repo = dir(join(ws, 'node_modules', 'gitdep'));
    git(repo, 'init', '-q');
    const p = policy();
    expect(covered(p, env)).toBe(false);
    expect(covered(p, nested)).toBe(false);
    expect(covered(p, join(repo, '.git', 'hooks'))).toBe(false);
    expect(p.pinnedPaths).not.toContain(join(repo, '.git'));
  });

  it('a walk over budget makes every directory it did not visit read-only, and says so', () => {
    const planted: string[] = [];
    for (let i = 0; i < 10; i++) {
      planted.push(file(join(ws, `d${i}`, 'sub', '.env')));
      planted.push(file(join(ws, `d${i}`, 'sub', 'deeper', '.vscode', 'tasks.json')));
    }
    const { logger, lines } = warnings();
    const p = policy({ walkBudget: 14, logger });
    for (const path of planted) expect(covered(p, path), path).toBe(true);
    // Some directories were given up on as a whole (not every one was visited), never the root.
    expect(p.readOnlyPaths.some((ro) => /\/d\d+(\/sub)?$/.test(ro))).toBe(true);
    expect(covered(p, ws)).toBe(false);
    expect(lines.join('')).toMatch(/too large to search/);
    // With the default budget the same tree is searched in full: only the protected entries.
    const full = policy();
    for (const path of planted) expect(covered(full, path), path).toBe(true);
    expect(full.readOnlyPaths.some((ro) => /\/d\d+(\/sub)?$/.test(ro))).toBe(false);
  });

  it('beyond the mount budget, unvisited directories collapse to their parents', () => {
    const many = dir(join(ws, 'many'));
    // Every directory holds one entry, so each one visited costs one unit of the budget.
    for (let i = 0; i < 2100; i++) file(join(many, `d${i}`, 'index.ts'));
    const env = file(join(many, 'd2099', '.env'));
    // Budget: the root, then `many` (2100 entries), then a handful of its children.
    const p = policy({ walkBudget: 2100 + 1 + 5 });
    expect(p.readOnlyPaths).toContain(many);
    expect(covered(p, env)).toBe(true);
    const inWorkspace = p.readOnlyPaths.filter((ro) => ro.startsWith(ws + sep));
    expect(inWorkspace.length).toBeLessThan(50);
  });
});

// PRODUCT: protected paths the walk does not find (each one is an escape through the real tools,
// see sandbox-escapes.test.ts). Marked `fails` until the policy covers them.
describe('protected paths the policy misses', () => {
  it('a tool settings directory that is a symbolic link (.claude -> shared/claude) is protected', () => {
    const target = dir(join(ws, 'shared', 'claude'));
    symlinkSync('shared/claude', join(ws, '.claude'));
    const p = policy();
    expect(p.readOnlyPaths.includes(join(ws, '.claude')) || covered(p, target)).toBe(true);
  });

  it('a hard link of a file inside a protected directory (.git/hooks/pre-commit, .vscode/tasks.json) is read-only', () => {
    git(ws, 'init', '-q');
    const hook = file(join(ws, '.git', 'hooks', 'pre-commit'), '#!/bin/sh\n');
    const tasks = file(join(ws, '.vscode', 'tasks.json'), '{}');
    linkSync(hook, join(dir(join(ws, 'scripts')), 'pre-commit.sh'));
    linkSync(tasks, join(ws, 'scripts', 'tasks.json'));
    const p = policy();
    expect(p.readOnlyPaths).toEqual(
      expect.arrayContaining([join(ws, 'scripts', 'pre-commit.sh'), join(ws, 'scripts', 'tasks.json')]),
    );
  });

  it('a hard link in the workspace to a file outside every writable root (a pnpm store) is read-only', () => {
    const stored = file(join(home, '.local', 'share', 'pnpm', 'store', 'v10', 'files', '00', 'abc'), 'x');
    const linked = join(dir(join(ws, 'node_modules', 'dep')), 'index.js');
    linkSync(stored, linked);
    const other = file(join(root, 'elsewhere', 'notes.txt'));
    const linkedOther = join(ws, 'notes.txt');
    linkSync(other, linkedOther);
    const p = policy();
    expect(covered(p, linked)).toBe(true);
    expect(covered(p, linkedOther)).toBe(true);
  });

  it('the hooks directory core.hooksPath names (husky: .husky) is read-only', () => {
    git(ws, 'init', '-q');
    const husky = dir(join(ws, '.husky'));
    file(join(husky, 'pre-commit'), '#!/bin/sh\nnpm test\n');
    git(ws, 'config', 'core.hooksPath', '.husky');
    expect(covered(policy(), husky)).toBe(true);
  });
});

// A git config can include other files (`include.path`, `includeIf.*.path`): what they say is in
// force as if it were in .git/config, so a file in the work tree that a config includes is
// protected like the config itself, present or not, and so is a hooks directory it names.
const hasHg = requireUnderCi(programRuns('hg'), 'Mercurial (hg)', 'apt-get install mercurial');

/** hg with no user or system config. */
function hg(cwd: string, ...args: string[]): string {
  return execFileSync('hg', args, {
    cwd,
    stdio: 'pipe',
    encoding: 'utf8',
    env: { ...process.env, HGRCPATH: '/dev/null', HOME: home },
  });
}

describe.skipIf(!hasHg)('Mercurial repositories', () => {
  it('every .hg at any depth is pinned, its hgrc, hgrc-not-shared and sharedpath read-only made or not, its store writable', () => {
    hg(ws, 'init');
    const inner = dir(join(ws, 'vendor', 'lib'));
    hg(inner, 'init');
    file(join(inner, '.hg', 'hgrc'), '[ui]\nusername = u\n');
    const p = policy();
    for (const repo of [ws, inner]) {
      expect(p.pinnedPaths).toContain(join(repo, '.hg'));
      for (const name of ['hgrc', 'hgrc-not-shared', 'sharedpath'])
        expect(p.readOnlyPaths, `${repo} ${name}`).toContain(join(repo, '.hg', name));
      // hg must still write its store, dirstate and caches.
      expect(covered(p, join(repo, '.hg', 'store'))).toBe(false);
      expect(covered(p, join(repo, '.hg', 'dirstate'))).toBe(false);
      expect(covered(p, join(repo, '.hg', 'requires'))).toBe(false);
    }
  });

  it('files an hgrc includes are read-only, made or not, through nested includes; one outside the roots is left', () => {
    hg(ws, 'init');
    const outside = file(join(root, 'elsewhere', 'team.rc'));
    file(join(ws, 'config', 'shared.rc'), '[ui]\n%include more/deeper.rc\n');
    file(join(ws, '.hg', 'hgrc'), `[ui]\nusername = u\n%include ../config/shared.rc\n%include ${outside}\n`);
    file(join(ws, '.hg', 'hgrc-not-shared'), '%include ../local.rc\n');
    const p = policy();
    expect(covered(p, join(ws, 'config', 'shared.rc'))).toBe(true);
    expect(covered(p, join(ws, 'config', 'more', 'deeper.rc'))).toBe(true);
    expect(covered(p, join(ws, 'local.rc'))).toBe(true);
    expect(p.readOnlyPaths).not.toContain(outside);
    expect(covered(p, join(ws, 'config', 'other.rc'))).toBe(false);
  });

  it("Mercurial's user config is read-only like git's: .hgrc at any depth, ~/.hgrc and ~/.config/hg", () => {
    file(join(ws, 'dotfiles', '.hgrc'));
    const inHome = [file(join(home, '.hgrc')), dir(join(home, '.config', 'hg'))];
    const p = policy({ config: { secrets: { openHome: true } } });
    expect(covered(p, join(ws, 'dotfiles', '.hgrc'))).toBe(true);
    expect(p.readOnlyPaths).toEqual(expect.arrayContaining(inHome));
  });
});

describe('what an .envrc loads (direnv runs it at the next cd, with no new approval)', () => {
  it('its source_env, dotenv and source targets are read-only, made or not, at any depth; one outside the roots is left', () => {
    const outside = file(join(root, 'elsewhere', 'team.envrc'));
    file(
      join(ws, '.envrc'),
      [
        'source_env_if_exists .envrc.local',
        'source_env scripts/env.sh',
        'dotenv config/dev.vars',
        `source_env ${outside}`,
        'source_env sub',
        'PATH_add bin',
      ].join('\n'),
    );
    file(join(ws, 'scripts', 'env.sh'));
    dir(join(ws, 'sub'));
    file(join(ws, 'app', '.envrc'), 'source "$PWD/.venv-env"\n');
    const p = policy();
    for (const path of [
      join(ws, '.envrc.local'),
      join(ws, 'scripts', 'env.sh'),
      join(ws, 'config', 'dev.vars'),
      join(ws, 'sub', '.envrc'),
      join(ws, 'app', '.venv-env'),
    ])
      expect(p.readOnlyPaths, path).toContain(path);
    expect(p.readOnlyPaths).not.toContain(outside);
    // PATH_add names a directory of the project's own programs: not a load.
    expect(covered(p, join(ws, 'bin'))).toBe(false);
    expect(covered(p, join(ws, 'scripts', 'other.sh'))).toBe(false);
  });

  it('an .envrc edited in place (no rename) protects what it loads now in a later policy', async () => {
    const envrc = file(join(ws, '.envrc'), 'export A=1\n');
    const b = builder();
    expect(covered(b.policy(), join(ws, 'later.sh'))).toBe(false);
    writeFileSync(envrc, 'export A=1\nsource_env later.sh\n', { flag: 'a' });
    await waitFor(
      () => b.policy().readOnlyPaths.includes(join(ws, 'later.sh')),
      'the new load in the policy',
    );
  });
});

describe('files a git config includes', () => {
  it('include and includeIf targets in the work tree are read-only, made or not, through nested includes', () => {
    git(ws, 'init', '-q');
    file(join(ws, '.gitconfig-shared'), '[include]\n\tpath = git/more.inc\n');
    git(ws, 'config', 'include.path', '../.gitconfig-shared');
    git(ws, 'config', 'includeIf.onbranch:main.path', '../config/branch.inc');
    const outside = file(join(root, 'elsewhere', 'team.inc'));
    git(ws, 'config', '--add', 'include.path', outside);
    const p = policy();
    expect(covered(p, join(ws, '.gitconfig-shared'))).toBe(true);
    expect(covered(p, join(ws, 'git', 'more.inc'))).toBe(true);
    expect(covered(p, join(ws, 'config', 'branch.inc'))).toBe(true);
    expect(p.readOnlyPaths).not.toContain(outside);
    expect(covered(p, join(ws, 'config', 'other.inc'))).toBe(false);
  });

  it("the user's global config including a file in the workspace, and a hooks directory named only by an include", () => {
    const repo = dir(join(ws, 'app'));
    git(repo, 'init', '-q');
    file(join(home, '.gitconfig'), `[include]\n\tpath = ${join(ws, 'dotfiles', 'git.inc')}\n`);
    file(join(repo, 'shared.inc'), '[core]\n\thooksPath = .githooks\n');
    git(repo, 'config', 'include.path', '../shared.inc');
    const hooks = dir(join(repo, '.githooks'));
    const p = policy();
    expect(covered(p, join(ws, 'dotfiles', 'git.inc'))).toBe(true);
    expect(covered(p, join(repo, 'shared.inc'))).toBe(true);
    expect(covered(p, hooks)).toBe(true);
  });
});

// What a config says is read with git's own grammar (and line by line besides): spellings git reads
// that a looser reading got wrong. Each expected value is what the real git reads from that text.
describe('git configs read as git reads them', () => {
  /** A repository in the workspace whose .git/config ends with `text`; its path. */
  const repoWithConfig = (text: string): string => {
    git(ws, 'init', '-q');
    const config = join(ws, '.git', 'config');
    writeFileSync(config, `${readFileSync(config, 'utf8')}${text}`);
    return config;
  };
  const HOOKS: [string, string][] = [
    ['on the header line', '[core] hooksPath = .hooks-a\n'],
    ['continued with a backslash', '[core]\n\thooksPath = .hooks\\\n-b\n'],
    ['quotes in the middle', '[core]\n\thooksPath = ".hooks"-c\n'],
    ['a comment without a blank before it', '[core]\n\thooksPath = .hooks-d;where hooks live\n'],
    ['mixed case, CRLF and a trailing comment', '[Core]\r\n\tHOOKSPATH=".hooks-e" # ours\r\n'],
  ];
  for (const [spelling, text] of HOOKS) {
    it(`core.hooksPath ${spelling}`, () => {
      const config = repoWithConfig(text);
      const value = git(ws, 'config', '--file', config, '--get', 'core.hooksPath').replace(/\n$/, '');
      expect(value).toMatch(/^\.hooks-[a-e]$/);
      dir(join(ws, value));
      dir(join(ws, '.hooks'));
      expect(covered(policy(), join(ws, value))).toBe(true);
      expect(covered(policy(), join(ws, '.hooks'))).toBe(false);
    });
  }

  const INCLUDES: [string, string][] = [
    ['continued with a backslash', '[include]\n\tpath = ../shared\\\n-a.inc\n'],
    ['quotes in the middle', '[include]\n\tpath = "../shared"-b.inc\n'],
    ['a comment without a blank before it', '[include]\n\tpath = ../shared-c.inc;team settings\n'],
    ['an includeIf on the header line', '[includeIf "onbranch:main"] path = ../shared-d.inc\n'],
  ];
  for (const [spelling, text] of INCLUDES) {
    it(`include.path ${spelling}`, () => {
      const config = repoWithConfig(text);
      const listed = git(ws, 'config', '--file', config, '--list', '--no-includes');
      const value = /^include(?:if\.[^=]*)?\.path=(.*)$/m.exec(listed)?.[1];
      expect(value).toMatch(/^\.\.\/shared-[a-d]\.inc$/);
      expect(covered(policy(), join(ws, '.git', value!))).toBe(true);
    });
  }
});

// A hook manager installs hooks that run what its files in the work tree say at each commit: those
// files decide what the user's next `git commit` runs, so where such a hook is installed they are
// read-only (and refused where missing: the path guard judges the path); where none is, they are
// ordinary files. The installed hooks below are the managers' own templates, cut to what is read.
describe('hook managers: what the installed hooks run from the work tree', () => {
  const HUSKY9_H =
    '#!/usr/bin/env sh\nn=$(basename "$0")\ns=$(dirname "$(dirname "$0")")/$n\n[ ! -f "$s" ] && exit 0\nexport PATH="node_modules/.bin:$PATH"\nsh -e "$s" "$@"\n';
  const preCommitHook = (config = '.pre-commit-config.yaml') =>
    `#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\nINSTALL_PYTHON=/usr/bin/python3\nARGS=(hook-impl --config=${config} --hook-type=pre-commit)\nexec "$INSTALL_PYTHON" -mpre_commit "\${ARGS[@]}"\n`;
  const LEFTHOOK_HOOK =
    '#!/bin/sh\nif [ "$LEFTHOOK" = "0" ]; then exit 0; fi\ncall_lefthook() { lefthook "$@"; }\ncall_lefthook run "pre-commit" "$@"\n';
  const hook = (repo: string, name: string, text: string) => {
    const path = file(join(repo, '.git', 'hooks', name), text);
    execFileSync('chmod', ['+x', path]);
    return path;
  };

  it('husky 9 (core.hooksPath .husky/_): the hooks it runs in .husky, made or not, are read-only', () => {
    for (const [repo, layout] of [
      [ws, 'h'],
      [dir(join(ws, 'packages', 'web')), 'husky.sh'],
    ] as const) {
      git(repo, 'init', '-q');
      const underscore = dir(join(repo, '.husky', '_'));
      file(join(underscore, layout), HUSKY9_H);
      file(join(underscore, 'pre-commit'), `#!/usr/bin/env sh\n. "\${0%/*}/${layout}"\n`);
      file(join(repo, '.husky', 'pre-commit'), 'npx lint-staged\n');
      git(repo, 'config', 'core.hooksPath', '.husky/_');
    }
    const p = policy();
    for (const repo of [ws, join(ws, 'packages', 'web')]) {
      expect(covered(p, join(repo, '.husky'))).toBe(true);
      expect(covered(p, join(repo, '.husky', 'pre-commit'))).toBe(true);
      expect(covered(p, join(repo, '.husky', 'post-checkout'))).toBe(true);
    }
    expect(covered(p, join(ws, 'package.json'))).toBe(false);
  });

  it('pre-commit: the config its installed hook names is read-only, at its default name or another', () => {
    git(ws, 'init', '-q');
    hook(ws, 'pre-commit', preCommitHook());
    hook(ws, 'pre-push', preCommitHook());
    file(join(ws, '.pre-commit-config.yaml'), 'repos: []\n');
    const other = dir(join(ws, 'svc'));
    git(other, 'init', '-q');
    hook(other, 'commit-msg', preCommitHook('ci/hooks.yaml'));
    const p = policy();
    expect(covered(p, join(ws, '.pre-commit-config.yaml'))).toBe(true);
    expect(covered(p, join(other, 'ci', 'hooks.yaml'))).toBe(true);
    expect(covered(p, join(other, '.pre-commit-config.yaml'))).toBe(false);
  });

  it('lefthook: every config name it reads (missing ones too), its script dirs, and what a config extends', () => {
    git(ws, 'init', '-q');
    hook(ws, 'pre-commit', LEFTHOOK_HOOK);
    file(
      join(ws, 'lefthook.yml'),
      'extends:\n  - shared/lefthook-base.yml # team\nrc: ./scripts/hook-rc.sh\nsource_dir: tools/hooks\npre-commit:\n  commands:\n    lint:\n      run: npm run lint\n',
    );
    const p = policy();
    for (const path of [
      'lefthook.yml',
      'lefthook-local.yml',
      '.lefthook-local.toml',
      '.config/lefthook.json',
      '.lefthook/pre-commit/check.sh',
      '.lefthook-local',
      'shared/lefthook-base.yml',
      'scripts/hook-rc.sh',
      'tools/hooks/pre-commit/x.sh',
    ])
      expect(covered(p, join(ws, path)), path).toBe(true);
    expect(covered(p, join(ws, 'scripts', 'build.sh'))).toBe(false);
  });

  it('husky 4: its rc files are read-only (package.json stays writable)', () => {
    git(ws, 'init', '-q');
    hook(
      ws,
      'pre-commit',
      '#!/bin/sh\n# husky\n# Created by Husky v4.3.8 (https://github.com/typicode/husky#readme)\n. "$(dirname "$0")/husky.sh"\n',
    );
    const p = policy();
    expect(covered(p, join(ws, '.huskyrc'))).toBe(true);
    expect(covered(p, join(ws, 'husky.config.js'))).toBe(true);
    expect(covered(p, join(ws, 'package.json'))).toBe(false);
  });

  it('without an installed manager hook, the same files are ordinary (a sample, a plain hook, no hook)', () => {
    git(ws, 'init', '-q');
    file(join(ws, '.pre-commit-config.yaml'), 'repos: []\n');
    file(join(ws, 'lefthook.yml'), 'pre-commit: {}\n');
    file(join(ws, '.husky', 'pre-commit'), 'npm test\n');
    file(join(ws, '.git', 'hooks', 'pre-commit.sample'), preCommitHook());
    hook(ws, 'post-merge', '#!/bin/sh\necho merged\n');
    const p = policy();
    for (const path of ['.pre-commit-config.yaml', 'lefthook.yml', '.husky/pre-commit', '.husky'])
      expect(covered(p, join(ws, path)), path).toBe(false);
  });
});

describe('modes, caches and the cache of the policy', () => {
  it('workspace-write: the sandbox-private cache dir is writable and tools are pointed into it', () => {
    const p = policy();
    const cache = join(home, '.cache', 'conch', 'sandbox', 'test');
    expect(p.writableRoots).toEqual([cache, ws].sort());
    expect(p.env.npm_config_cache?.startsWith(cache + sep)).toBe(true);
    expect(p.env.XDG_CACHE_HOME?.startsWith(cache + sep)).toBe(true);
    expect(statSync(p.env.npm_config_cache!).isDirectory()).toBe(true);
  });

  it("read-only and 'off' modes: nothing writable or pinned, the protected paths still found", () => {
    git(ws, 'init', '-q');
    const env = file(join(ws, 'a', '.env'));
    for (const mode of ['read-only', 'off'] as const) {
      const p = policy({ mode });
      expect(p.mode).toBe(mode);
      expect(p.writableRoots).toEqual([]);
      expect(p.pinnedPaths).toEqual([]);
      expect(p.readOnlyPaths).toEqual(expect.arrayContaining([env, join(ws, '.git', 'hooks')]));
    }
  });

  it('the policy is cached; a new .env, a new tool directory or a new nested repository in a walked directory is in a later policy', async () => {
    const a = dir(join(ws, 'a', 'b'));
    const b = builder();
    const first = b.policy();
    expect(b.policy()).toBe(first);
    const env = file(join(a, '.env.local'));
    await waitFor(() => b.policy().readOnlyPaths.includes(env), 'the new .env in the policy');
    const vscode = dir(join(ws, 'a', '.vscode'));
    await waitFor(() => b.policy().readOnlyPaths.includes(vscode), 'the new .vscode in the policy');
    const repo = dir(join(ws, 'cloned'));
    git(repo, 'init', '-q');
    await waitFor(
      () => b.policy().pinnedPaths.includes(join(repo, '.git')),
      'the new repository in the policy',
    );
    expect(b.policy().readOnlyPaths).toContain(join(repo, '.git', 'hooks'));
  });
});

describe('paths the policy cannot read', () => {
  it('a PATH or toolchain entry it cannot stat is left out, never thrown (one odd entry would fail every sandbox)', () => {
    const saved = { PATH: process.env.PATH, NVM_DIR: process.env.NVM_DIR };
    // Under the closed home, entries whose stat fails with something other than ENOENT: a name too
    // long (ENAMETOOLONG), a path through a file (ENOTDIR). (EACCES, another user's home in PATH as
    // `su` without `-` leaves it, fails the same way but cannot be made for root.)
    writeFileSync(join(home, 'a-file'), 'x');
    try {
      process.env.PATH = `${home}/${'x'.repeat(5000)}:${home}/a-file/bin:${saved.PATH ?? ''}`;
      process.env.NVM_DIR = `${home}/${'n'.repeat(5000)}`;
      const built = policy();
      expect(built.readablePaths ?? []).not.toContain(`${home}/a-file/bin`);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
