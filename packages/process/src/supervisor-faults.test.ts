// Invariant: a supervisor that misbehaves never hangs or silently ends a call — one that stops answering (SIGSTOP) is found by the work it does not do, killed with its sandbox and replaced, and the waiting call comes back at its limit saying so; one that is only slow to start is waited for; one that dies by any path (SIGKILL of node, of its bwrap, of the sandbox's pid 1, a crash) reports what it ran as lost; and the next command runs.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { waitFor } from '@conch/test-support';
import { findBwrap, type SandboxProfile } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { procEntry } from './kill-tree.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import type { PtyExit, PtyProcess } from './pty-process.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();
let ws: string;
const managers: ProcessManager[] = [];
const stopped: number[] = [];
beforeEach(() => {
  ws = mkdtempSync(join(tmpdir(), 'conch-sup-faults-'));
});
afterEach(async () => {
  for (const pid of stopped.splice(0)) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // killed, as it should be
    }
  }
  for (const m of managers.splice(0)) {
    await m.dispose();
    expect(survivors(m.cookiePrefix)).toEqual([]);
  }
  rmSync(ws, { recursive: true, force: true });
});

function manager(options: ProcessManagerOptions = {}): ProcessManager {
  const m = new ProcessManager({ cwd: ws, tempDir: () => ws, killGraceMs: 300, drainMs: 300, ...options });
  managers.push(m);
  return m;
}

const gone = (pid: number) => {
  const state = procEntry(pid)?.state;
  return state === undefined || state === 'Z';
};

function stop(pid: number): void {
  process.kill(pid, 'SIGSTOP');
  stopped.push(pid);
}

/**
 * The host pid of the sandbox's pid 1 (bwrap's init inside the namespace) of a sandboxed
 * supervisor. Kept as source text too: a host script below runs the same function.
 */
const SANDBOX_INIT = `function sandboxInit(supervisorPid) {
  const ns = readlinkSync('/proc/' + supervisorPid + '/ns/pid');
  for (const name of readdirSync('/proc')) {
    if (!/^\\d+$/.test(name)) continue;
    try {
      const nspid = /\\nNSpid:\\s+([^\\n]*)/.exec(readFileSync('/proc/' + name + '/status', 'latin1'))?.[1];
      const ids = nspid?.trim().split(/\\s+/) ?? [];
      if (ids.length > 1 && ids.at(-1) === '1' && readlinkSync('/proc/' + name + '/ns/pid') === ns) return Number(name);
    } catch {}
  }
  throw new Error('no pid 1 in the supervisor namespace');
}`;
const sandboxInit = new Function(
  'readdirSync',
  'readFileSync',
  'readlinkSync',
  `${SANDBOX_INIT}; return sandboxInit;`,
)(readdirSync, readFileSync, readlinkSync) as (supervisorPid: number) => number;

const wsw = (dir: string): SandboxProfile => ({
  kind: 'workspace-write',
  writableRoots: [dir],
  readOnlyPaths: [],
});
const profiles: [string, (dir: string) => SandboxProfile | undefined][] = [
  ['unsandboxed', () => undefined],
  ...(bwrap || process.env.CI ? [['in a workspace-write sandbox', wsw] as [string, typeof wsw]] : []),
];

describe.each(profiles)('a stopped supervisor (%s)', (_name, profileOf) => {
  it('a call with a timeout comes back at its limit as unresponsive; the supervisor is killed and replaced', async () => {
    const m = manager();
    const sandbox = profileOf(ws);
    const opts = sandbox ? { sandbox } : {};
    expect((await m.spawn('echo', ['warm'], opts).result).stdout.head).toBe('warm\n');
    const pids = m.supervisorPids();
    stop(pids[0]!); // the node supervisor (inside bwrap when sandboxed)
    // Today's code waited for the whole stop: the timer started only once there was a pid.
    const result = await m.spawn('echo', ['hi'], { ...opts, timeoutMs: 3000 }).result;
    expect(result.supervisorUnresponsive).toBe(true);
    expect(result.supervisorLost).toMatch(/stopped answering.*SIGSTOP/);
    expect(result.stdout.head).toBe('');
    for (const pid of pids)
      await waitFor(() => gone(pid), { what: `old supervisor ${pid} gone`, timeoutMs: 10_000 });
    expect((await m.spawn('echo', ['again'], opts).result).stdout.head).toBe('again\n');
    expect(m.supervisorPids()).not.toContain(pids[0]);
  });

  it('without a timeout the health check ends a call whose running command it can no longer report', async () => {
    const m = manager({ supervisor: { unresponsiveMs: 2000 } });
    const sandbox = profileOf(ws);
    const opts = sandbox ? { sandbox } : {};
    const proc = m.spawn('sleep', ['60'], opts);
    const pid = await proc.spawned;
    stop(m.supervisorPids()[0]!);
    const result = await proc.result;
    expect(result.supervisorUnresponsive).toBe(true);
    expect(result.signal).toBe('SIGKILL');
    await waitFor(() => gone(pid!), { what: 'the command killed', timeoutMs: 10_000 });
    expect((await m.spawn('echo', ['again'], opts).result).stdout.head).toBe('again\n');
  });
});

