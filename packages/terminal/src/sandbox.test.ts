// Invariant: with the real permission gate and its default sandbox, a terminal session runs confined — commands and input typed into shells write only the workspace, protected paths stay untouched, the host is out of reach, no human is asked — and a session outside the sandbox exists only when a human approves it.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { PluginRegistry, type ApprovalRequest, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { findBwrap } from '@conch/process';
import { trashPlugin } from '@conch/trash';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { terminalPlugin } from './plugin.js';

type Result = ToolResult & Record<string, any>;

const realHome = process.env.HOME;
let root: string;
let ws: string;
let home: string;
let registry: PluginRegistry;
let asked: ApprovalRequest[];
let decisions: { askedHuman: boolean; outcome: string; sandbox?: string }[];

async function setup(
  approve?: (r: ApprovalRequest) => Promise<'once' | 'deny'>,
  terminal: Record<string, unknown> = {},
): Promise<void> {
  registry = new PluginRegistry({
    cwd: ws,
    tempRoot: root,
    logger: pino({ level: 'silent' }),
    plugins: [permissionPlugin, terminalPlugin, trashPlugin],
  });
  registry.events.on('permission.decision', (e) => decisions.push(e));
  await registry.expose('permission', {
    ...(approve
      ? {
          approve: (r: ApprovalRequest) => {
            asked.push(r);
            return approve(r);
          },
        }
      : {}),
  });
  await registry.expose('trash', { dir: join(root, 'trash') });
  await registry.expose('terminal', { shell: '/bin/bash', ...terminal });
}
const call = async (args: Record<string, unknown>) => (await registry.execute('terminal', args)) as Result;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-terminal-sandbox-')));
  ws = join(root, 'ws');
  home = join(root, 'home');
  mkdirSync(ws);
  mkdirSync(home);
  process.env.HOME = home;
  asked = [];
  decisions = [];
});
afterEach(async () => {
  await registry?.dispose();
  process.env.HOME = realHome;
  rmSync(root, { recursive: true, force: true });
});

