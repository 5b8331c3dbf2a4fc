// Invariant: when the host dies by SIGKILL (no exit hook can run), its supervisor kills every process, escapee and PTY tree carrying the manager's cookie; a Ctrl-C to the host's process group does not reach the supervisor.
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '@conch/test-support';
import { findBwrap } from '@conch/sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import { pidAlive } from './kill-tree.js';
import { survivors } from './test-support/procs.js';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'index.js');
const ptyModule = createRequire(import.meta.url).resolve('@lydell/node-pty');
const hosts: ChildProcess[] = [];

afterEach(() => {
  for (const host of hosts.splice(0)) host.kill('SIGKILL');
});

/** Starts a host script that prints one JSON line once its processes run; resolves with it. */
async function startHost(
  body: string,
  options = '{ killGraceMs: 300, drainMs: 300 }',
): Promise<{ host: ChildProcess; info: Record<string, any> }> {
  const script = `
    import { ProcessManager } from ${JSON.stringify(dist)};
    const m = new ProcessManager(${options});
    ${body}
    setInterval(() => {}, 1000);
  `;
  // detached: the host leads its own process group, like a foreground job of a terminal.
  const host = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true,
  });
  hosts.push(host);
  let out = '';
  host.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  await waitFor(() => out.includes('\n'), { what: 'host ready', timeoutMs: 30_000 });
  return { host, info: JSON.parse(out.split('\n')[0]!) as Record<string, any> };
}

/**
 * SIGKILLs the host (unless it is dead already), waits for its exit, then until nothing carrying
 * the manager's cookie `prefix` is left alive.
 */
async function killHostExpectSwept(
  host: ChildProcess,
  prefix: string,
  wait: { what: string; timeoutMs: number },
): Promise<void> {
  if (host.exitCode === null && host.signalCode === null) {
    const exit = new Promise((resolve) => host.once('exit', resolve));
    host.kill('SIGKILL');
    await exit;
  }
  await waitFor(() => survivors(prefix).length === 0, wait);
}

