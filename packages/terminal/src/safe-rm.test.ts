// Invariant: in a real PTY session (bash and zsh) rm moves files, directories, globs and names with spaces into the trash, which restores them byte-identical; what the function does not cover deletes for good, and the real permission gate asks for every spelling of rm and denies rm -r of roots in every spelling.
import 'reflect-metadata';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PluginRegistry, type ApprovalRequest, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { findBwrap } from '@conch/process';
import { trashPlugin } from '@conch/trash';
import { terminalPlugin } from './plugin.js';

const ZSH = '/usr/bin/zsh';
const SHELLS = [
  { name: 'bash', shell: '/bin/bash' },
  ...(existsSync(ZSH) || process.env.CI ? [{ name: 'zsh', shell: ZSH }] : []),
];

let root: string;
let work: string;
let registry: PluginRegistry;
let asked: string[];
let answer: 'once' | 'deny';

async function setup(shell: string, sandbox: 'off' | 'workspace-write' = 'off'): Promise<void> {
  root = mkdtempSync(join(tmpdir(), 'conch-terminal-rm-'));
  work = join(root, 'work');
  mkdirSync(work);
  registry = new PluginRegistry({ cwd: work, tempRoot: root, logger: pino({ level: 'silent' }) });
  registry.register(permissionPlugin);
  registry.register(terminalPlugin);
  registry.register(trashPlugin);
  asked = [];
  answer = 'once';
  const approve = async (request: ApprovalRequest) => {
    asked.push(request.display);
    return answer;
  };
  await registry.expose('permission', { approve, sandbox });
  await registry.expose('trash', { dir: join(root, 'trash') });
  await registry.expose('terminal', { shell });
}

const call = (args: Record<string, unknown>) => registry.execute('terminal', args) as Promise<ToolResult>;
const trash = (args: Record<string, unknown>) => registry.execute('trash', args) as Promise<ToolResult>;

afterEach(async () => {
  await registry.dispose();
  rmSync(root, { recursive: true, force: true });
});

describe.each(SHELLS)('safe rm in a $name session', ({ shell }) => {
  beforeEach(async () => {
    await setup(shell);
  });

  it('moves files, directories, globs and names with spaces into the trash; restore is byte-identical', async () => {
    const binary = Buffer.from([0, 1, 2, 0xff, 0xfe, 10, 13, 0x1b]);
    mkdirSync(join(work, 'build', 'nested'), { recursive: true });
    writeFileSync(join(work, 'build', 'nested', 'blob.bin'), binary);
    writeFileSync(join(work, 'a.log'), 'log a\n');
    writeFileSync(join(work, 'b.log'), 'log b\n');
    writeFileSync(join(work, 'my notes.txt'), 'spaces\n');
    writeFileSync(join(work, 'keep.txt'), 'keep\n');
    const r = await call({ command: 'rm -r build *.log "my notes.txt"; echo "status $?"; ls' });
    expect(r).toMatchObject({ exit_code: 0, output: 'status 0\nkeep.txt\n' });
    expect(asked).toEqual(['rm -r build *.log "my notes.txt"; echo "status $?"; ls']);
    const listed = (await trash({ action: 'list' })) as {
      entries: { id: string; original_path: string; kind: string }[];
    };
    expect(listed.entries.map((e) => [e.original_path, e.kind]).sort()).toEqual([
      [join(work, 'a.log'), 'file'],
      [join(work, 'b.log'), 'file'],
      [join(work, 'build'), 'directory'],
      [join(work, 'my notes.txt'), 'file'],
    ]);
    // Restoring onto a file that exists again is refused; the rest come back byte-identical.
    writeFileSync(join(work, 'a.log'), 'new a\n');
    const conflict = listed.entries.find((e) => e.original_path.endsWith('a.log'))!;
    expect(await trash({ action: 'restore', id: conflict.id })).toMatchObject({
      error_code: 'TRASH_RESTORE_CONFLICT',
    });
    expect(readFileSync(join(work, 'a.log'), 'utf8')).toBe('new a\n');
    for (const e of listed.entries.filter((x) => x !== conflict)) {
      expect(await trash({ action: 'restore', id: e.id })).toMatchObject({ restored: { id: e.id } });
    }
    expect(readFileSync(join(work, 'build', 'nested', 'blob.bin'))).toEqual(binary);
    expect(readFileSync(join(work, 'b.log'), 'utf8')).toBe('log b\n');
    expect(readFileSync(join(work, 'my notes.txt'), 'utf8')).toBe('spaces\n');
  });

  it('behaves as rm for errors, -f and a directory without -r', async () => {
    mkdirSync(join(work, 'dir'));
    expect(await call({ command: 'rm missing.txt' })).toMatchObject({
      exit_code: 1,
      output: "rm: cannot remove 'missing.txt': No such file or directory\n",
    });
    expect(await call({ command: 'rm -f missing.txt' })).toMatchObject({ exit_code: 0, output: '' });
    expect(await call({ command: 'rm dir' })).toMatchObject({
      exit_code: 1,
      output: "rm: cannot remove 'dir': Is a directory\n",
    });
    expect(await call({ command: 'rm' })).toMatchObject({
      exit_code: 1,
      output: expect.stringContaining('rm: missing operand'),
    });
  });

  it('\\rm (alias bypass) still reaches the function; only aliases are skipped', async () => {
    writeFileSync(join(work, 'x.txt'), 'x');
    expect(await call({ command: '\\rm x.txt' })).toMatchObject({ exit_code: 0 });
    expect(await trash({ action: 'list' })).toMatchObject({ total: 1 });
  });

  it('rm -i waits for an answer like rm', async () => {
    writeFileSync(join(work, 'ask.txt'), 'x');
    const waiting = await call({ command: 'rm -i ask.txt' });
    expect(waiting).toMatchObject({ state: 'waiting', output: "rm: remove regular file 'ask.txt'? " });
    expect(await call({ session_id: waiting.session_id, input: 'y\n' })).toMatchObject({ exit_code: 0 });
    expect(existsSync(join(work, 'ask.txt'))).toBe(false);
    expect(await trash({ action: 'list' })).toMatchObject({ total: 1 });
  });

  // What the function does not cover: each is asked by the gate, and deletes for good once approved.
  it.each([
    ['command rm', 'command rm gone.txt'],
    ['/bin/rm', '/bin/rm gone.txt'],
    ['xargs rm', 'echo gone.txt | xargs rm'],
    ['find -delete', "find . -name 'gone.txt' -delete"],
    ['find -exec rm', "find . -name 'gone.txt' -exec rm {} +"],
    ['a child script', 'bash cleanup.sh'],
  ])('%s: the gate asks, and it deletes for good', async (_label, command) => {
    writeFileSync(join(work, 'gone.txt'), 'x');
    writeFileSync(join(work, 'cleanup.sh'), 'rm gone.txt\n');
    const r = await call({ command });
    expect(asked).toEqual([command]);
    expect(r).toMatchObject({ exit_code: 0 });
    expect(existsSync(join(work, 'gone.txt'))).toBe(false);
    expect(await trash({ action: 'list' })).toMatchObject({ total: 0 });
  });

  it.each([
    'rm -rf /',
    'rm -rf ~',
    'rm -r "$HOME"',
    'rm -rf .',
    'rm -rf ./*',
    'command rm -rf /',
    '/bin/rm -rf --no-preserve-root /',
    '\\rm -fr ~/',
    'find / -delete',
    'd=/; rm -rf "$d"',
  ])('%s: denied by the gate, never asked, nothing runs', async (command) => {
    writeFileSync(join(work, 'still-here.txt'), 'x');
    const r = await call({ command });
    expect(r).toMatchObject({ permission_denied: true, error_code: 'PERMISSION_DENIED' });
    expect(asked).toEqual([]);
    expect(existsSync(join(work, 'still-here.txt'))).toBe(true);
  });

  it('operands the gate cannot see (read from stdin by xargs) are asked about, not denied', async () => {
    answer = 'deny';
    const command = 'echo / | xargs rm -rf';
    expect(await call({ command })).toMatchObject({ permission_denied: true });
    expect(asked).toEqual([command]);
  });
});

