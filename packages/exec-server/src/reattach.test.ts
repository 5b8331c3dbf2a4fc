// Over a real sshd: the work belongs to the target, not the connection — background tasks and terminal sessions outlive a dropped link (ssh client SIGKILLed, sshd's session killed, a SIGSTOPped client holding the link half-open), the host re-attaches with the session's key and reads on from its offsets; past the grace period the work is gone and the next call says so; a wrong key cannot attach; nothing is left at dispose.
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBus, PluginRegistry, definePlugin, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { bundleManifest } from './bundle/bundle.js';
import { BOOT_SCRIPT } from './bundle/boot-script.js';
import { createRemoteTerminalTool } from './client/remote-terminal.js';
import type { RemoteProcess } from './client/remote-process.js';
import type { TransportLostError } from './errors/transport-lost-error.js';
import { executorFromConfig, type ExecutionTarget } from './execution-target.js';
import { RpcError, RpcPeer } from './json-rpc.js';
import { PROTOCOL_VERSION } from './protocol.js';
import { marker, memoryLogger, pidsWithArg, waitFor } from './test-support/helpers.js';
import { sshdAvailable, sshExecutorConfig, startSshd, type TestSshd } from './test-support/sshd.js';
import { SshTransport } from './transport/ssh-transport.js';

let sshd: TestSshd;
/** Shared by this host and the target (not the target's private /tmp): flag files the tests create. */
let shared: string;
/** The bundle cache of a target that is not isolated (see ssh.test.ts). */
let cacheDir: string | undefined;
/** A connection without a session that looks at the target from its own side. */
let observer: ExecutionTarget;
const events = new EventBus();
const { logger } = memoryLogger('info');
const owned = new Set<ExecutionTarget>();

function config(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...sshExecutorConfig(sshd),
    ...(cacheDir ? { cacheDir } : {}),
    ...extra,
  };
}

function newTarget(extra: Record<string, unknown> = {}): ExecutionTarget {
  const target = executorFromConfig(config(extra), { cwd: process.cwd(), events, logger });
  owned.add(target);
  return target;
}

async function dispose(target: ExecutionTarget): Promise<void> {
  owned.delete(target);
  await target.dispose();
}

/** A shell command's stdout, run in the target by the observer. */
async function inTarget(script: string): Promise<string> {
  return (await observer.processes.spawn(script, [], { shell: '/bin/sh' }).result).stdout.head;
}

/** The host pid of a target process (its pid in the target's pid namespace is `nsPid`). */
function hostPid(nsPid: number, needle: string): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      const ns = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/);
      if (Number(ns?.at(-1)) !== nsPid) continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(needle)) return Number(name);
    } catch {
      // gone
    }
  }
  return undefined;
}

