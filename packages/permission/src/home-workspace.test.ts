// Invariant: a workspace that is the home directory works as any workspace for ordinary work (projects, git, installs, spilled output read back, across sandbox restarts), while the home's configuration — every top-level `.*` entry and `~/bin`, existing or new — stays unwritable by every kind of write, so nothing the agent leaves there runs later in the user's shells, editors, services or PATH; a writable root the host names inside one stays writable.
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
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
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { requireUnderCi } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

const BWRAP = requireUnderCi(
  Boolean(findBwrap()),
  'bubblewrap (the home workspace tests)',
  'apt-get install bubblewrap',
);
/** Generous: a fresh sandbox starts slowly on a loaded machine; nothing here is timed. */
const T = 180_000;

type Result = ToolResult & Record<string, any>;
let home: string;
const realHome = process.env.HOME;
const registries: PluginRegistry[] = [];
const asked: unknown[] = [];

beforeEach(() => {
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-home-ws-')));
  process.env.HOME = home;
  // What a user's home has before the agent arrives.
  writeFileSync(join(home, '.bashrc'), '# rc\n');
  writeFileSync(join(home, '.tmux.conf'), '# the user tmux config\n');
  mkdirSync(join(home, '.config', 'nvim'), { recursive: true });
  writeFileSync(join(home, '.config', 'nvim', 'init.lua'), '-- the user init\n');
  mkdirSync(join(home, 'bin'));
});

afterEach(async () => {
  try {
    expect(asked).toEqual([]);
  } finally {
    asked.length = 0;
    for (const registry of registries.splice(0)) {
      const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
      await registry.dispose();
      if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
    }
    process.env.HOME = realHome;
    rmSync(home, { recursive: true, force: true });
  }
});

/** A host that opened its agent in the home directory: the default config, no approver. */
async function setup(permission: Record<string, unknown> = {}) {
  const registry = new PluginRegistry({ cwd: home, plugins: [permissionPlugin, cliPlugin] });
  registries.push(registry);
  registry.events.on('permission.decision', (e: { askedHuman?: boolean }) => {
    if (e.askedHuman) asked.push(e);
  });
  await registry.expose('permission', permission);
  await registry.expose('cli', {});
  // Timeouts generous: a venv's pip bootstrap takes seconds on a loaded machine.
  return (command: string) =>
    registry.execute('cli_based_tool', { command, timeout: 150 }) as Promise<Result>;
}

/** Every file under the home's configuration entries, with its content: what must not change. */
function configSnapshot(): string {
  return execFileSync(
    'sh',
    [
      '-c',
      'cd "$1" && find .[!.]* bin -print0 2>/dev/null | sort -z | xargs -0 -r sha1sum 2>/dev/null; find .[!.]* bin 2>/dev/null | sort',
      'sh',
      home,
    ],
    {
      encoding: 'utf8',
    },
  )
    .split('\n')
    .filter((line) => !/(^|\s)\.cache(\/conch(\/|$)|$)/.test(line)) // conch's own cache and output
    .join('\n');
}