describe.each(profiles)('a command that ended while its supervisor was stopped (%s)', (_name, profileOf) => {
  // Its supervisor cannot reap it, so the kernel keeps how it ended: the result carries that, with
  // the output that reached the host, instead of "killed" (a finished build is not reported lost).
  const cases: [string, string, { exitCode: number | null; signal: string | null }][] = [
    ['exit 3', 'exit 3', { exitCode: 3, signal: null }],
    ['exit 0', 'exit 0', { exitCode: 0, signal: null }],
    ['its own SIGTERM', 'kill -TERM $$', { exitCode: null, signal: 'SIGTERM' }],
  ];
  it.each(cases)('%s', async (_label, end, expected) => {
    const m = manager({ supervisor: { unresponsiveMs: 1500 } });
    const sandbox = profileOf(ws);
    const go = join(ws, 'go');
    const script = `echo before; while [ ! -e '${go}' ]; do sleep 0.05; done; echo after; ${end}`;
    const proc = m.spawn('sh', ['-c', script], sandbox ? { sandbox } : {});
    const pid = (await proc.spawned)!;
    // 'before' here means its pipes are too (the supervisor hands held pipes over with their output).
    await waitFor(() => proc.stdout.totalBytes >= 'before\n'.length, {
      what: 'first line',
      timeoutMs: 10_000,
    });
    stop(m.supervisorPids()[0]!);
    writeFileSync(go, '');
    await waitFor(() => procEntry(pid)?.state === 'Z', {
      what: 'the command ended, unreaped',
      timeoutMs: 10_000,
    });
    const result = await proc.result;
    expect(result.supervisorUnresponsive).toBe(true);
    expect(result.endedBeforeLoss).toBe(true);
    expect({ exitCode: result.exitCode, signal: result.signal }).toEqual(expected);
    expect(result.stdout.head).toBe('before\nafter\n');
    expect((await m.spawn('echo', ['again'], sandbox ? { sandbox } : {}).result).stdout.head).toBe('again\n');
  });

  it('a call limit that passes after it ended is not a timeout: the stalled supervisor is replaced then', async () => {
    // The health check alone would wait 10 minutes here: only the limit can end this call.
    const m = manager({ supervisor: { unresponsiveMs: 600_000 } });
    const sandbox = profileOf(ws);
    const go = join(ws, 'go');
    const script = `echo before; while [ ! -e '${go}' ]; do sleep 0.05; done; exit 5`;
    const proc = m.spawn('sh', ['-c', script], { ...(sandbox ? { sandbox } : {}), timeoutMs: 3000 });
    const pid = (await proc.spawned)!;
    await waitFor(() => proc.stdout.totalBytes > 0, { what: 'first line', timeoutMs: 10_000 });
    stop(m.supervisorPids()[0]!);
    writeFileSync(go, '');
    await waitFor(() => procEntry(pid)?.state === 'Z', {
      what: 'the command ended, unreaped',
      timeoutMs: 10_000,
    });
    const result = await proc.result;
    expect(result.timedOut).toBe(false);
    expect(result.exitCode).toBe(5);
    expect(result.endedBeforeLoss).toBe(true);
    expect(result.supervisorUnresponsive).toBe(true);
  });

  it('one killed at its limit while its supervisor is stopped comes back then, not at the health check', async () => {
    const m = manager({ supervisor: { unresponsiveMs: 600_000 } });
    const sandbox = profileOf(ws);
    const proc = m.spawn('sh', ['-c', 'echo before; exec sleep 60'], {
      ...(sandbox ? { sandbox } : {}),
      timeoutMs: 2000,
    });
    await waitFor(() => proc.stdout.totalBytes > 0, { what: 'first line', timeoutMs: 10_000 });
    stop(m.supervisorPids()[0]!);
    const result = await proc.result;
    expect(result.timedOut).toBe(true);
    expect(result.supervisorUnresponsive).toBe(true);
    expect(result.endedBeforeLoss).toBeUndefined();
  });

  it('one still running when the supervisor is replaced is reported killed, not ended', async () => {
    const m = manager({ supervisor: { unresponsiveMs: 1500 } });
    const sandbox = profileOf(ws);
    const proc = m.spawn('sh', ['-c', 'echo before; exec sleep 60'], sandbox ? { sandbox } : {});
    await waitFor(() => proc.stdout.totalBytes > 0, { what: 'first line', timeoutMs: 10_000 });
    stop(m.supervisorPids()[0]!);
    const result = await proc.result;
    expect(result.endedBeforeLoss).toBeUndefined();
    expect(result.signal).toBe('SIGKILL');
  });
});

