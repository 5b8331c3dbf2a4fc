// Invariant: with the permission gate's sandbox on, the file tools write through the kernel — the sandbox's supervisor performs every write, so links are resolved by the kernel at the moment of the write, protected and outside paths stay untouched whatever the host-side checks saw, and writes inside the workspace need no prompt.
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, type ApprovalRequest, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { findBwrap } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { filesPlugin } from './files-plugin.js';

type Result = ToolResult & Record<string, any>;

const realHome = process.env.HOME;
let home: string;
let ws: string;
let registry: PluginRegistry;
let asked: ApprovalRequest[];

beforeEach(async () => {
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-kw-home-')));
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-kw-ws-')));
  process.env.HOME = home;
  asked = [];
  registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, filesPlugin] });
  await registry.expose('permission', {
    approve: (request: ApprovalRequest) => {
      asked.push(request);
      return Promise.resolve('once');
    },
  });
  await registry.expose('files');
});
afterEach(async () => {
  await registry.dispose();
  process.env.HOME = realHome;
  rmSync(ws, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

const call = async (tool: string, args: Record<string, unknown>) =>
  (await registry.execute(tool, args)) as Result;

describe.runIf(findBwrap() || process.env.CI)('file tools through the kernel sandbox', () => {
  it('writes and edits inside the workspace run without a prompt', async () => {
    expect(await call('write_file', { path: 'src/a.txt', content: 'one\n' })).toMatchObject({
      created: true,
    });
    expect(
      await call('edit_file', { path: 'src/a.txt', old_string: 'one', new_string: 'two' }),
    ).toMatchObject({
      replacements: 1,
    });
    expect(readFileSync(join(ws, 'src', 'a.txt'), 'utf8')).toBe('two\n');
    expect(asked).toEqual([]);
  });

  // Root writes anyway: only another user sees a read-only file refused.
  it.skipIf(process.getuid?.() === 0)(
    'a file made read-only (0444, 0400, 0555) is neither written nor edited, and stays as it was',
    async () => {
      for (const [name, mode] of [
        ['ro.txt', 0o444],
        ['mine.txt', 0o400],
        ['script.sh', 0o555],
      ] as const) {
        writeFileSync(join(ws, name), 'kept\n');
        chmodSync(join(ws, name), mode);
        const wrote = await call('write_file', { path: name, content: 'changed\n' });
        const edited = await call('edit_file', { path: name, old_string: 'kept', new_string: 'changed' });
        for (const r of [wrote, edited]) expect(r.error_code).toBe('FILE_PERMISSION_DENIED');
        expect(readFileSync(join(ws, name), 'utf8')).toBe('kept\n');
        expect(statSync(join(ws, name)).mode & 0o7777).toBe(mode);
      }
      expect(readdirSync(ws).filter((n) => n.endsWith('.conch-tmp'))).toEqual([]);
    },
  );

  it('a hard link to a file outside is replaced, never written through', async () => {
    mkdirSync(join(home, '.ssh'));
    writeFileSync(join(home, '.ssh', 'rc'), 'original\n');
    linkSync(join(home, '.ssh', 'rc'), join(ws, 'notes.txt'));
    writeFileSync(join(home, 'plain.txt'), 'plain\n');
    linkSync(join(home, 'plain.txt'), join(ws, 'plain-link.txt'));
    await call('write_file', { path: 'notes.txt', content: 'evil\n' });
    await call('edit_file', { path: 'plain-link.txt', old_string: 'plain', new_string: 'evil' });
    expect(readFileSync(join(home, '.ssh', 'rc'), 'utf8')).toBe('original\n');
    expect(readFileSync(join(home, 'plain.txt'), 'utf8')).toBe('plain\n');
  });

  it('protected paths and symlinks out of the workspace are refused, and nothing outside changes', async () => {
    mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(home, '.bashrc'), 'rc\n');
    symlinkSync(join(home, '.bashrc'), join(ws, 'rc-link'));
    symlinkSync(home, join(ws, 'home-link'));
    const results = [
      await call('write_file', { path: '.git/hooks/pre-commit', content: 'evil' }),
      await call('write_file', { path: 'rc-link', content: 'evil' }),
      await call('write_file', { path: 'home-link/new-file', content: 'evil' }),
      await call('write_file', { path: join(home, 'direct'), content: 'evil' }),
    ];
    for (const r of results) expect(r.error_code).toMatch(/PROTECTED|OUTSIDE|PERMISSION|DENIED/);
    expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(readFileSync(join(home, '.bashrc'), 'utf8')).toBe('rc\n');
    expect(existsSync(join(home, 'new-file'))).toBe(false);
    expect(existsSync(join(home, 'direct'))).toBe(false);
  });

  it('a directory swapped for a symlink to HOME while writes run never lands a file outside (the kernel judges each write)', async () => {
    mkdirSync(join(ws, 'real'));
    // A host process swaps ws/real between the directory and a symlink to $HOME as fast as it can:
    // a check of the real path in the host and the write after it see different things.
    const flipper = spawn(
      process.execPath,
      [
        '-e',
        `const fs = require('fs'); const [dir, home] = process.argv.slice(1);
         for (;;) {
           try { fs.renameSync(dir, dir + '.bak'); fs.symlinkSync(home, dir); } catch {}
           try { fs.unlinkSync(dir); fs.renameSync(dir + '.bak', dir); } catch {}
         }`,
        join(ws, 'real'),
        home,
      ],
      { stdio: 'ignore' },
    );
    try {
      for (let i = 0; i < 150; i++) await call('write_file', { path: `real/file-${i}.txt`, content: 'x' });
    } finally {
      flipper.kill('SIGKILL');
    }
    const escaped = Array.from({ length: 150 }, (_, i) => join(home, `file-${i}.txt`)).filter((p) =>
      existsSync(p),
    );
    expect(escaped).toEqual([]);
  });
});