describe.skipIf(!BWRAP)('a workspace that is the home directory', () => {
  it(
    'runs ordinary work and keeps working across sandbox restarts, its spilled output readable',
    async () => {
      const run = await setup();
      const project = await run(
        'mkdir -p proj && cd proj && git init -q && printf "x\\n" > a.txt && git add a.txt && git -c user.email=a@b.invalid -c user.name=n commit -qm one && git rev-list --count HEAD',
      );
      expect(project.returncode).toBe(0);
      expect(project.stdout.trim()).toBe('1');
      // A large output goes to a file under ~/.cache/conch/output (inside the workspace here).
      const big = await run('seq 1 300000');
      expect(big.returncode).toBe(0);
      expect(big.output_file).toBeTruthy();
      // Another workspace's output beside it, made by the host: not for this sandbox to see.
      const outputRoot = join(home, '.cache', 'conch', 'output');
      mkdirSync(join(outputRoot, 'ws-other'), { recursive: true });
      writeFileSync(join(outputRoot, 'ws-other', 'theirs.out'), 'another project\n');
      // The policy changes (a new directory with a protected name): the sandbox is rebuilt, with
      // the output root closed inside the home it binds writable. It must start.
      mkdirSync(join(home, 'proj', '.vscode'));
      for (const command of ['echo again > proj/b.txt && cat proj/b.txt', `tail -n 1 ${big.output_file}`]) {
        const r = await run(command);
        expect(r.returncode, `${command}: ${r.stderr}`).toBe(0);
      }
      expect((await run(`tail -n 1 ${big.output_file}`)).stdout.trim()).toBe('300000');
      const other = await run(`cat ${join(outputRoot, 'ws-other', 'theirs.out')}`);
      expect(other.returncode).not.toBe(0);
      expect(other.stdout).not.toContain('another project');
      expect(readFileSync(join(home, 'proj', 'b.txt'), 'utf8')).toBe('again\n');
      const venv = await run('cd proj && python3 -m venv .venv && .venv/bin/python -c "print(40 + 2)"');
      expect(venv.stdout.trim(), JSON.stringify(venv)).toBe('42');
    },
    T,
  );

  it(
    "never writes the home's configuration, by any kind of write, existing entries or new",
    async () => {
      const run = await setup();
      const before = configSnapshot();
      const attempts = [
        // New entries of every kind.
        'mkdir -p .config/systemd/user && printf "[Service]\\nExecStart=/bin/true\\n" > .config/systemd/user/x.service',
        'mkdir -p .local/bin && printf "#!/bin/sh\\n" > .local/bin/git && chmod +x .local/bin/git',
        "python3 -c \"open('.pythonrc.py', 'w').write('import os\\n')\"",
        'touch .hushlogin',
        'printf "#!/bin/sh\\n" > bin/ls && chmod +x bin/ls',
        'mkdir .mozilla',
        'ln -s /bin/sh bin/vim',
        'mkdir -p proj && printf "set shell=/bin/sh\\n" > proj/vimrc && cp proj/vimrc .vimrc',
        'mkdir -p proj && printf "x\\n" > proj/profile && mv proj/profile .xprofile',
        // Existing entries.
        'printf "run-shell true\\n" >> .tmux.conf',
        "node -e \"require('fs').appendFileSync('.config/nvim/init.lua', 'vim.cmd(1)')\"",
        'rm -f .tmux.conf',
        'mv .config/nvim .config/nvim.old',
        'chmod 777 bin',
        'rmdir bin',
        'mkdir -p .cache/pre-commit && printf "x" > .cache/pre-commit/hook',
        // Through a link the agent made in its project.
        'mkdir -p proj && ln -sfn "$HOME/.config" proj/cfg && printf "x" > proj/cfg/autostart.desktop',
      ];
      for (const command of attempts) {
        const r = await run(command);
        expect(r.returncode, `${command} succeeded: ${r.stdout}`).not.toBe(0);
        expect(configSnapshot(), command).toBe(before);
      }
      for (const gone of [
        '.config/systemd',
        '.local',
        '.pythonrc.py',
        '.hushlogin',
        'bin/ls',
        '.mozilla',
        '.vimrc',
        '.xprofile',
      ])
        expect(existsSync(join(home, gone)), gone).toBe(false);
      expect(readFileSync(join(home, '.tmux.conf'), 'utf8')).toBe('# the user tmux config\n');
      // The refusal says why, and what to do instead.
      const refused = await run('printf "x" > .inputrc2');
      expect(refused.error).toMatch(/configuration \(every ~\/\.\* entry and ~\/bin\) stays read-only/);
      // Files that are not configuration stay the agent's to write.
      const ok = await run('printf "notes\\n" > notes.txt && mkdir -p bin-tools && cat notes.txt');
      expect(ok.returncode).toBe(0);
      expect(readFileSync(join(home, 'notes.txt'), 'utf8')).toBe('notes\n');
    },
    T,
  );

  it(
    'keeps a writable root the host named inside a configuration entry writable, and only that',
    async () => {
      const prefix = join(home, '.npm-global');
      mkdirSync(prefix);
      const run = await setup({ writableRoots: [prefix] });
      const inRoot = await run('printf "ok\\n" > .npm-global/installed.txt && cat .npm-global/installed.txt');
      expect(inRoot.returncode, inRoot.stderr).toBe(0);
      expect(readFileSync(join(prefix, 'installed.txt'), 'utf8')).toBe('ok\n');
      const beside = await run('printf "x" > .npmrc-other');
      expect(beside.returncode).not.toBe(0);
      expect(existsSync(join(home, '.npmrc-other'))).toBe(false);
    },
    T,
  );
});