describe('a supervisor that is slow, not dead', () => {
  it('a slow start does not count against the call: the command still gets its whole limit', async () => {
    // A supervisor whose start takes 2 s (asleep, not stopped): progress, so the call waits for it.
    const slowNode = join(ws, 'slow-node');
    writeFileSync(slowNode, `#!/bin/sh\nsleep 2\nexec ${JSON.stringify(process.execPath)} "$@"\n`);
    chmodSync(slowNode, 0o755);
    const m = manager({ supervisor: { execPath: slowNode, unresponsiveMs: 500 } });
    const result = await m.spawn('sh', ['-c', 'sleep 0.2; echo done'], { timeoutMs: 1000 }).result;
    expect(result.supervisorLost).toBeUndefined();
    expect(result.timedOut).toBe(false);
    expect(result.stdout.head).toBe('done\n');
  });

  it('a supervisor stopped while it starts is replaced, and its calls come back saying so', async () => {
    const stopSelf = join(ws, 'stop-self');
    writeFileSync(stopSelf, `#!/bin/sh\nkill -STOP $$\nexec ${JSON.stringify(process.execPath)} "$@"\n`);
    chmodSync(stopSelf, 0o755);
    const m = manager({ supervisor: { execPath: stopSelf } });
    const result = await m.spawn('echo', ['hi'], { timeoutMs: 2000 }).result;
    expect(result.supervisorUnresponsive).toBe(true);
    expect(result.supervisorLost).toMatch(/stopped/);
  });

  it.each([
    ['with a time limit', { timeoutMs: 2000 }],
    ['without one', {}],
  ])(
    'an aborted call whose supervisor is stopped while it starts still comes back (%s)',
    async (_n, limit) => {
      const stopSelf = join(ws, 'stop-self');
      writeFileSync(stopSelf, `#!/bin/sh\nkill -STOP $$\nexec ${JSON.stringify(process.execPath)} "$@"\n`);
      chmodSync(stopSelf, 0o755);
      const m = manager({ supervisor: { execPath: stopSelf, unresponsiveMs: 1000 } });
      const controller = new AbortController();
      const proc = m.spawn('echo', ['hi'], { ...limit, signal: controller.signal });
      controller.abort();
      // The abort cannot reach a command that never started: the health check ends the wait, and
      // the call comes back saying why (it used to wait on a start that would never come).
      const result = await proc.result;
      expect(result.supervisorLost).toMatch(/stopped/);
      expect(result.stdout.head).toBe('');
    },
  );

  it('a busy supervisor answers its pings: many spawns at once with a tight bound are never declared lost', async () => {
    const m = manager({ supervisor: { unresponsiveMs: 1000 } });
    const env: Record<string, string> = {};
    for (let i = 0; i < 500; i++) env[`CONCH_PAD_${i}`] = 'x'.repeat(100);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => m.spawn('sh', ['-c', `sleep 0.5; echo ${i}`], { env }).result),
    );
    for (const [i, r] of results.entries()) {
      expect(r.supervisorLost).toBeUndefined();
      expect(r.stdout.head).toBe(`${i}\n`);
    }
  });
});