function parentOf(pid: number): number {
  return Number(/^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

/** A registry whose `terminal` tool runs in the target, every ask approved. */
async function terminalRegistry(target: ExecutionTarget) {
  const tool = await createRemoteTerminalTool(target.terminal!);
  const registry = new PluginRegistry({ cwd: process.cwd(), logger });
  registry.register(permissionPlugin);
  registry.register(
    definePlugin({
      name: 'remote-terminal',
      version: '0.0.0',
      configSchema: z.strictObject({}),
      setup: () => ({ tools: [tool] }),
    }),
  );
  await registry.expose('permission', {});
  await registry.expose('remote-terminal');
  const run = (args: Record<string, unknown>) =>
    registry.execute('terminal', args, { approve: async () => 'once' }) as Promise<
      ToolResult & Record<string, unknown>
    >;
  return { registry, run };
}

/** Everything of a disposed target is gone from the target: its processes, its server and its socket. */
async function expectNothingLeft(markers: string[], serverPid: number, socket: string): Promise<void> {
  for (const m of markers) {
    await waitFor(() => pidsWithArg(m).length === 0, 20_000, `nothing of ${m} left`);
  }
  // The server exits right after it closed its stream: looked at until it has.
  await waitFor(
    async () => (await inTarget(`test -e /proc/${serverPid} && echo alive || echo gone`)) === 'gone\n',
    20_000,
    'the server exited',
  );
  expect(await inTarget(`test -e '${socket}' && echo there || echo gone`)).toBe('gone\n');
}

describe.skipIf(!sshdAvailable())('work that outlives its connection (real sshd on 127.0.0.1)', () => {
  beforeAll(async () => {
    sshd = await startSshd();
    shared = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'conch-reattach-'));
    cacheDir = sshd.isolated ? undefined : mkdtempSync(join(tmpdir(), 'conch-ssh-cache-'));
    observer = executorFromConfig(config({ detachGraceMs: 0 }), { cwd: process.cwd(), logger });
  });

  afterAll(async () => {
    for (const target of [...owned]) await target.dispose();
    await observer?.dispose();
    await sshd?.stop();
    rmSync(shared, { recursive: true, force: true });
    if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  });

  test('a SIGKILLed ssh client: a background task and a terminal session survive, the next call re-attaches, `done` and the session output are read from their offsets; dispose leaves nothing', async () => {
    const target = newTarget();
    const { registry, run } = await terminalRegistry(target);
    try {
      const m = marker('bg');
      const t = marker('term');
      const flag = join(shared, `${m}.go`);
      const proc = target.processes.spawn(
        `echo started; while [ ! -e ${flag} ]; do sleep 0.05; done; echo done; : ${m}`,
        [],
        { shell: '/bin/bash', capture: { spill: 'combined' } },
      ) as RemoteProcess;
      await waitFor(() => (proc.combined?.totalBytes ?? 0) >= 8, 20_000, 'the task printed');
      const offset = proc.combined!.totalBytes;
      const session = await run({
        command: `bash -c 'echo t-start; while [ ! -e ${flag} ]; do sleep 0.05; done; echo t-done' ${t}`,
        background: true,
      });
      expect(session).toMatchObject({ state: 'background' });
      const sessionId = session.session_id as number;
      const logBefore = await target.terminal!.readLogFrom(sessionId, 0);
      expect(logBefore.text).toContain('t-start');

      const before = target.client!.lastConnection!;
      const socket = before.init.session!.socket;
      expect(before.init.session).toMatchObject({ graceMs: 60_000 });
      const lost: TransportLostError[] = [];
      const off = target.client!.onLost((error) => lost.push(error));
      process.kill(target.client!.transportPid!, 'SIGKILL');
      await waitFor(() => lost.length > 0, 20_000, 'the connection reported lost');
      off();
      expect(lost[0]).toMatchObject({ code: 'TRANSPORT_LOST', keptMs: 60_000 });
      expect(lost[0]!.message).toContain('keeps running');
      // The work runs on while the link is down; this is what it waits for.
      writeFileSync(flag, '');

      const result = await proc.result;
      expect(result).toMatchObject({ exitCode: 0, reason: 'exit' });
      expect(result.errorCode).toBeUndefined();
      expect(result.stdout.head).toBe('started\ndone\n');
      // From where this host had read to: the rest, not the whole output again.
      expect(Buffer.from(await proc.combined!.read(offset, 1000)).toString()).toBe('done\n');
      const after = target.client!.lastConnection!;
      expect(after).toMatchObject({ reattached: true, session: before.session });
      expect(after.generation).toBeGreaterThan(before.generation);
      expect(after.hello.pid).toBe(before.hello.pid);

      const polled = await run({ session_id: sessionId, input: '', wait_for: 't-done', timeout: 60 });
      expect(String(polled.output)).toContain('t-done');
      const logAfter = await target.terminal!.readLogFrom(sessionId, logBefore.nextOffset);
      expect(logAfter.text).toContain('t-done');
      expect(logAfter.text).not.toContain('t-start');
      expect(logAfter.nextOffset).toBeGreaterThan(logBefore.nextOffset);

      await registry.dispose();
      await dispose(target);
      await expectNothingLeft([m, t], before.hello.pid, socket);
    } finally {
      await registry.dispose();
      await dispose(target);
    }
  }, 300_000);

  test("sshd's side killed: the running task survives and is re-attached through a new ssh connection", async () => {
    const target = newTarget();
    try {
      const m = marker('sshd-killed');
      const flag = join(shared, `${m}.go`);
      const proc = target.processes.spawn(
        `while [ ! -e ${flag} ]; do sleep 0.05; done; echo done; : ${m}`,
        [],
        { shell: '/bin/bash', capture: { spill: 'combined' } },
      );
      await proc.spawned;
      const before = target.client!.lastConnection!;
      const server = hostPid(before.hello.pid, bundleManifest().hash);
      expect(server).toBeDefined();
      // The server's parent is sshd's process for this session (`sshd: user@notty`).
      const sessionProcess = parentOf(server!);
      expect(readFileSync(`/proc/${sessionProcess}/cmdline`, 'utf8')).toContain('sshd');
      process.kill(sessionProcess, 'SIGKILL');
      await waitFor(
        () => target.client!.lastConnection!.generation > before.generation,
        60_000,
        're-attached',
      );
      writeFileSync(flag, '');
      const result = await proc.result;
      expect(result).toMatchObject({ exitCode: 0 });
      expect(result.stdout.head).toBe('done\n');
      expect(target.client!.lastConnection).toMatchObject({ reattached: true, session: before.session });
      expect(target.client!.lastConnection!.hello.pid).toBe(before.hello.pid);
    } finally {
      await dispose(target);
    }
  }, 300_000);

  test('a SIGSTOPped ssh client (its control master: a half-open link): the host reports the drop within a few heartbeats, re-attaches through a new master, and the output streamed meanwhile is counted and readable', async () => {
    // ssh's control master holds the TCP connection and, having been handed the session's stdio
    // by the mux client, moves every byte: stopping it is what leaves the link half-open.
    const masters = () => pidsWithArg('[mux]').filter((pid) => pidsWithArg('conch-ssh-').includes(pid));
    const others = new Set(masters());
    const target = newTarget({ heartbeatMs: 500 });
    let stopped: number | undefined;
    try {
      const m = marker('half-open');
      const flag = join(shared, `${m}.go`);
      const proc = target.processes.spawn(
        `i=0; while [ ! -e ${flag} ]; do i=$((i+1)); echo "tick $i"; sleep 0.05; done; echo done; : ${m}`,
        [],
        { shell: '/bin/bash', capture: { spill: 'combined' } },
      ) as RemoteProcess;
      let streamed = '';
      proc.onOutput((e) => {
        streamed += e.text;
      });
      await waitFor(() => streamed.includes('tick 3'), 20_000, 'output streamed');
      const before = target.client!.lastConnection!;
      const lost: TransportLostError[] = [];
      const off = target.client!.onLost((error) => lost.push(error));
      const mine = masters().filter((pid) => !others.has(pid));
      expect(mine.length).toBe(1);
      stopped = mine[0]!;
      process.kill(stopped, 'SIGSTOP');
      // Neither end sees the link close: the heartbeat calls it lost.
      await waitFor(() => lost.length > 0, 60_000, 'the silent link reported lost');
      off();
      expect(lost[0]!.reason).toMatch(/no answer from the exec server for \d+ ms/);
      await waitFor(
        () => target.client!.lastConnection!.generation > before.generation,
        60_000,
        're-attached',
      );
      writeFileSync(flag, '');
      const result = await proc.result;
      expect(result).toMatchObject({ exitCode: 0 });
      expect(target.client!.lastConnection).toMatchObject({ reattached: true, session: before.session });
      // Every byte: what was streamed plus what was not (skipped while detached) is the whole.
      const total = result.stdout.totalBytes;
      expect(Buffer.byteLength(streamed) + proc.skippedBytes).toBe(total);
      const whole = Buffer.from(await proc.combined!.read(0, total)).toString();
      expect(whole.endsWith('done\n')).toBe(true);
      expect(whole.startsWith('tick 1\ntick 2\ntick 3\n')).toBe(true);
    } finally {
      if (stopped !== undefined) {
        try {
          process.kill(stopped, 'SIGCONT');
          process.kill(stopped, 'SIGKILL');
        } catch {
          // gone (the client killed it)
        }
      }
      await dispose(target);
    }
  }, 300_000);

  test('past the grace period the work is gone: the waiting task ends SESSION_EXPIRED, the next terminal call says what was lost, the call after starts anew', async () => {
    // An ssh that cannot connect while the block file exists: the host cannot re-attach in time.
    const block = join(shared, 'block-ssh');
    const wrapper = join(shared, 'ssh');
    writeFileSync(
      wrapper,
      `#!/bin/sh\nif [ -e '${block}' ]; then echo 'blocked by the test' >&2; exit 255; fi\nexec ssh "$@"\n`,
    );
    chmodSync(wrapper, 0o755);
    const target = newTarget({ ssh: wrapper, detachGraceMs: 1500 });
    const { registry, run } = await terminalRegistry(target);
    try {
      const m = marker('expire');
      const t = marker('expire-term');
      const proc = target.processes.spawn(`sleep 300; : ${m}`, [], { shell: '/bin/bash' }) as RemoteProcess;
      await proc.spawned;
      const term = await run({ command: `bash -c 'sleep 300; :' ${t}`, background: true });
      const sessionId = term.session_id as number;
      await target.terminal!.refresh();
      const before = target.client!.lastConnection!;
      const socket = before.init.session!.socket;
      writeFileSync(block, '');
      process.kill(target.client!.transportPid!, 'SIGKILL');
      // The server waits out its grace period, then kills everything and removes its socket.
      await waitFor(
        () => pidsWithArg(m).length === 0 && pidsWithArg(t).length === 0,
        60_000,
        'the work killed',
      );
      const result = await proc.result;
      expect(result.errorCode).toBe('SESSION_EXPIRED');
      expect(result.spawnError?.message).toMatch(/session [0-9a-f]+ on ssh:.* expired/);
      expect(result.spawnError?.message).toContain(`sleep 300; : ${m}`);
      rmSync(block);
      await waitFor(
        async () =>
          (await inTarget(`test -e /proc/${before.hello.pid} && echo alive || echo gone`)) === 'gone\n',
        20_000,
        'the server exited',
      );
      expect(await inTarget(`test -e '${socket}' && echo there || echo gone`)).toBe('gone\n');

      const next = await run({ session_id: sessionId, input: '' });
      expect(next).toMatchObject({ error_code: 'SESSION_EXPIRED' });
      expect(String(next.error)).toContain(`terminal session ${sessionId}`);
      const fresh = await run({ command: 'echo anew' });
      expect(fresh).toMatchObject({ exit_code: 0 });
      expect(target.client!.lastConnection!.session).toBeGreaterThan(before.session);
    } finally {
      rmSync(block, { force: true });
      await registry.dispose();
      await dispose(target);
    }
  }, 300_000);

  test('a wrong key cannot attach: refused, dropped, and the attached client keeps its session', async () => {
    const target = newTarget();
    try {
      const m = marker('wrong-key');
      const proc = target.processes.spawn(`sleep 300; : ${m}`, [], { shell: '/bin/bash' });
      await proc.spawned;
      const before = target.client!.lastConnection!;
      const session = before.init.session!;
      // The attach relay, run by hand through ssh, speaking for someone without the key.
      const transport = new SshTransport({
        host: sshd.host,
        port: sshd.port,
        user: sshd.user,
        identityFile: sshd.identityFile,
        options: sshd.options,
      });
      const argv = ['node', '-e', BOOT_SCRIPT, bundleManifest().hash, ...(cacheDir ? [cacheDir] : [])];
      const { file, args } = transport.command([...argv, '--attach', session.socket]);
      const relay = spawn(file, args, { stdio: ['pipe', 'pipe', 'ignore'] });
      const exited = new Promise<number | null>((resolve) => relay.once('exit', resolve));
      try {
        const rest = await new Promise<string>((resolve, reject) => {
          let buf = '';
          relay.stdout.on('data', function onData(d: Buffer) {
            buf += d.toString();
            const at = buf.indexOf('\n');
            if (at !== -1 && buf.includes('server.hello')) {
              relay.stdout.off('data', onData);
              resolve(buf.slice(at + 1));
            }
          });
          relay.once('exit', (code) => reject(new Error(`the relay exited (${code}) before the hello`)));
        });
        const peer = new RpcPeer({ input: relay.stdout, output: relay.stdin });
        peer.feed(rest);
        const refused = await peer
          .request('session.attach', {
            version: PROTOCOL_VERSION,
            client: 'an intruder',
            session: session.id,
            key: '0'.repeat(64),
            processes: [],
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(refused).toBeInstanceOf(RpcError);
        expect((refused as RpcError).data.code).toBe('ATTACH_REFUSED');
        // Dropped after the answer: the relay, and its ssh session, end.
        await exited;
        peer.close('done');
      } finally {
        relay.kill('SIGKILL');
        await transport.dispose();
      }
      // The real client was never replaced: same connection, its work running.
      const still = await target.processes.spawn('echo', ['still']).result;
      expect(still.stdout.head).toBe('still\n');
      expect(target.client!.lastConnection!.generation).toBe(before.generation);
      expect(pidsWithArg(m).length).toBeGreaterThan(0);
    } finally {
      await dispose(target);
    }
  }, 300_000);

  test('dispose while detached: the host re-attaches to shut the session down, nothing is left in the target', async () => {
    const target = newTarget();
    const { registry, run } = await terminalRegistry(target);
    try {
      const t = marker('detached-dispose');
      // A terminal session holds nothing on the host between calls: the drop is not re-attached by itself.
      const term = await run({ command: `bash -c 'sleep 300; :' ${t}`, background: true });
      expect(term).toMatchObject({ state: 'background' });
      const before = target.client!.lastConnection!;
      const socket = before.init.session!.socket;
      process.kill(target.client!.transportPid!, 'SIGKILL');
      await waitFor(() => target.client!.currentGeneration === undefined, 20_000, 'the connection lost');
      expect(target.client!.sessionInfo).toMatchObject({ detached: true });
      expect(pidsWithArg(t).length).toBeGreaterThan(0);
      await registry.dispose();
      await dispose(target);
      await expectNothingLeft([t], before.hello.pid, socket);
    } finally {
      await registry.dispose();
      await dispose(target);
    }
  }, 300_000);
});
