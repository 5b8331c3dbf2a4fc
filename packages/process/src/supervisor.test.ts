// Invariant: through the supervisor the host never forks per command and no byte is lost in the handle passing (pins the node internals it relies on); without a usable supervisor conch spawns in-process and says so once.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBus } from '@conch/core';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { procEntry } from './kill-tree.js';
import { ProcessManager } from './process-manager.js';
import { memoryLogger, WARN } from './test-support/log.js';
import { survivors } from './test-support/procs.js';

let dir: string;
const managers: ProcessManager[] = [];
function manager(options: ConstructorParameters<typeof ProcessManager>[0] = {}): ProcessManager {
  const m = new ProcessManager({ tempDir: () => dir, cwd: dir, killGraceMs: 300, drainMs: 300, ...options });
  managers.push(m);
  return m;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-sup-'));
});
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.dispose()));
  rmSync(dir, { recursive: true, force: true });
});

const listPids = () =>
  readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');

describe('supervisor', () => {
  it('spawns every child (not the host): their parent is the supervisor, a child of the host', async () => {
    const m = manager();
    const procs = Array.from({ length: 10 }, () => m.spawn('sleep', ['30']));
    const pids = await Promise.all(procs.map((p) => p.spawned));
    const parents = new Set(pids.map((pid) => procEntry(pid!)!.ppid));
    expect(parents.size).toBe(1);
    const [supervisor] = [...parents];
    expect(supervisor).not.toBe(process.pid);
    expect(procEntry(supervisor!)!.ppid).toBe(process.pid);
    expect(cmdline(supervisor!)).toMatch(/supervisor-main\.js [0-9a-f]{8}- none/);
    // Its own session and process group: a Ctrl-C to the host's terminal never reaches it.
    expect(procEntry(supervisor!)!.pgrp).toBe(supervisor);
    await Promise.all(procs.map((p) => p.kill()));
    expect((await m.status()).supervisor).toBe('running');
  });

  it('loses no byte a child writes before or while its pipes are handed over (50 fast exits, 20 x 1 MiB)', async () => {
    // Without readStop()/detaching the pipes from ChildProcess in the supervisor, the first bytes
    // (or all of a fast child's output) are read by the supervisor and never reach the host.
    const m = manager();
    const small = Array.from({ length: 50 }, (_, i) => m.spawn('printf', [`x${i}`]));
    const big = Array.from({ length: 20 }, () =>
      m.spawn('head -c 1048576 /dev/zero; printf e >&2', [], { shell: true }),
    );
    const smallResults = await Promise.all(small.map((p) => p.result));
    expect(smallResults.map((r) => r.stdout.head)).toEqual(small.map((_, i) => `x${i}`));
    for (const r of await Promise.all(big.map((p) => p.result))) {
      expect(r.stdout.totalBytes).toBe(1048576);
      expect(r.stderr.head).toBe('e');
    }
  });

  it('stdin pipes of children that exit at once still arrive (node destroys stdin on exit)', async () => {
    const m = manager();
    await m.spawn('true').result; // the supervisor is up
    const procs = Array.from({ length: 30 }, (_, i) =>
      i % 2 ? m.spawn('echo', [`out${i}`], { stdin: 'pipe' }) : m.spawn('cat', [], { stdin: 'pipe' }),
    );
    for (const [i, p] of procs.entries()) p.stdin!.end(`in${i}`);
    // Hold the host's event loop so it acknowledges no handle: the children exit while their
    // stdin handles still wait in the supervisor's send queue.
    const until = Date.now() + 300;
    while (Date.now() < until);
    const results = await Promise.all(procs.map((p) => p.result));
    expect(results.map((r) => r.stdout.head)).toEqual(procs.map((_, i) => (i % 2 ? `out${i}\n` : `in${i}`)));
    expect(results.every((r) => !r.drainTimedOut)).toBe(true);
  });

  it('a child that outlives nothing: exit codes and signals come back by message', async () => {
    const m = manager();
    expect((await m.spawn('exit 7', [], { shell: true }).result).exitCode).toBe(7);
    expect((await m.spawn('kill -KILL $$', [], { shell: true }).result).signal).toBe('SIGKILL');
  });

  it('a supervisor killed mid-run: its commands are killed and reported, the next spawn starts a new one', async () => {
    const { logger, entries } = memoryLogger();
    const m = manager({ logger });
    const running = m.spawn('setsid sleep 300 & sleep 301', [], { shell: true });
    const pid = await running.spawned;
    await waitFor(() => survivors(running.cookie).length === 3, { what: 'tree running', timeoutMs: 10_000 });
    const supervisor = procEntry(pid!)!.ppid;
    process.kill(supervisor, 'SIGKILL');
    const result = await running.result;
    expect(result.signal).toBe('SIGKILL');
    await waitFor(() => survivors(running.cookie).length === 0, {
      what: 'tree killed by the host',
      timeoutMs: 5_000,
    });
    expect(entries().some((e) => e.level === WARN && /supervisor died/.test(e.msg))).toBe(true);
    const next = m.spawn('sh', ['-c', 'echo $PPID']);
    expect((await next.result).stdout.head).not.toBe(`${supervisor}\n`);
    expect((await m.status()).supervisor).toBe('running');
  });

  it('supervisors killed and replaced leave no fd of theirs open in the host (channels, pipes)', async () => {
    // Pipes and sockets only: what a supervisor's channels are. Other fds (files, eventfds, timers)
    // come and go with whatever else this worker does.
    const fds = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return /^(socket|pipe):/.test(readlinkSync(`/proc/self/fd/${fd}`));
        } catch {
          return false; // closed meanwhile (or the directory's own fd)
        }
      }).length;
    const m = manager();
    expect((await m.spawn('true').result).exitCode).toBe(0);
    const before = fds();
    for (let round = 0; round < 4; round++) {
      const [supervisor] = m.supervisorPids();
      process.kill(supervisor!, 'SIGKILL');
      await waitFor(() => !m.supervisorPids().includes(supervisor!), {
        what: 'supervisor gone',
        timeoutMs: 10_000,
      });
      const result = await m.spawn('sh', ['-c', 'echo out; echo err >&2']).result;
      expect([result.stdout.head, result.stderr.head]).toEqual(['out\n', 'err\n']);
    }
    // the same number as with the first supervisor: each lost one's channels were closed
    await waitFor(() => fds() <= before, {
      what: `host fds back to ${before} (now ${fds()})`,
      timeoutMs: 10_000,
    });
  });

  it('status() is not-started before the first spawn; warmUp() starts the supervisor early: starting, then running', async () => {
    const m = manager();
    expect((await m.status()).supervisor).toBe('not-started');
    m.warmUp();
    // Read a microtask later (the probe is known by now): the supervisor's 'ready' is a message, after.
    expect((await m.status()).supervisor).toBe('starting');
    await waitFor(async () => (await m.status()).supervisor === 'running', {
      what: 'the supervisor to answer',
    });
    expect((await m.status()).spawner).toBeDefined();
    const result = await m.spawn('sh', ['-c', 'echo $PPID']).result;
    expect(result.stdout.head).not.toBe(`${process.pid}\n`);
  });

  it("warmUp()'s hidden spawn is neither listed nor announced, and the first real process is still p1", async () => {
    const events = new EventBus();
    const seen: string[] = [];
    events.on('process.started', (e) => seen.push(`start ${e.id}`));
    events.on('process.exited', (e) => seen.push(`exit ${e.id}`));
    const m = manager({ events });
    m.warmUp();
    m.warmUp(); // once per profile
    expect(m.list()).toEqual([]);
    // Submitted after the hidden `true`, to the same supervisor.
    const first = m.spawn('true');
    expect(first.id).toBe('p1');
    await first.result;
    await waitFor(
      () => survivors(m.cookiePrefix).filter((pid) => !cmdline(pid).includes('supervisor-main')).length === 0,
      { what: 'the warm-up spawn to end', timeoutMs: 10_000 },
    );
    expect(m.list().map((p) => p.id)).toEqual(['p1']);
    expect(seen).toEqual(['start p1', 'exit p1']);
  });

  it('a manager disposed while its supervisor is still starting leaves no supervisor behind', async () => {
    for (let i = 0; i < 3; i++) {
      const m = manager();
      m.warmUp();
      const supervisorsOf = () =>
        listPids().filter((pid) => {
          try {
            return cmdline(pid).includes(`supervisor-main.js ${m.cookiePrefix}`);
          } catch {
            return false;
          }
        });
      await m.dispose();
      await waitFor(() => supervisorsOf().length === 0, {
        what: 'the starting supervisor to exit',
        timeoutMs: 10_000,
      });
    }
  });
});