const deaths: [string, string, (m: ProcessManager) => number, NodeJS.Signals][] = [
  ['unsandboxed', 'SIGKILL of the supervisor', (m) => m.supervisorPids()[0]!, 'SIGKILL'],
  ['unsandboxed', 'a crash (SIGSEGV)', (m) => m.supervisorPids()[0]!, 'SIGSEGV'],
  ['unsandboxed', 'a crash (SIGABRT)', (m) => m.supervisorPids()[0]!, 'SIGABRT'],
  ...(bwrap || process.env.CI
    ? ([
        ['sandboxed', 'SIGKILL of the supervisor', (m) => m.supervisorPids()[0]!, 'SIGKILL'],
        ['sandboxed', 'SIGKILL of its bwrap', (m) => m.supervisorPids()[1]!, 'SIGKILL'],
        [
          'sandboxed',
          "SIGKILL of the sandbox's pid 1",
          (m) => sandboxInit(m.supervisorPids()[0]!),
          'SIGKILL',
        ],
        ['sandboxed', 'a crash (SIGSEGV)', (m) => m.supervisorPids()[0]!, 'SIGSEGV'],
        ['sandboxed', 'a crash (SIGABRT)', (m) => m.supervisorPids()[0]!, 'SIGABRT'],
      ] as [string, string, (m: ProcessManager) => number, NodeJS.Signals][])
    : []),
];

describe('a supervisor that dies', () => {
  it.each(deaths)(
    '%s, %s: the command comes back as lost, saying how',
    async (kind, _how, target, signal) => {
      const m = manager();
      const opts = kind === 'sandboxed' ? { sandbox: wsw(ws) } : {};
      const proc = m.spawn('sleep', ['60'], opts);
      await proc.spawned;
      process.kill(target(m), signal);
      const result = await proc.result;
      expect(result.supervisorLost).toMatch(/supervisor (was killed|crashed)/);
      expect(result.supervisorLost).toContain(signal);
      expect(result.supervisorUnresponsive).toBeUndefined();
      expect((await m.spawn('echo', ['again'], opts).result).stdout.head).toBe('again\n');
    },
  );

  it.runIf(bwrap || process.env.CI)(
    "a host with nothing else to do still gets the result when the sandbox's pid 1 is killed",
    () => {
      // The channel closes before bwrap reports the exit: nothing may let the host's loop drain
      // with the result still pending (it used to exit silently here).
      const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'index.js');
      const script = join(ws, 'host.mjs');
      writeFileSync(
        script,
        `import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { ProcessManager } from ${JSON.stringify(dist)};
${SANDBOX_INIT}
const m = new ProcessManager({ cwd: ${JSON.stringify(ws)} });
const sandbox = { kind: 'workspace-write', writableRoots: [${JSON.stringify(ws)}] };
const p = m.spawn('sleep', ['60'], { sandbox });
await p.spawned;
process.kill(sandboxInit(m.supervisorPids()[0]), 'SIGKILL');
const r = await p.result;
console.log(JSON.stringify({ lost: r.supervisorLost ?? null }));
await m.dispose();
`,
      );
      const out = execFileSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 });
      expect(JSON.parse(out)).toMatchObject({ lost: expect.stringMatching(/was killed/) });
    },
  );
});

const ptyModule = createRequire(import.meta.url).resolve('@lydell/node-pty');

/** An interactive sh in a PTY through the manager (in `sandbox` when given). */
const interactiveShell = (m: ProcessManager, cwd: string, sandbox?: SandboxProfile) =>
  m.spawnPty({
    file: '/bin/sh',
    args: ['-i'],
    cwd,
    env: { PATH: process.env.PATH, PS1: '$ ' },
    cols: 80,
    rows: 24,
    ptyModule,
    ...(sandbox ? { sandbox } : {}),
  });
const exitOf = (pty: PtyProcess) => new Promise<PtyExit>((resolve) => pty.onExit(resolve));

