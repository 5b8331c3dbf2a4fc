// Invariant: the cookie finds every process that carries it, including one caught in the middle of
// an exec (its environ reads empty for a moment), so a sweep never leaves one behind.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canMount, waitFor } from '@conch/test-support';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  COOKIE_VAR,
  findCookiePids,
  findEnvPids,
  killProcessTree,
  PF_KTHREAD,
  pidAlive,
  procEntry,
  sweepCookieUntilGone,
  zombieExit,
} from './kill-tree.js';
import { ProcessManager } from './process-manager.js';
import { checkoutViewForAnyUser } from './test-support/procs.js';

let dir: string;
let execLoop: string;
const started: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-kill-tree-'));
  // A script that execs itself for ever: a good part of its life is spent inside execve, where
  // /proc/<pid>/environ reads empty.
  execLoop = join(dir, 'exec-loop.sh');
  writeFileSync(execLoop, '#!/bin/sh\nexec /bin/sh "$0"\n');
  chmodSync(execLoop, 0o755);
});
afterEach(() => {
  for (const child of started.splice(0))
    if (child.pid !== undefined && pidAlive(child.pid)) child.kill('SIGKILL');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function startLoop(cookie: string): number {
  const child = spawn(execLoop, [], {
    env: { PATH: process.env.PATH, [COOKIE_VAR]: cookie },
    stdio: 'ignore',
  });
  started.push(child);
  return child.pid!;
}

function isKernelThreadOrZombie(pid: number): boolean {
  const entry = procEntry(pid);
  return entry !== undefined && (entry.state === 'Z' || (entry.flags & PF_KTHREAD) !== 0);
}

describe.runIf(process.platform === 'linux')('the cookie scan', () => {
  it('sees a process that execs in a loop on every scan: as carrying the cookie, or as mid-exec', async () => {
    const cookie = `kill-tree-scan-${process.pid}`;
    const pid = startLoop(cookie);
    await waitFor(() => findCookiePids({ cookie }).includes(pid), { what: 'the loop', timeoutMs: 60_000 });
    let asCarrier = 0;
    let asExecing = 0;
    // 300 whole-/proc scans: each is a few ms idle, far more on a loaded machine (the timeout below
    // is for that: no outcome depends on the speed).
    for (let scan = 0; scan < 300; scan++) {
      const execing: number[] = [];
      const pids = findCookiePids({ cookie }, { execing });
      if (pids.includes(pid)) asCarrier++;
      else if (execing.includes(pid)) asExecing++;
      else expect.fail(`scan ${scan}: pid ${pid} was neither a carrier nor mid-exec`);
      for (const other of execing) expect(isKernelThreadOrZombie(other), `pid ${other}`).toBe(false);
    }
    expect(asCarrier + asExecing).toBe(300);
  }, 600_000);

  it(
    'never takes a zombie or a process with an empty environment for one mid-exec',
    { timeout: 300_000 },
    async () => {
      const cookie = `kill-tree-zombie-${process.pid}`;
      // `sleep 0` exits; `exec sleep 30` replaced its parent shell and never reaps it: a zombie
      // whose environ reads empty. `env -i` starts a process with no environment at all.
      const parent = spawn('/bin/sh', ['-c', 'sleep 0 & exec sleep 30'], {
        env: { PATH: process.env.PATH, [COOKIE_VAR]: cookie },
        stdio: 'ignore',
      });
      const bare = spawn('env', ['-i', 'sleep', '30'], { stdio: 'ignore' });
      started.push(parent, bare);
      await waitFor(() => childrenOf(parent.pid!).some(isKernelThreadOrZombie), {
        what: 'zombie',
        timeoutMs: 60_000,
      });
      await waitFor(() => readFileSync(`/proc/${bare.pid}/cmdline`, 'latin1').startsWith('sleep'), {
        what: 'env -i sleep',
        timeoutMs: 60_000,
      });
      const zombie = childrenOf(parent.pid!).find(isKernelThreadOrZombie)!;
      const execing: number[] = [];
      const pids = findCookiePids({ cookie }, { execing });
      expect(pids).toEqual([parent.pid]);
      expect(execing).not.toContain(zombie);
      expect(execing).not.toContain(bare.pid);
      expect(findEnvPids('PATH', process.env.PATH!, { execing })).not.toContain(bare.pid);
    },
  );

  it('sweepCookieUntilGone kills a process that execs in a loop, every time', async () => {
    for (let round = 0; round < 40; round++) {
      const cookie = `kill-tree-sweep-${process.pid}-${round}`;
      const pid = startLoop(cookie);
      await waitFor(() => findCookiePids({ cookie }).includes(pid), { what: 'the loop', timeoutMs: 60_000 });
      expect(await sweepCookieUntilGone(cookie, 60_000)).toBe(true);
      await waitFor(() => !pidAlive(pid), { what: `round ${round}: pid ${pid} gone`, timeoutMs: 60_000 });
    }
    // 40 rounds of whole-/proc sweeps: slow on a loaded machine, never wrong (the timeout is for that)
  }, 600_000);

  // A killed process's environ reads empty from the moment its memory starts being torn down, and
  // its state says dead only when that is done: large memory makes that moment long. The sweep must
  // wait for the process, not for the scan to come back empty (seen under load in CI: a kill's
  // result came while one of its processes was still exiting).
  it.each([
    ['1 GiB', 1],
    ['2 GiB', 2],
    ['2 GiB in four processes', 0.5, 4],
  ])(
    'sweepCookieUntilGone resolves only once a killed process with %s of memory is dead',
    async (_name, gib, count = 1) => {
      const cookie = `kill-tree-big-${process.pid}-${gib}-${count}`;
      const script = `import sys\nb = b"x" * int(${gib} * (1 << 30))\nprint("ready", flush=True)\nsys.stdin.read()\n`;
      const pids: number[] = [];
      for (let i = 0; i < count; i++) {
        const child = spawn('python3', ['-c', script], {
          env: { ...process.env, [COOKIE_VAR]: cookie },
          stdio: ['pipe', 'pipe', 'inherit'],
        });
        started.push(child);
        let out = '';
        child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        await waitFor(() => out.includes('ready'), { what: 'memory filled', timeoutMs: 120_000 });
        pids.push(child.pid!);
      }
      // No grace past the first scan: what is waited for is the processes themselves.
      await sweepCookieUntilGone(cookie, 0);
      expect(pids.filter((pid) => pidAlive(pid))).toEqual([]);
    },
    300_000,
  );

  // The same for a group: its members ignore SIGTERM, so the kill comes to SIGKILL at once, and
  // their exit (GiBs of memory to give back, on a loaded machine) may take longer than any fixed
  // second of retries.
  it.each([
    ['three members of 1 GiB', 3, 1],
    ['two members of 2 GiB', 2, 2],
  ])(
    'killProcessTree resolves only once every member of a group is dead: %s',
    async (_name, count, gib) => {
      const fill = `import signal, sys\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nb = b"x" * int(${gib} * (1 << 30))\nprint("ready", flush=True)\nsys.stdin.read()`;
      // The leader starts the others in its group, each filling its memory, and says when all have.
      const leader = spawn(
        'python3',
        [
          '-c',
          `import subprocess, sys\nps = [subprocess.Popen([sys.executable, "-c", ${JSON.stringify(fill)}], stdout=subprocess.PIPE) for _ in range(${count})]\nprint(" ".join(str(p.pid) for p in ps if p.stdout.readline()), flush=True)\nsys.stdin.read()`,
        ],
        { detached: true, stdio: ['pipe', 'pipe', 'inherit'] },
      );
      started.push(leader);
      let out = '';
      leader.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      await waitFor(() => out.includes('\n'), { what: 'members filled', timeoutMs: 120_000 });
      const members = out.trim().split(' ').map(Number);
      expect(members).toHaveLength(count);
      await killProcessTree(leader.pid!, { graceMs: 0 });
      expect([leader.pid!, ...members].filter((pid) => pidAlive(pid))).toEqual([]);
    },
    300_000,
  );

  it.each([
    ['through the supervisor', {}],
    ['in-process (no supervisor)', { supervisor: false }],
  ])(
    'kill() leaves no escapee that execs in a loop (%s)',
    async (_name, mode) => {
      const manager = new ProcessManager({ ...mode, tempDir: () => dir, cwd: dir, killGraceMs: 300 });
      try {
        for (let round = 0; round < 15; round++) {
          const proc = manager.spawn(`setsid ${execLoop} & echo ready; sleep 300`, [], { shell: true });
          await waitFor(
            () => proc.stdout.totalBytes > 0 && findCookiePids({ cookie: proc.cookie }).length >= 2,
            {
              what: 'the escapee',
              timeoutMs: 60_000,
            },
          );
          await proc.kill();
          expect(findCookiePids({ cookie: proc.cookie }).filter(pidAlive), `round ${round}`).toEqual([]);
        }
      } finally {
        await manager.dispose();
        // A loop left behind would spin for ever and slow every later test: never leave one.
        await sweepCookieUntilGone({ prefix: manager.cookiePrefix }, 60_000);
      }
    },
    // Generous for a machine at load 20: the rounds wait on events, never on the clock.
    600_000,
  );
});

/** A process's children, zombies included (/proc/<pid>/task/<pid>/children). */
function childrenOf(ppid: number): number[] {
  try {
    const list = readFileSync(`/proc/${ppid}/task/${ppid}/children`, 'latin1');
    return list.trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

describe.runIf(process.platform === 'linux')(
  'zombieExit: how an unreaped process ended, from the kernel',
  () => {
    // A parent that never waits: its child stays a zombie, with its exit status kept for the reaper.
    const parentOf = (childEnd: string): { parent: ChildProcess; child: Promise<number> } => {
      const parent = spawn(
        'python3',
        [
          '-c',
          `import os, sys, time\npid = os.fork()\nif pid == 0:\n    ${childEnd}\nprint(pid, flush=True)\ntime.sleep(60)`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      started.push(parent);
      const child = new Promise<number>((resolve) => {
        let text = '';
        parent.stdout!.on('data', (chunk: Buffer) => {
          text += chunk.toString();
          if (text.includes('\n')) resolve(Number(text.trim()));
        });
      });
      return { parent, child };
    };
    const cases: [string, string, { code: number | null; signal: number | null }][] = [
      ['exit 0', 'os._exit(0)', { code: 0, signal: null }],
      ['exit 7', 'os._exit(7)', { code: 7, signal: null }],
      ['exit 255', 'os._exit(255)', { code: 255, signal: null }],
      ['killed by SIGTERM', 'os.kill(os.getpid(), 15); time.sleep(5)', { code: null, signal: 15 }],
      ['killed by SIGKILL', 'os.kill(os.getpid(), 9)', { code: null, signal: 9 }],
      ['aborted (a core-dump signal)', 'os.abort()', { code: null, signal: 6 }],
    ];
    it.each(cases)('%s', async (_name, end, expected) => {
      const { child } = parentOf(end);
      const pid = await child;
      await waitFor(() => procEntry(pid)?.state === 'Z', { what: 'a zombie', timeoutMs: 10_000 });
      expect(zombieExit(pid)).toEqual(expected);
    });

    it('says nothing of a process that still runs, or of a pid that is gone', async () => {
      const { parent, child } = parentOf('time.sleep(60)');
      const pid = await child;
      expect(procEntry(pid)?.state).not.toBe('Z');
      expect(zombieExit(pid)).toBeUndefined();
      expect(zombieExit(parent.pid!)).toBeUndefined();
      parent.kill('SIGKILL');
      process.kill(pid, 'SIGKILL');
      await waitFor(() => procEntry(pid) === undefined, { what: 'reaped by init', timeoutMs: 10_000 });
      expect(zombieExit(pid)).toBeUndefined();
    });

    // A zombie's per-process files in /proc belong to root (it has no memory left), so an ordinary
    // user cannot list its fd directory, yet the kernel shows it the exit code of its own zombies.
    it.runIf(canMount)(
      "as an ordinary user: its own zombie's exit, not another user's; root reads both",
      async () => {
        const view = checkoutViewForAnyUser();
        const { child: rootsZombie } = parentOf('os._exit(9)');
        const rootPid = await rootsZombie;
        await waitFor(() => procEntry(rootPid)?.state === 'Z', { what: 'a zombie', timeoutMs: 10_000 });
        const dist = join(view, 'packages', 'process', 'dist', 'kill-tree.js');
        const script = join(dir, 'zombie-reader.mjs');
        writeFileSync(
          script,
          `import { spawn } from 'node:child_process';
import { procEntry, zombieExit } from ${JSON.stringify(dist)};
const parent = spawn('python3', ['-c', 'import os, time\\npid = os.fork()\\nif pid == 0:\\n    os._exit(7)\\nprint(pid, flush=True)\\ntime.sleep(60)'], { stdio: ['ignore', 'pipe', 'inherit'] });
const pid = await new Promise((resolve) => { let t = ''; parent.stdout.on('data', (c) => { t += c; if (t.includes('\\n')) resolve(Number(t.trim())); }); });
while (procEntry(pid)?.state !== 'Z') await new Promise((r) => setTimeout(r, 20));
console.log(JSON.stringify({ pid, own: zombieExit(pid) ?? null, roots: zombieExit(${rootPid}) ?? null }));
process.stdin.once('data', () => { parent.kill('SIGKILL'); process.exit(0); });
`,
        );
        execFileSync('chmod', ['755', dir]);
        execFileSync('chmod', ['644', script]);
        const reader = spawn(
          'setpriv',
          ['--reuid=nobody', '--regid=nogroup', '--clear-groups', process.execPath, script],
          {
            env: { PATH: process.env.PATH, HOME: '/nonexistent' },
            cwd: '/',
            stdio: ['pipe', 'pipe', 'inherit'],
          },
        );
        started.push(reader);
        const line = await new Promise<string>((resolve) => {
          let text = '';
          reader.stdout!.on('data', (chunk: Buffer) => {
            text += chunk.toString();
            if (text.includes('\n')) resolve(text.trim());
          });
        });
        const seen = JSON.parse(line) as { pid: number; own: unknown; roots: unknown };
        expect(seen.own).toEqual({ code: 7, signal: null });
        expect(seen.roots).toBeNull(); // another user's: the kernel would print 0
        // Root (CAP_SYS_PTRACE) reads nobody's zombie and its own.
        expect(zombieExit(seen.pid)).toEqual({ code: 7, signal: null });
        expect(zombieExit(rootPid)).toEqual({ code: 9, signal: null });
        reader.stdin!.write('done\n');
      },
    );
  },
);