describe('without a usable supervisor', () => {
  it('a broken node path: spawns in-process, logs once, status says fallback', async () => {
    const { logger, entries } = memoryLogger();
    const m = manager({ supervisor: { execPath: join(dir, 'no-such-node') }, logger });
    const first = await m.spawn('echo', ['one']).result;
    const second = await m.spawn('sh', ['-c', 'echo two; echo $PPID']).result;
    expect(first.stdout.head).toBe('one\n');
    // In-process: the host is the parent.
    expect(second.stdout.head).toBe(`two\n${process.pid}\n`);
    expect((await m.status()).supervisor).toBe('fallback');
    const warnings = entries().filter((e) => e.level === WARN);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(/supervisor unavailable: spawning in-process/);
    expect(warnings[0]!.reason).toMatch(/no-such-node/);
  });

  it('a supervisor that dies at start (node runs, the script fails): the queued spawns run in-process', async () => {
    const { logger, entries } = memoryLogger();
    // `false` is executable and exits at once: the spawn succeeds, the supervisor never says ready.
    const m = manager({ supervisor: { execPath: '/bin/false' }, logger });
    const results = await Promise.all([1, 2, 3].map((i) => m.spawn('echo', [`q${i}`]).result));
    expect(results.map((r) => r.stdout.head)).toEqual(['q1\n', 'q2\n', 'q3\n']);
    expect((await m.status()).supervisor).toBe('fallback');
    expect(entries().filter((e) => e.level === WARN)).toHaveLength(1);
  });

  it('supervisor: false spawns in-process from the start', async () => {
    const m = manager({ supervisor: false });
    const result = await m.spawn('sh', ['-c', 'echo $PPID']).result;
    expect(result.stdout.head).toBe(`${process.pid}\n`);
    expect((await m.status()).supervisor).toBe('fallback');
  });
});