describe.runIf(findBwrap() || process.env.CI)('terminal sessions in the workspace sandbox', () => {
  it('commands write the workspace, never HOME or a protected path, and nobody is asked', async () => {
    await setup();
    mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(ws, '.env'), 'TOKEN=1\n');
    writeFileSync(join(home, '.bashrc'), '# rc\n');
    const r = await call({
      command: [
        'echo ok > notes.txt',
        `python3 -c "open('${home}/.bashrc','a').write('evil')" 2>/dev/null || echo home-refused`,
        `python3 -c "open('.git/hooks/pre-commit','w').write('evil')" 2>/dev/null || echo hook-refused`,
        `python3 -c "open('.env','a').write('evil')" 2>/dev/null || echo env-refused`,
        'cat notes.txt',
      ].join('; '),
    });
    expect(r.exit_code).toBe(0);
    expect(r.output).toContain('home-refused');
    expect(r.output).toContain('hook-refused');
    expect(r.output).toContain('env-refused');
    expect(readFileSync(join(ws, 'notes.txt'), 'utf8')).toBe('ok\n');
    expect(readFileSync(join(home, '.bashrc'), 'utf8')).toBe('# rc\n');
    expect(readFileSync(join(ws, '.env'), 'utf8')).toBe('TOKEN=1\n');
    expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(decisions.every((d) => !d.askedHuman && d.sandbox === 'workspace-write')).toBe(true);
  });

  it('input typed into a shell the model started is confined too', async () => {
    await setup();
    const started = await call({ command: 'bash --norc -i' });
    expect(started.session_id).toBeDefined();
    const r = await call({
      session_id: started.session_id,
      input: `python3 -c "open('${home}/typed','w').write('x')" 2>&1 | tail -1; echo typed-done\n`,
    });
    const out = `${r.output ?? ''}${(await call({ session_id: started.session_id, input: '' })).output ?? ''}`;
    expect(out).toMatch(/Read-only file system|typed-done/);
    expect(existsSync(join(home, 'typed'))).toBe(false);
    await call({ session_id: started.session_id, kill: true });
  });

  it('the host cannot be signalled from a session; killing the sandbox supervisor leaves the host running', async () => {
    await setup();
    // The parser denies `kill <host pid>`; a spelling it cannot read runs, and finds no such process.
    expect(await call({ command: `kill -9 ${process.pid}` })).toMatchObject({ permission_denied: true });
    const r = await call({ command: `python3 -c "import os; os.kill(${process.pid}, 9)" 2>&1 | tail -1` });
    expect(r.output).toMatch(/ProcessLookupError/);
    expect(process.kill(process.pid, 0)).toBe(true);
  });

  it('a workspace removed under the session: its cwd is still named where it was, not from the mount root', async () => {
    await setup();
    mkdirSync(join(ws, 'tdir', 'deeper'), { recursive: true });
    const first = await call({ command: 'cd tdir/deeper && pwd' });
    expect(first.cwd).toBe(join(ws, 'tdir', 'deeper'));
    // The whole workspace removed from outside (the user, another tool) while the session sits in it.
    rmSync(ws, { recursive: true, force: true });
    const after = await call({ command: 'echo still-here', session_id: first.session_id });
    expect(after.output).toContain('still-here');
    expect(after.cwd).toBe(join(ws, 'tdir', 'deeper'));
    // A spelling the shell was never in is not believed: the kernel's path, from the mount root.
    const spoofed = await call({ command: 'PWD=/etc/elsewhere', session_id: first.session_id });
    expect(spoofed.cwd).not.toBe('/etc/elsewhere');
  });

  it('a session outside the sandbox needs a human: refused without one, run outside when approved', async () => {
    await setup();
    const outside = join(home, 'outside-marker');
    const refused = await call({ command: `touch ${outside}`, sandbox: false, justification: 'test' });
    expect(refused).toMatchObject({ permission_denied: true });
    expect(existsSync(outside)).toBe(false);
    await registry.dispose();
    await setup(async () => 'once');
    const ran = await call({
      command: `touch ${outside}`,
      sandbox: false,
      justification: 'the test needs it',
    });
    expect(ran.exit_code).toBe(0);
    expect(existsSync(outside)).toBe(true);
    expect(asked.map((a) => a.escalation?.justification)).toEqual(['the test needs it']);
    // Inside the sandbox again, a command in a new (sandboxed) session cannot do the same.
    rmSync(outside);
    await call({ command: `touch ${outside} 2>/dev/null; true` });
    expect(existsSync(outside)).toBe(false);
  });

  // A session a human lets out runs with the host's environment: an entry in it that names the
  // workspace (an activated venv's bin, a dev PYTHONPATH, a NODE_OPTIONS --require) would run what
  // the agent wrote there under the commands the human approved.
  it('a session outside the sandbox finds programs and loads code only where no sandboxed command could have put them', async () => {
    const names = ['PATH', 'NODE_OPTIONS', 'PYTHONPATH', 'GIT_SSH_COMMAND'] as const;
    const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
    const out = join(root, 'out');
    mkdirSync(out);
    const markers = () => readdirSync(out).filter((f) => f.startsWith('evil-'));
    try {
      // Not a login shell: Debian's /etc/profile would set PATH afresh (other systems keep it).
      await setup(async () => 'once', { shellArgs: ['-i'] });
      // What the agent left in the workspace, from a sandboxed session (confined there).
      const planted = await call({
        command: [
          'mkdir -p bin py',
          `printf '#!/bin/sh\\ntouch ${out}/evil-path\\n' > bin/deploy-tool`,
          'chmod +x bin/deploy-tool',
          `printf 'require("fs").writeFileSync("${out}/evil-node", "")\\n' > hook.js`,
          `printf 'open("${out}/evil-py", "w").close()\\n' > py/sitecustomize.py`,
          `printf 'Host *\\n  ProxyCommand touch ${out}/evil-ssh\\n' > ssh_config`,
        ].join(' && '),
      });
      expect(planted.exit_code, JSON.stringify(planted)).toBe(0);
      expect(markers()).toEqual([]);
      // The user's environment names those places.
      process.env.PATH = `${ws}/bin:${saved.PATH}`;
      process.env.NODE_OPTIONS = `--max-old-space-size=512 --require ${ws}/hook.js`;
      process.env.PYTHONPATH = `${ws}/py`;
      process.env.GIT_SSH_COMMAND = 'ssh -F ssh_config';
      const line =
        'deploy-tool; node -e 0; python3 -c 0; git ls-remote ssh://example.invalid/r >/dev/null 2>&1';
      // The control: bash with this environment runs all four.
      const control = spawnSync('bash', ['-c', line], { cwd: ws, env: process.env, stdio: 'ignore' });
      expect(control.error).toBeUndefined();
      expect(markers().sort()).toEqual(['evil-node', 'evil-path', 'evil-py', 'evil-ssh']);
      for (const f of markers()) rmSync(join(out, f));
      const ran = await call({
        command: `${line}; node -p "'options: ' + process.env.NODE_OPTIONS"`,
        sandbox: false,
        justification: 'the deploy needs the host',
      });
      expect(asked).toHaveLength(1);
      expect(ran.output).toMatch(/deploy-tool: command not found/);
      // What is left of NODE_OPTIONS still applies: the user's heap flag, without the --require.
      expect(ran.output).toContain('options: --max-old-space-size=512\n');
      expect(markers()).toEqual([]);
    } finally {
      for (const n of names) {
        if (saved[n] === undefined) delete process.env[n];
        else process.env[n] = saved[n];
      }
    }
  });

  it('sandbox: false goes with a new command only', async () => {
    await setup();
    const started = await call({ command: 'true' });
    expect(started.exit_code).toBe(0);
    const r = await call({ command: 'true', session_id: 1, sandbox: false, justification: 'x' });
    expect(r).toMatchObject({ error_code: 'INVALID_ARGUMENTS' });
    expect((await call({ command: 'true', sandbox: false })) as Result).toMatchObject({
      error_code: 'INVALID_ARGUMENTS',
    });
  });
});
