// Invariant: a sandbox profile really walls the command in (read-only: nothing written anywhere, private /tmp, no network; workspace: only the listed paths are read-only) — through a sandboxed supervisor and, without one, per command.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { createRequire } from 'node:module';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { findBwrap } from './bubblewrap-executor.js';
import { procEntry } from './kill-tree.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import type { SandboxProfile } from './sandbox-profile.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();
const ptyModule = createRequire(import.meta.url).resolve('@lydell/node-pty');
let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});
afterAll(() => {
  server.close();
});

// Under CI (.ci/run installs bubblewrap) a missing bwrap fails these tests instead of skipping them.
describe.runIf(bwrap || process.env.CI).each([
  ['through a sandboxed supervisor', {}],
  ['per command, without a supervisor', { supervisor: false }],
] as [string, ProcessManagerOptions][])('sandbox profiles %s', (_name, mode) => {
  let ws: string;
  let manager: ProcessManager;
  beforeEach(() => {
    ws = mkdtempSync(join(tmpdir(), 'conch-sandbox-'));
    manager = new ProcessManager({ ...mode, cwd: ws, tempDir: () => ws, killGraceMs: 300, drainMs: 300 });
  });
  afterEach(async () => {
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(ws, { recursive: true, force: true });
  });

  const run = (script: string, sandbox?: SandboxProfile) =>
    manager.spawn(script, [], { shell: '/bin/bash', ...(sandbox ? { sandbox } : {}) }).result;
  const connect = `echo hi > /dev/tcp/127.0.0.1/PORT && echo connected`;

  describe('read-only', () => {
    const ro = { kind: 'read-only' } as const;

    it('writes fail with EROFS in the workspace and in $HOME, and nothing is written', async () => {
      const marker = `.conch-ro-${randomBytes(4).toString('hex')}`;
      const result = await run(`echo x > file; echo x > "$HOME/${marker}"; echo done`, ro);
      expect(result.sandbox).toBe('read-only');
      expect(result.stderr.head.match(/Read-only file system/g)).toHaveLength(2);
      expect(result.stdout.head).toBe('done\n');
      expect(existsSync(join(ws, 'file'))).toBe(false);
      expect(existsSync(join(homedir(), marker))).toBe(false);
    });

    it('/tmp is private: a file written there is not visible outside', async () => {
      const name = `/tmp/conch-private-${randomBytes(4).toString('hex')}`;
      const result = await run(`echo secret > ${name} && cat ${name}`, ro);
      expect(result.stdout.head).toBe('secret\n');
      expect(existsSync(name)).toBe(false);
    });

    it('the network is down (a loopback server outside cannot be reached)', async () => {
      const script = connect.replace('PORT', String(port));
      expect((await run(script)).stdout.head).toBe('connected\n');
      const boxed = await run(script, ro);
      expect(boxed.stdout.head).toBe('');
      expect(boxed.exitCode).not.toBe(0);
    });

    it('reads work, /dev/null works, and a PTY works', async () => {
      writeFileSync(join(ws, 'readme'), 'readable\n');
      const result = await run('cat readme; echo gone > /dev/null && echo ok', ro);
      expect(result.stdout.head).toBe('readable\nok\n');
      const pty = manager.spawnPty({
        file: '/bin/sh',
        args: ['-i'],
        cwd: ws,
        env: { PATH: process.env.PATH },
        cols: 80,
        rows: 24,
        ptyModule,
        sandbox: ro,
      });
      expect(pty.sandbox).toBe('read-only');
      let out = '';
      pty.onData((d) => (out += d));
      pty.write('tty; echo x > f; echo pt""y-done\n');
      await waitFor(() => out.includes('pty-done'), { what: 'pty output', timeoutMs: 10_000 });
      expect(out).toMatch(/\/dev\/pts\/\d+/);
      expect(out).toMatch(/Read-only file system/);
    });
  });

  describe('workspace', () => {
    it('the workspace is writable, each readOnlyPath is not, missing ones are skipped and reported', async () => {
      writeFileSync(join(ws, '.bashrc'), 'original\n');
      mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
      const sandbox = {
        kind: 'workspace',
        readOnlyPaths: [join(ws, '.bashrc'), '.git/hooks', join(ws, '.missing')],
      } as const;
      const result = await run(
        'echo w > written; echo evil >> .bashrc; touch .git/hooks/pre-commit; echo done',
        sandbox,
      );
      expect(result.sandbox).toBe('workspace');
      expect(readFileSync(join(ws, 'written'), 'utf8')).toBe('w\n');
      expect(readFileSync(join(ws, '.bashrc'), 'utf8')).toBe('original\n');
      expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
      expect(result.stderr.head.match(/Read-only file system/g)).toHaveLength(2);
      expect(existsSync(join(ws, '.missing'))).toBe(false);
      expect((await manager.status()).skippedReadOnlyPaths).toEqual([join(ws, '.missing')]);
    });

    it('the network is shared', async () => {
      const result = await run(connect.replace('PORT', String(port)), {
        kind: 'workspace',
        readOnlyPaths: [],
      });
      expect(result.stdout.head).toBe('connected\n');
    });

    it('a PTY works in the workspace profile, with the read-only paths enforced', async () => {
      writeFileSync(join(ws, '.bashrc'), 'original\n');
      const pty = manager.spawnPty({
        file: '/bin/sh',
        args: ['-i'],
        cwd: ws,
        env: { PATH: process.env.PATH },
        cols: 80,
        rows: 24,
        ptyModule,
        sandbox: { kind: 'workspace', readOnlyPaths: [join(ws, '.bashrc')] },
      });
      expect(pty.sandbox).toBe('workspace');
      let out = '';
      pty.onData((d) => (out += d));
      pty.write('tty; echo ok > f; echo evil >> .bashrc; echo pt""y-done\n');
      await waitFor(() => out.includes('pty-done'), { what: 'pty output', timeoutMs: 10_000 });
      expect(out).toMatch(/\/dev\/pts\/\d+/);
      expect(readFileSync(join(ws, 'f'), 'utf8')).toBe('ok\n');
      expect(readFileSync(join(ws, '.bashrc'), 'utf8')).toBe('original\n');
    });
  });
});

describe.runIf(bwrap || process.env.CI)('sandboxed supervisors', () => {
  it('one supervisor per profile: sandboxed commands share it (namespaces paid once)', async () => {
    const m = new ProcessManager({ killGraceMs: 300 });
    try {
      const a = m.spawn('sleep', ['30'], { sandbox: { kind: 'read-only' } });
      const b = m.spawn('sleep', ['30'], { sandbox: { kind: 'read-only' } });
      const c = m.spawn('sleep', ['30']);
      const [pa, pb, pc] = await Promise.all([a.spawned, b.spawned, c.spawned]);
      expect(procEntry(pa!)!.ppid).toBe(procEntry(pb!)!.ppid);
      expect(procEntry(pa!)!.ppid).not.toBe(procEntry(pc!)!.ppid);
      await Promise.all([a.kill(), b.kill(), c.kill()]);
    } finally {
      await m.dispose();
    }
  });
});