describe.runIf(findBwrap() || process.env.CI).each(SHELLS)(
  'safe rm in a sandboxed $name session',
  ({ shell }) => {
    beforeEach(async () => {
      await setup(shell, 'workspace-write');
    });

    it('rm moves into the trash without a prompt; restoring asks, showing where it writes', async () => {
      writeFileSync(join(work, 'a.txt'), 'a\n');
      expect(await call({ command: 'rm a.txt; ls' })).toMatchObject({ exit_code: 0, output: '' });
      expect(asked).toEqual([]);
      const listed = (await trash({ action: 'list' })) as {
        entries: { id: string; original_path: string }[];
      };
      expect(listed.entries.map((e) => e.original_path)).toEqual([join(work, 'a.txt')]);
      expect(await trash({ action: 'restore', id: listed.entries[0]!.id })).toMatchObject({ restored: {} });
      expect(asked).toEqual([`restore trash entry ${listed.entries[0]!.id} to ${join(work, 'a.txt')}`]);
      expect(readFileSync(join(work, 'a.txt'), 'utf8')).toBe('a\n');
    });

    it('what the function does not cover deletes in the workspace without a prompt, never outside it', async () => {
      writeFileSync(join(work, 'gone.txt'), 'x');
      writeFileSync(join(root, 'outside.txt'), 'x');
      expect(await call({ command: 'command rm gone.txt' })).toMatchObject({ exit_code: 0 });
      expect(existsSync(join(work, 'gone.txt'))).toBe(false);
      // Outside the workspace (here under the host's /tmp, which the sandbox does not even show).
      await call({ command: `/bin/rm -f ${join(root, 'outside.txt')}` });
      expect(existsSync(join(root, 'outside.txt'))).toBe(true);
      expect(asked).toEqual([]);
    });

    it.each(['rm -rf ~', 'rm -rf .', 'find / -delete'])('%s: still denied by the gate', async (command) => {
      writeFileSync(join(work, 'still-here.txt'), 'x');
      expect(await call({ command })).toMatchObject({ permission_denied: true });
      expect(existsSync(join(work, 'still-here.txt'))).toBe(true);
    });
  },
);