// A PTY's input goes through its supervisor: a caller that waits on a shell that does nothing
// (a terminal's typed command that never begins) asks, and a stalled supervisor is judged then.
describe('a PTY whose supervisor misbehaves', () => {
  const shell = (m: ProcessManager) => interactiveShell(m, '/');

  it('stopped: overdue() says so, and the PTY ends with the reason, unresponsive', async () => {
    const m = manager();
    const pty = shell(m);
    const exit = exitOf(pty);
    await waitFor(() => procEntry(pty.pid)?.state === 'S', { what: 'the shell waits', timeoutMs: 30_000 });
    // Answering: not its supervisor's fault.
    expect(pty.overdue?.()).toBe(false);
    const [pid] = m.supervisorPids();
    stop(pid!);
    // Asked again until the health check has seen it not answer (two ticks), far before its own bound.
    await waitFor(() => pty.overdue?.() === true, { what: 'overdue', timeoutMs: 30_000 });
    expect(await exit).toMatchObject({
      signal: 9,
      supervisorLost: expect.stringMatching(/stopped answering.*SIGSTOP/),
      supervisorUnresponsive: true,
    });
    await waitFor(() => gone(pty.pid), { what: 'the shell gone', timeoutMs: 30_000 });
    // The next PTY gets a new supervisor.
    const next = shell(m);
    expect(next.overdue?.()).toBe(false);
    next.kill('SIGKILL');
  }, 90_000);

  it('asked while it answers, then stopped for a moment: the PTY lives on (the question does not outlast the answer)', async () => {
    const m = manager();
    const pty = shell(m);
    let out = '';
    pty.onData((d) => (out += d));
    await waitFor(() => procEntry(pty.pid)?.state === 'S', { what: 'the shell waits', timeoutMs: 30_000 });
    expect(pty.overdue?.()).toBe(false);
    // Heard after the question (its output is a message from the supervisor).
    pty.write('echo one""two\n');
    await waitFor(() => out.includes('onetwo'), { what: 'first echo', timeoutMs: 30_000 });
    const [pid] = m.supervisorPids();
    stop(pid!);
    await waitFor(() => procEntry(pid!)?.state === 'T', { what: 'stopped', timeoutMs: 30_000 });
    // Several health ticks stalled: fatal at two if the question were still standing.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    process.kill(pid!, 'SIGCONT');
    pty.write('echo three""four\n');
    await waitFor(() => out.includes('threefour'), { what: 'second echo', timeoutMs: 30_000 });
    expect(gone(pty.pid)).toBe(false);
  }, 90_000);

  it.each(['SIGKILL', 'SIGSEGV'] as const)(
    'killed (%s): the PTY ends with the reason, not unresponsive; overdue() on it is true',
    async (signal) => {
      const m = manager();
      const pty = shell(m);
      const exit = exitOf(pty);
      await waitFor(() => procEntry(pty.pid)?.state === 'S', { what: 'the shell waits', timeoutMs: 30_000 });
      process.kill(m.supervisorPids()[0]!, signal);
      const e = await exit;
      expect(e.supervisorLost).toMatch(/./);
      expect(e.supervisorUnresponsive).toBeUndefined();
      expect(pty.overdue?.()).toBe(true);
    },
    90_000,
  );

  it('without a supervisor a PTY never blames one', async () => {
    const m = manager({ supervisor: false });
    const pty = shell(m);
    expect(pty.overdue?.() ?? false).toBe(false);
    const exit = exitOf(pty);
    pty.kill('SIGKILL');
    expect((await exit).supervisorLost).toBeUndefined();
  });
});

// Starting a PTY blocks the host on the supervisor's reply: a stopped supervisor is replaced at
// once instead of standing the host's event loop still for the reply timeout.
describe.each(profiles)('a new PTY when the supervisor is stopped (%s)', (_name, profileOf) => {
  it('the stopped supervisor is replaced at once, its PTYs end with the reason, and the new PTY runs in a new one', async () => {
    const m = manager();
    const sandbox = profileOf(ws);
    const shell = () => interactiveShell(m, ws, sandbox);
    const first = shell();
    const firstExit = exitOf(first);
    await waitFor(() => procEntry(first.pid)?.state === 'S', { what: 'the shell waits', timeoutMs: 30_000 });
    const before = m.supervisorPids();
    for (const pid of before) stop(pid);
    const second = shell();
    expect(await firstExit).toMatchObject({
      supervisorLost: expect.stringMatching(/stopped \(SIGSTOP\).*a terminal was to be started/),
      supervisorUnresponsive: true,
    });
    // In a new supervisor of the same kind, not the host or another profile.
    expect(second.sandbox).toBe(sandbox ? 'workspace-write' : 'none');
    expect(m.supervisorPids().some((pid) => before.includes(pid))).toBe(false);
    let out = '';
    second.onData((d) => (out += d));
    second.write('echo new""one\n');
    await waitFor(() => out.includes('newone'), { what: 'the new shell answers', timeoutMs: 30_000 });
    second.kill('SIGKILL');
  }, 90_000);
});