describe('host SIGKILLed', () => {
  it('leaves nothing with its cookie: a running command, a setsid escapee of a finished one, a PTY and its jobs', async () => {
    const sandboxed = findBwrap() ? 'true' : 'false';
    const { host, info } = await startHost(`
      const long = m.spawn('sleep', ['300']);
      const finished = await m.spawn('setsid sleep 301 & echo started', [], { shell: true }).result;
      const boxed = ${sandboxed} ? m.spawn('sleep', ['304'], { sandbox: { kind: 'read-only' } }) : undefined;
      const pty = m.spawnPty({ file: '/bin/sh', args: ['-i'], cwd: '/', env: { PATH: process.env.PATH },
        cols: 80, rows: 24, ptyModule: ${JSON.stringify(ptyModule)} });
      let seen = '';
      pty.onData((d) => { seen += d; if (seen.includes('jobs-up')) {
        console.log(JSON.stringify({ prefix: m.cookiePrefix, leftRunning: finished.leftRunning.length, pty: pty.pid }));
      } });
      pty.write('setsid sleep 302 & sleep 303 & echo jobs""-up\\n');
      await long.spawned; await boxed?.spawned;
    `);
    const prefix = info.prefix as string;
    expect(info.leftRunning).toBe(1);
    // sleep 300, setsid sleep 301, the PTY shell, its two jobs (+ the sandboxed sleep 304)
    await waitFor(() => survivors(prefix).length >= (findBwrap() ? 6 : 5), {
      what: 'everything running',
      timeoutMs: 10_000,
    });
    await killHostExpectSwept(host, prefix, {
      what: 'nothing left 3 s after the host died',
      timeoutMs: 3_000,
    });
    expect(pidAlive(info.pty as number)).toBe(false);
  }, 60_000);

  it('a SIGINT to the host process group does not reach the supervisor or the commands', async () => {
    const { host, info } = await startHost(`
      process.on('SIGINT', () => console.error('host got SIGINT'));
      const p = m.spawn('sleep', ['300']);
      await p.spawned;
      console.log(JSON.stringify({ prefix: m.cookiePrefix }));
    `);
    const prefix = info.prefix as string;
    await waitFor(() => survivors(prefix).length === 1, { what: 'sleep running', timeoutMs: 10_000 });
    process.kill(-host.pid!, 'SIGINT');
    await new Promise((r) => setTimeout(r, 500));
    expect(survivors(prefix)).toHaveLength(1);
    await killHostExpectSwept(host, prefix, { what: 'cleaned up after SIGKILL', timeoutMs: 3_000 });
  }, 60_000);

  /**
   * Host script text: `sleep(ms)` blocks the whole host (its event loop runs nothing meanwhile),
   * `running()` says whether a process with `marker` (defined by the script) in its command line
   * exists.
   */
  const BLOCKING = `
    import { readdirSync, readFileSync } from 'node:fs';
    const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
    const running = () => readdirSync('/proc').some((pid) => {
      try { return /^[0-9]+$/.test(pid) && readFileSync('/proc/' + pid + '/cmdline', 'utf8').includes(marker); }
      catch { return false; }
    });
  `;

  // Node's child emits no 'disconnect' when the channel ends while a handle it sent (a child's
  // pipe) waits for the parent's acknowledgement. The host below spawns, then blocks its event
  // loop (it never acknowledges the pipes the supervisor sends with 'spawned') until it is killed.
  // Node's spawner in the supervisor: it hands pipes over as handles (the addon's fd channel does
  // not wait for an acknowledgement).
  const blockedHost = (spawnLine: string, extra = '') =>
    startHost(
      `
      ${BLOCKING}
      await m.spawn('true').result; // the supervisor runs
      ${extra}
      const marker = 'conch-ack-' + process.pid;
      ${spawnLine}
      // Nothing is read from the supervisor from here on: wait until the command runs, then a
      // little longer for its 'spawned' to be sent.
      for (let i = 0; i < 6000 && !running(); i++) sleep(10);
      sleep(300);
      process.stdout.write(JSON.stringify({ prefix: m.cookiePrefix, running: running() }) + '\\n');
      sleep(120_000);
    `,
      '{ killGraceMs: 300, drainMs: 300, supervisor: { nativeSpawn: false } }',
    );

  async function expectSwept(host: ChildProcess, info: Record<string, any>, count: number): Promise<void> {
    const prefix = info.prefix as string;
    expect(info.running).toBe(true);
    expect(survivors(prefix)).toHaveLength(count);
    // The channel is looked at once a second: 15x that.
    await killHostExpectSwept(host, prefix, {
      what: 'nothing left after the host died with pipes unacknowledged',
      timeoutMs: 15_000,
    });
  }

  it('a host killed while its supervisor waits for the acknowledgement of a pipe it sent: the command is killed', async () => {
    const { host, info } = await blockedHost("m.spawn('sh', ['-c', 'sleep 300; : ' + marker]);");
    await expectSwept(host, info, 2);
  }, 60_000);

  it('the same with stdin piped (three pipes sent) and a second command already running', async () => {
    const { host, info } = await blockedHost(
      "m.spawn('sh', ['-c', 'cat; : ' + marker], { stdin: 'pipe' });",
      "const earlier = m.spawn('sleep', ['301']); await earlier.spawned;",
    );
    await expectSwept(host, info, 3);
  }, 60_000);

  it("the same while a PTY keeps the supervisor's event loop busy: it does not linger with what it runs", async () => {
    const { host, info } = await blockedHost(
      "m.spawn('sh', ['-c', 'sleep 300; : ' + marker]);",
      `const pty = m.spawnPty({ file: '/bin/sh', args: ['-c', 'sleep 302'], cwd: '/', env: { PATH: process.env.PATH },
        cols: 80, rows: 24, ptyModule: ${JSON.stringify(ptyModule)} });`,
    );
    await expectSwept(host, info, 4);
  }, 60_000);

  // posix_spawn (the default): a command's pipes are held in the supervisor for its first 20 ms
  // and then sent on the addon's fd channel; to a host dead by then that send fails and the
  // supervisor fell back to handing them over on the IPC channel, where they wait for an
  // acknowledgement that never comes. That needs the hold's timer to run before the supervisor
  // reads the channel's end, which a loaded machine does by chance; here the host stops its
  // supervisor (SIGSTOP) the moment its command runs, inside the hold (it looks every
  // millisecond), and dies; the supervisor is resumed once the hold is over, with both the timer
  // and the channel's end waiting (libuv runs timers first). Ten rounds.
  it("a host killed while its command's output is held (posix_spawn): nothing is left, ten times", async () => {
    for (let round = 0; round < 10; round++) {
      const { host, info } = await startHost(`
        ${BLOCKING}
        await m.spawn('true').result;
        const { spawner } = await m.status();
        const marker = 'conch-held-' + process.pid;
        m.spawn('sh', ['-c', 'sleep 300; : ' + marker]);
        for (let i = 0; i < 60000 && !running(); i++) sleep(1);
        const stopped = m.supervisorPids();
        for (const pid of stopped) process.kill(pid, 'SIGSTOP');
        process.stdout.write(JSON.stringify({ prefix: m.cookiePrefix, running: running(), spawner, stopped }) + '\\n');
        process.kill(process.pid, 'SIGKILL');
      `);
      const stopped = info.stopped as number[];
      try {
        expect(info.running).toBe(true);
        expect(info.spawner).toMatchObject({ kind: 'posix_spawn' });
        expect(stopped.length).toBeGreaterThan(0);
        // It killed itself; waited for here. Then past the hold (20 ms) before the resume.
        if (host.exitCode === null && host.signalCode === null)
          await new Promise((resolve) => host.once('exit', resolve));
        await new Promise((resolve) => setTimeout(resolve, 100));
      } finally {
        for (const pid of stopped ?? []) {
          try {
            process.kill(pid, 'SIGCONT');
          } catch {
            // gone
          }
        }
      }
      await killHostExpectSwept(host, info.prefix as string, {
        what: `nothing left after the host died inside the hold (round ${round + 1})`,
        timeoutMs: 15_000,
      });
    }
  }, 300_000);
});
