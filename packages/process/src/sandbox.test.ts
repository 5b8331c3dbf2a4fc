// Invariant: a sandbox profile really walls the command in (read-only: nothing written anywhere, private /tmp, no network; workspace: only the listed paths are read-only) — through a sandboxed supervisor and, without one, per command.
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { createRequire } from 'node:module';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { findBwrap, type SandboxProfile } from '@conch/sandbox';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { procEntry } from './kill-tree.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';

type WorkspaceWrite = Extract<SandboxProfile, { kind: 'workspace-write' }>;
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

  describe('protected', () => {
    it('the workspace is writable, each readOnlyPath is not, missing ones are skipped and reported', async () => {
      writeFileSync(join(ws, '.bashrc'), 'original\n');
      mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
      const sandbox = {
        kind: 'protected',
        readOnlyPaths: [join(ws, '.bashrc'), '.git/hooks', join(ws, '.missing')],
      } as const;
      const result = await run(
        'echo w > written; echo evil >> .bashrc; touch .git/hooks/pre-commit; echo done',
        sandbox,
      );
      expect(result.sandbox).toBe('protected');
      expect(readFileSync(join(ws, 'written'), 'utf8')).toBe('w\n');
      expect(readFileSync(join(ws, '.bashrc'), 'utf8')).toBe('original\n');
      expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
      expect(result.stderr.head.match(/Read-only file system/g)).toHaveLength(2);
      expect(existsSync(join(ws, '.missing'))).toBe(false);
      expect((await manager.status()).skippedReadOnlyPaths).toEqual([join(ws, '.missing')]);
    });

    it('the network is shared', async () => {
      const result = await run(connect.replace('PORT', String(port)), {
        kind: 'protected',
        readOnlyPaths: [],
      });
      expect(result.stdout.head).toBe('connected\n');
    });

    it('a PTY works in the protected profile, with the read-only paths enforced', async () => {
      writeFileSync(join(ws, '.bashrc'), 'original\n');
      const pty = manager.spawnPty({
        file: '/bin/sh',
        args: ['-i'],
        cwd: ws,
        env: { PATH: process.env.PATH },
        cols: 80,
        rows: 24,
        ptyModule,
        sandbox: { kind: 'protected', readOnlyPaths: [join(ws, '.bashrc')] },
      });
      expect(pty.sandbox).toBe('protected');
      let out = '';
      pty.onData((d) => (out += d));
      pty.write('tty; echo ok > f; echo evil >> .bashrc; echo pt""y-done\n');
      await waitFor(() => out.includes('pty-done'), { what: 'pty output', timeoutMs: 10_000 });
      expect(out).toMatch(/\/dev\/pts\/\d+/);
      expect(readFileSync(join(ws, 'f'), 'utf8')).toBe('ok\n');
      expect(readFileSync(join(ws, '.bashrc'), 'utf8')).toBe('original\n');
    });
  });
  describe('workspace-write', () => {
    const wsw = (
      extra: Partial<Extract<SandboxProfile, { kind: 'workspace-write' }>> = {},
    ): SandboxProfile => ({
      kind: 'workspace-write',
      writableRoots: [ws],
      readOnlyPaths: [],
      ...extra,
    });

    it('the workspace is writable; the rest of the filesystem, $HOME included, is not', async () => {
      const marker = `.conch-wsw-${randomBytes(4).toString('hex')}`;
      const outside = mkdtempSync(join(homedir(), '.conch-outside-'));
      try {
        const result = await run(
          `echo in > inside; echo x > "$HOME/${marker}"; echo x > ${outside}/f; touch /usr/conch-${marker}; echo done`,
          wsw(),
        );
        expect(result.sandbox).toBe('workspace-write');
        expect(readFileSync(join(ws, 'inside'), 'utf8')).toBe('in\n');
        expect(result.stderr.head.match(/Read-only file system/g)).toHaveLength(3);
        expect(existsSync(join(homedir(), marker))).toBe(false);
        expect(existsSync(join(outside, 'f'))).toBe(false);
      } finally {
        rmSync(outside, { recursive: true, force: true });
      }
    });

    it('protected paths stay read-only inside the workspace; a pinned directory cannot be renamed away', async () => {
      mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
      writeFileSync(join(ws, '.git', 'config'), '[core]\n');
      writeFileSync(join(ws, '.env'), 'TOKEN=1\n');
      const result = await run(
        [
          'echo evil > .git/hooks/pre-commit',
          'echo evil >> .git/config',
          'echo evil >> .env',
          'rm -f .env',
          'mv .git/hooks hooks-away',
          'mv .git git-away',
          'echo obj > .git/objects-ok',
          'echo done',
        ].join('; '),
        wsw({
          readOnlyPaths: [join(ws, '.git', 'hooks'), join(ws, '.git', 'config'), join(ws, '.env')],
          pinnedPaths: [join(ws, '.git')],
        }),
      );
      expect(result.stdout.head).toBe('done\n');
      expect(existsSync(join(ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
      expect(readFileSync(join(ws, '.git', 'config'), 'utf8')).toBe('[core]\n');
      expect(readFileSync(join(ws, '.env'), 'utf8')).toBe('TOKEN=1\n');
      // `mv` of a mount point: rename fails (EXDEV/EBUSY); mv may leave a copy, never move the original.
      expect(readdirSync(join(ws, '.git', 'hooks'))).toEqual([]);
      expect(existsSync(join(ws, 'git-away'))).toBe(false);
      expect(readFileSync(join(ws, '.git', 'objects-ok'), 'utf8')).toBe('obj\n');
    });

    it('each spawn reads its profile: a new protected path, the same object given new fields, a shared directory', async () => {
      for (const f of ['a', 'b', 'c']) writeFileSync(join(ws, f), 'orig\n');
      const write = 'for f in a b c; do echo new > $f && echo "wrote $f"; done; true';
      const wrote = (result: { stdout: { head: string } }) =>
        result.stdout.head
          .split('\n')
          .filter(Boolean)
          .map((line) => line.slice('wrote '.length));
      const profile = wsw({ readOnlyPaths: [join(ws, 'a')] }) as WorkspaceWrite;
      expect(wrote(await run(write, profile))).toEqual(['b', 'c']);
      // A new profile with the same writable roots and one more protected path.
      expect(wrote(await run(write, { ...profile, readOnlyPaths: [join(ws, 'a'), join(ws, 'b')] }))).toEqual([
        'c',
      ]);
      // The first object again, unchanged, then with a field replaced in place.
      expect(wrote(await run(write, profile))).toEqual(['b', 'c']);
      (profile as { readOnlyPaths: readonly string[] }).readOnlyPaths = [join(ws, 'c')];
      expect(wrote(await run(write, profile))).toEqual(['a', 'b']);
      // A directory shared after the first spawns is writable in the next one.
      const shared = mkdtempSync(join(homedir(), '.conch-shared-'));
      try {
        const touch = `echo x > ${shared}/f && echo ok`;
        if (mode.supervisor !== false) {
          expect((await run(touch, profile)).stderr.head).toMatch(/Read-only file system/);
        }
        manager.shareWithSandbox({ writable: [shared] });
        expect((await run(touch, profile)).stdout.head).toBe('ok\n');
        expect(readFileSync(join(shared, 'f'), 'utf8')).toBe('x\n');
      } finally {
        rmSync(shared, { recursive: true, force: true });
      }
    });

    it('hidden variables stay hidden on every spawn, one set after the first spawn included', async () => {
      const names = ['CONCH_T_SECRET_A', 'CONCH_T_SECRET_B', 'CONCH_T_SECRET_KEEP', 'CONCH_T_PLAIN'];
      const profile = wsw({ hiddenEnv: ['CONCH_T_SECRET_*'], keptEnv: ['*_KEEP'] });
      const show = `for v in ${names.join(' ')}; do echo "$v=\${!v-unset}"; done`;
      process.env.CONCH_T_SECRET_A = 'a';
      process.env.CONCH_T_PLAIN = 'p';
      try {
        expect((await run(show, profile)).stdout.head).toBe(
          'CONCH_T_SECRET_A=unset\nCONCH_T_SECRET_B=unset\nCONCH_T_SECRET_KEEP=unset\nCONCH_T_PLAIN=p\n',
        );
        process.env.CONCH_T_SECRET_B = 'b';
        process.env.CONCH_T_SECRET_KEEP = 'k';
        expect((await run(show, profile)).stdout.head).toBe(
          'CONCH_T_SECRET_A=unset\nCONCH_T_SECRET_B=unset\nCONCH_T_SECRET_KEEP=k\nCONCH_T_PLAIN=p\n',
        );
        // Given by the caller for this spawn (a template's env_vars): its author's choice, passed.
        const result = await manager.spawn(show, [], {
          shell: '/bin/bash',
          sandbox: profile,
          env: { CONCH_T_SECRET_A: 'given' },
        }).result;
        expect(result.stdout.head).toContain('CONCH_T_SECRET_A=given\n');
        expect(result.stdout.head).toContain('CONCH_T_SECRET_B=unset\n');
      } finally {
        for (const name of names) delete process.env[name];
      }
    });

    it('/tmp is private and writable; the environment gets the profile variables', async () => {
      const name = `/tmp/conch-wsw-${randomBytes(4).toString('hex')}`;
      const result = await run(
        `echo t > ${name} && cat ${name} && echo "$CONCH_TEST_CACHE"`,
        wsw({
          env: { CONCH_TEST_CACHE: '/cache/here' },
        }),
      );
      expect(result.stdout.head).toBe('t\n/cache/here\n');
      expect(existsSync(name)).toBe(false);
    });

    it('its own pid namespace: the host and its processes are invisible and cannot be signalled', async () => {
      const script = [
        `kill -0 ${process.pid} 2>/dev/null && echo host-visible`,
        `test -e /proc/${process.pid}/environ && echo environ-visible`,
        `ls /proc | grep -E '^[0-9]+$' | wc -l`,
        'echo done',
      ].join('; ');
      const result = await run(script, wsw());
      expect(result.stdout.head).not.toContain('visible');
      // bwrap's init, bash, ls, grep, wc (and perhaps a subshell): a handful, never the host's hundreds.
      const count = Number(result.stdout.head.split('\n')[0]);
      expect(count).toBeLessThan(12);
      expect(result.stdout.head).toContain('done');
    });

    it('no capabilities: the walls cannot be unmounted or remounted, and kernel knobs are read-only', async () => {
      writeFileSync(join(ws, '.env'), 'TOKEN=1\n');
      const result = await run(
        [
          'grep CapEff /proc/self/status',
          'umount .env 2>/dev/null && echo unmounted',
          'mount -o remount,rw / 2>/dev/null && echo remounted',
          'echo x 2>/dev/null > /proc/sys/kernel/hostname && echo sysctl-written',
          'echo evil >> .env 2>/dev/null || echo env-protected',
        ].join('; '),
        wsw({ readOnlyPaths: [join(ws, '.env')] }),
      );
      expect(result.stdout.head).toMatch(/CapEff:\s+0+\n/);
      expect(result.stdout.head).not.toMatch(/unmounted|remounted|sysctl-written/);
      expect(result.stdout.head).toContain('env-protected');
      expect(readFileSync(join(ws, '.env'), 'utf8')).toBe('TOKEN=1\n');
    });

    if (mode.supervisor !== false) {
      it("a command cannot end its sandbox's supervisor by a catchable signal; SIGKILL is reported as lost", async () => {
        const first = await run(
          'kill -TERM $PPID; kill -HUP $PPID; kill -INT $PPID; kill -USR1 $PPID; echo sent',
          wsw(),
        );
        expect(first.stdout.head).toBe('sent\n');
        const pids = manager.supervisorPids();
        expect((await run('echo still', wsw())).stdout.head).toBe('still\n');
        expect(manager.supervisorPids()).toEqual(pids);
        const killed = await run('kill -9 $PPID; sleep 30', wsw());
        expect(killed.supervisorLost).toMatch(/supervisor/);
        // The next command gets a new sandbox.
        expect((await run('echo again', wsw())).stdout.head).toBe('again\n');
      });
    }

    it('the network is down', async () => {
      const boxed = await run(connect.replace('PORT', String(port)), wsw());
      expect(boxed.stdout.head).toBe('');
      expect(boxed.exitCode).not.toBe(0);
    });

    it('pids are host pids: a sandboxed process can be inspected, timed out and killed from the host', async () => {
      const proc = manager.spawn('sleep', ['30'], { sandbox: wsw() });
      const pid = await proc.spawned;
      expect(pid).toBeDefined();
      // alive: running, sleeping, or in disk sleep (a busy machine still paging `sleep` in)
      expect(procEntry(pid!)?.state).toMatch(/[RSD]/);
      // posix_spawn returns once the child's exec has replaced its memory, a moment before the
      // kernel fills in the new image's command line (empty until then).
      await waitFor(() => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('sleep'), {
        what: 'sleep in its command line',
        timeoutMs: 10_000,
      });
      await proc.kill();
      expect((await proc.result).killed).toBe(true);
      expect(procEntry(pid!)).toBeUndefined();
      const timed = await manager.spawn('sleep', ['30'], { sandbox: wsw(), timeoutMs: 300 }).result;
      expect(timed.timedOut).toBe(true);
    });

    it('what a command leaves running is reported with host pids and killed with it', async () => {
      const proc = manager.spawn('sleep 30 >/dev/null 2>&1 & echo started', [], {
        shell: '/bin/bash',
        sandbox: wsw(),
      });
      const result = await proc.result;
      expect(result.stdout.head).toBe('started\n');
      if (mode.supervisor === false) {
        // One bwrap per command: its pid namespace ends with the command, and takes the rest along.
        expect(result.leftRunning).toEqual([]);
        // The kernel ends the namespace's other processes when its init exits, asynchronously.
        await waitFor(() => survivors(manager.cookiePrefix).length === 0, {
          what: 'the pid namespace to take the leftover along',
          timeoutMs: 10_000,
        });
        return;
      }
      expect(result.leftRunning).toHaveLength(1);
      const left = result.leftRunning[0]!;
      expect(left.command).toContain('sleep 30');
      expect(procEntry(left.pid)).toBeDefined();
      await proc.kill();
      await waitFor(() => procEntry(left.pid) === undefined || procEntry(left.pid)?.state === 'Z', {
        what: 'the leftover to die',
        timeoutMs: 10_000,
      });
    });

    it('a PTY works, with a host pid, the protections and no view of the host', async () => {
      writeFileSync(join(ws, '.env'), 'TOKEN=1\n');
      const pty = manager.spawnPty({
        file: '/bin/sh',
        args: ['-i'],
        cwd: ws,
        env: { PATH: process.env.PATH },
        cols: 80,
        rows: 24,
        ptyModule,
        sandbox: wsw({ readOnlyPaths: [join(ws, '.env')] }),
      });
      expect(pty.sandbox).toBe('workspace-write');
      // A host pid: the shell (through a supervisor) or the bwrap around it (per PTY).
      expect(procEntry(pty.pid)).toBeDefined();
      let out = '';
      pty.onData((d) => (out += d));
      pty.write(
        `tty; echo ok > f; echo evil >> .env; kill -0 ${process.pid} || echo no-host; echo pt""y-done\n`,
      );
      await waitFor(() => out.includes('pty-done'), { what: 'pty output', timeoutMs: 10_000 });
      expect(out).toMatch(/\/dev\/pts\/\d+/);
      expect(out).toContain('no-host');
      expect(readFileSync(join(ws, 'f'), 'utf8')).toBe('ok\n');
      expect(readFileSync(join(ws, '.env'), 'utf8')).toBe('TOKEN=1\n');
    });
  });
});

describe.runIf(bwrap || process.env.CI)('a required sandbox that cannot start', () => {
  it('fails the spawn (ESANDBOX) instead of running the command unsandboxed', async () => {
    const ws = mkdtempSync(join(tmpdir(), 'conch-sandbox-'));
    const m = new ProcessManager({
      cwd: ws,
      supervisor: { execPath: '/nonexistent/node' },
      killGraceMs: 300,
    });
    try {
      const result = await m.spawn('touch', ['ran'], {
        sandbox: { kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [] },
      }).result;
      // The sandboxed supervisor could not start; the per-command sandbox is used instead, or,
      // where that fails too, nothing runs. Never unsandboxed.
      if (result.spawnError) {
        expect(result.spawnError.code).toBe('ESANDBOX');
        expect(existsSync(join(ws, 'ran'))).toBe(false);
      } else {
        expect(result.sandbox).toBe('workspace-write');
      }
      const unboxed = await m.spawn('true').result;
      expect(unboxed.exitCode).toBe(0);
    } finally {
      await m.dispose();
      rmSync(ws, { recursive: true, force: true });
    }
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