// Not stopped but hung (its event loop blocked in a wait): no look at /proc tells, so the host's
// bounded wait for the reply does; the supervisor is then killed, not left behind disconnected.
describe('a new PTY when the supervisor hangs (unsandboxed)', () => {
  it('after the reply limit the hung supervisor is killed with its PTYs, and the new PTY runs in a new one', async () => {
    const mark = join(ws, 'hung');
    const preload = join(ws, 'hang-on-usr2.cjs');
    writeFileSync(
      preload,
      `process.on('SIGUSR2', () => { require('fs').writeFileSync(${JSON.stringify(mark)}, String(process.pid)); ` +
        `Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); });\n`,
    );
    const node = join(ws, 'hanging-node');
    writeFileSync(
      node,
      `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} -r ${JSON.stringify(preload)} "$@"\n`,
    );
    chmodSync(node, 0o755);
    const m = manager({ supervisor: { execPath: node } });
    const shell = () => interactiveShell(m, ws);
    const first = shell();
    const firstExit = exitOf(first);
    await waitFor(() => procEntry(first.pid)?.state === 'S', { what: 'the shell waits', timeoutMs: 30_000 });
    const [hung] = m.supervisorPids();
    process.kill(hung!, 'SIGUSR2');
    await waitFor(() => existsSync(mark), { what: 'the supervisor to hang', timeoutMs: 30_000 });
    expect(readFileSync(mark, 'utf8')).toBe(String(hung));
    const second = shell();
    expect(await firstExit).toMatchObject({
      supervisorLost: expect.stringMatching(
        /stopped answering.*did not answer a terminal's start within 15 s/,
      ),
      supervisorUnresponsive: true,
    });
    await waitFor(() => procEntry(hung!) === undefined || procEntry(hung!)?.state === 'Z', {
      what: 'the hung supervisor killed',
      timeoutMs: 30_000,
    });
    expect(m.supervisorPids()).not.toContain(hung);
    expect(second.sandbox).toBe('none');
    let out = '';
    second.onData((d) => (out += d));
    second.write('echo new""one\n');
    await waitFor(() => out.includes('newone'), { what: 'the new shell answers', timeoutMs: 30_000 });
    second.kill('SIGKILL');
  }, 90_000);
});

describe('numbers and sizes past what the system takes', () => {
  it('a timeout past the timer limit is refused, naming the field and the maximum, instead of firing at once', () => {
    const m = manager();
    expect(() => m.spawn('sleep', ['0.1'], { timeoutMs: 2 ** 31 })).toThrow(/timeoutMs.*at most 2147483647/);
    const proc = m.spawn('true');
    expect(() => proc.setTimeout(2 ** 40)).toThrow(/timeoutMs.*at most 2147483647/);
  });

  it('an argument or script too long for exec is refused naming it and the limit, not as a spawn error of the program', () => {
    const m = manager();
    expect(() => m.spawn('echo', ['x'.repeat(200_000)])).toThrow(
      /'args\[0\]'.*argument 1 is 200,001 bytes.*131,072 bytes in one argument/,
    );
    expect(() => m.spawn(`echo ${'x'.repeat(200_000)}`, [], { shell: true })).toThrow(
      /'command'.*the script \(a shell gets it as one argument\) is 200,006 bytes/,
    );
    // The message quotes the value short, never the whole of it.
    try {
      m.spawn('echo', ['x'.repeat(10_000_000)]);
    } catch (error) {
      expect((error as Error).message.length).toBeLessThan(1000);
    }
  });
});
