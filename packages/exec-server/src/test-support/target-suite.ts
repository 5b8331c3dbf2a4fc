// The shared suite every transport runs (ssh, a container, kubectl): the same process layer,
// terminal sessions and file operations, in the target, through one connection.
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { EventBus, PluginRegistry, definePlugin } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createRemoteTerminalTool } from '../client/remote-terminal.js';
import type { RemoteProcess } from '../client/remote-process.js';
import type { RemoteProcessManager } from '../client/remote-process-manager.js';
import { executorFromConfig, type ExecutionTarget } from '../execution-target.js';
import { marker, memoryLogger, pidsWithArg, waitFor } from './helpers.js';

/** A started target of one transport. */
export interface TargetHarness {
  /** The executor config reaching it. */
  config: Record<string, unknown>;
  /** What results name as `target`. */
  target: string;
  /** The workspace the server starts in, and the target user's home. */
  cwd: string;
  home: string;
  /** Whether the target has its own /tmp and pids (so a host-side path check proves where things went). */
  isolated: boolean;
  stop(): Promise<void>;
}

export interface SuiteContext {
  harness(): TargetHarness;
  target(): ExecutionTarget;
  newTarget(overrides?: Record<string, unknown>): ExecutionTarget;
  events: EventBus;
}

export function describeTarget(
  name: string,
  options: { available: boolean; start: () => Promise<TargetHarness>; extra?: (ctx: SuiteContext) => void },
): void {
  describe.skipIf(!options.available)(name, () => {
    let h: TargetHarness;
    let target: ExecutionTarget;
    const events = new EventBus();
    const { logger } = memoryLogger();
    const newTarget = (overrides: Record<string, unknown> = {}) =>
      executorFromConfig({ ...h.config, ...overrides }, { cwd: process.cwd(), events, logger });

    beforeAll(async () => {
      h = await options.start();
      target = newTarget();
    });

    afterAll(async () => {
      await target?.dispose();
      await h?.stop();
    });

    options.extra?.({ harness: () => h, target: () => target, newTarget, events });

    test('a cli-style run: exit code, stdout and stderr, the target workspace and env, where it ran', async () => {
      const proc = target.processes.spawn('echo out; echo err >&2; echo "$PWD $HOME $EXTRA"; exit 3', [], {
        shell: '/bin/bash',
        env: { EXTRA: 'given' },
        capture: { spill: 'combined' },
      });
      const result = await proc.result;
      expect(result.exitCode).toBe(3);
      expect(result.stdout.head).toBe(`out\n${h.cwd} ${h.home} given\n`);
      expect(result.stderr.head).toBe('err\n');
      expect((result as { target?: string }).target).toBe(h.target);
      const direct = await target.processes.spawn('printf', ['%s|', 'a b', "c'd"]).result;
      expect(direct.stdout.head).toBe("a b|c'd|");
      const missing = await target.processes.spawn('no-such-command-here').result;
      expect(missing.spawnError?.code).toBe('ENOENT');
      // What a runner asks before it plans a command there.
      const layer = target.processes as RemoteProcessManager;
      expect(await layer.workspace()).toBe(h.cwd);
      expect(await layer.directoryState(h.cwd)).toBe('directory');
      expect(await layer.directoryState('/etc/passwd')).toBe('not-directory');
      expect(await layer.directoryState('/no/such/dir')).toBe('missing');
    });

    test('the target starts commands with the posix_spawn addon the bundle carries; its sandbox runs under the path guard the bundle carries', async () => {
      // The bundle is installed in the target as one directory: without the prebuilt parts in it, a
      // target spawned with node's fork (about twice the cost) and sandboxed on mounts alone.
      await target.processes.spawn('true').result;
      let status = await target.processes.status();
      expect(status.spawner).toMatchObject({ kind: 'posix_spawn' });
      // Where the guard cannot run, the reason is the target's kernel or setting, never a missing file.
      expect(status.guard.reason ?? '').not.toMatch(/missing/);
      if (!status.sandbox.available || !status.guard.available) return;
      const boxed = await target.processes.spawn('echo boxed', [], {
        shell: '/bin/sh',
        sandbox: { kind: 'workspace-write', writableRoots: [h.cwd], readOnlyPaths: [] },
      }).result;
      expect(boxed.stdout.head).toBe('boxed\n');
      status = await target.processes.status();
      expect(status.guard).toMatchObject({ available: true, active: true });
    });

    test('50 MB of output: head and tail with the true size in the result, every byte in the target spill file', async () => {
      const size = 50 * 1024 * 1024;
      const line = 'the quick brown fox jumps over the lazy dog 0123456789\n';
      const proc = target.processes.spawn(`yes '${line.slice(0, -1)}' | head -c ${size}`, [], {
        shell: true,
        capture: { spill: 'combined' },
      });
      const result = await proc.result;
      expect(result.exitCode).toBe(0);
      expect(result.stdout.totalBytes).toBe(size);
      expect(result.stdout.truncated).toBe(true);
      expect(result.stdout.head.startsWith(line)).toBe(true);
      expect(result.outputFile).toBeDefined();
      const file = result.outputFile!;
      if (h.isolated) expect(existsSync(file)).toBe(false); // in the target's /tmp only
      const expected = createHash('sha256');
      const whole = Buffer.from(line.repeat(Math.ceil(size / line.length))).subarray(0, size);
      expected.update(whole);
      const sum = await target.processes.spawn('sha256sum', [file]).result;
      expect(sum.stdout.head.split(' ')[0]).toBe(expected.digest('hex'));
      // The middle, paged from the target's file.
      const middle = await proc.combined!.read(size / 2, 1000);
      expect(Buffer.from(middle).equals(whole.subarray(size / 2, size / 2 + 1000))).toBe(true);
      // The model's file tools can read it where it is.
      const bytes = await target.files.readBytes(file, { offset: size - 1000, length: 1000 });
      expect(bytes.sizeBytes).toBe(size);
      expect(bytes.data.equals(whole.subarray(size - 1000))).toBe(true);
    });

    test('stdin is closed unless asked for: cat ends at once; with a pipe it gets what is written', async () => {
      const closed = await target.processes.spawn('cat').result;
      expect(closed.exitCode).toBe(0);
      expect(closed.stdout.totalBytes).toBe(0);
      const piped = target.processes.spawn('cat', [], { stdin: 'pipe' });
      piped.stdin!.write('hello ');
      piped.stdin!.end('remote\n');
      const result = await piped.result;
      expect(result.stdout.head).toBe('hello remote\n');
    });

    test('a long run: output paged while it runs, timeout and abort end the tree in the target', async () => {
      const m = marker('long');
      const proc = target.processes.spawn(
        `for i in $(seq 1 400); do echo "line $i"; sleep 0.05; done # ${m}`,
        [],
        {
          shell: '/bin/bash',
          capture: { spill: 'combined' },
        },
      );
      await waitFor(() => (proc.combined?.totalBytes ?? 0) > 20, 20_000, 'output progress');
      const head = Buffer.from(await proc.combined!.read(0, 14)).toString();
      expect(head).toBe('line 1\nline 2\n');
      expect(proc.lastLine()).toMatch(/^line \d+$/);
      expect(pidsWithArg(m).length).toBeGreaterThan(0);
      const killed = await proc.kill();
      expect(killed.killed).toBe(true);
      await waitFor(() => pidsWithArg(m).length === 0, 10_000, 'the killed tree gone');

      const timed = await target.processes.spawn('sleep', ['30'], { timeoutMs: 300 }).result;
      expect(timed.timedOut).toBe(true);
      const controller = new AbortController();
      const aborting = target.processes.spawn('sleep', ['30'], { signal: controller.signal });
      await aborting.spawned;
      controller.abort();
      expect((await aborting.result).aborted).toBe(true);
    });

    test('what a command leaves running is reported and can be adopted, its output read, and killed', async () => {
      const m = marker('leftover');
      const proc = target.processes.spawn(
        `bash -c 'while :; do echo tick; sleep 0.1; done' ${m} & echo started`,
        [],
        {
          shell: '/bin/bash',
          capture: { spill: 'combined' },
          keepLeftoverOutput: true,
          drainMs: 300,
        },
      );
      const result = await proc.result;
      expect(result.leftRunning.length).toBeGreaterThan(0);
      expect(result.leftRunning.some((l) => l.command.includes(m))).toBe(true);
      const handle = target.processes.adoptLeftovers(proc);
      const before = handle.outputBytes();
      await waitFor(() => handle.outputBytes() > before + 20, 10_000, 'leftover output');
      const text = Buffer.from(await handle.readOutput(0, 200)).toString();
      // The command's own line and the leftover's, in whichever order they raced.
      expect(text.split('\n').slice(0, 2).sort()).toEqual(['started', 'tick']);
      await handle.kill();
      await handle.done;
      await waitFor(() => pidsWithArg(m).length === 0, 10_000, 'leftovers gone');
    });

    test('a setsid escapee is swept when the executor is disposed', async () => {
      const own = newTarget();
      const m = marker('escapee');
      const result = await own.processes.spawn(
        `setsid bash -c 'while :; do sleep 1; done' ${m} </dev/null >/dev/null 2>&1 & echo spawned`,
        [],
        { shell: '/bin/bash' },
      ).result;
      expect(result.stdout.head).toBe('spawned\n');
      await waitFor(() => pidsWithArg(m).length === 1, 10_000, 'the escapee running');
      await own.dispose();
      await waitFor(() => pidsWithArg(m).length === 0, 20_000, 'the escapee swept');
    });

    test('with detachGraceMs 0 a killed connection fails the running call with TRANSPORT_LOST, the server kills its work, and the next call reconnects', async () => {
      const own = newTarget({ detachGraceMs: 0 });
      try {
        // No session: nothing to re-attach to.
        expect((await own.client!.connect()).init.session).toBeUndefined();
        const m = marker('lost');
        const proc = own.processes.spawn(`sleep 300; : ${m}`, [], { shell: '/bin/bash' }) as RemoteProcess;
        await proc.spawned;
        await waitFor(() => pidsWithArg(m).length > 0, 10_000, 'the remote sleep');
        const before = own.client!.lastConnection!;
        process.kill(own.client!.transportPid!, 'SIGKILL');
        const result = await proc.result;
        expect(result.errorCode).toBe('TRANSPORT_LOST');
        expect(result.spawnError?.code).toBe('TRANSPORT_LOST');
        expect(result.target).toBe(own.target);
        // The server saw its stream close and killed what it ran.
        await waitFor(() => pidsWithArg(m).length === 0, 20_000, 'the remote sleep killed by its server');
        const again = await own.processes.spawn('echo', ['back']).result;
        expect(again.stdout.head).toBe('back\n');
        const after = own.client!.lastConnection!;
        expect(after.generation).toBe(before.generation + 1);
        expect(after.deployed).toBe(false);
      } finally {
        await own.dispose();
      }
    });

    test('file operations run in the target with the environment file operator semantics', async () => {
      const dir = `conch-files-${process.pid}`;
      const write = await target.files.write(`${dir}/a.txt`, 'one\ntwo\nthree\n');
      expect(write).toMatchObject({ created: true, bytesWritten: 14 });
      expect(write.path).toBe(`${h.cwd === '/' ? '' : h.cwd}/${dir}/a.txt`);
      const read = await target.files.read(`${dir}/a.txt`, { offset: 2, limit: 1 });
      expect(read).toMatchObject({
        content: 'two\n',
        sizeBytes: 14,
        lines: 1,
        totalLines: 3,
        truncated: true,
        nextOffset: 3,
      });
      await expect(
        target.files.edit(`${dir}/a.txt`, { oldString: 'zzz', newString: 'x' }),
      ).rejects.toMatchObject({
        name: 'FileOperationError',
        code: 'EDIT_NO_MATCH',
      });
      expect(await target.files.edit(`${dir}/a.txt`, { oldString: 'two', newString: '2' })).toMatchObject({
        replacements: 1,
        line: 2,
      });
      expect((await target.files.read(`${dir}/a.txt`)).content).toBe('one\n2\nthree\n');
      expect((await target.files.glob('**/*.txt', { cwd: dir })).matches).toEqual(['a.txt']);
      expect((await target.files.list(dir)).entries.map((e) => e.name)).toEqual(['a.txt']);
      await expect(target.files.read('/etc/hostname')).rejects.toMatchObject({ code: 'OUTSIDE_WORKING_DIR' });
      const rm = await target.processes.spawn('rm', ['-r', dir]).result;
      expect(rm.exitCode).toBe(0);
    });

    test('terminal sessions in the target: a python3 REPL answered with input, state across calls, the gate on the host', async () => {
      const remoteTerminal = target.terminal!;
      const tool = await createRemoteTerminalTool(remoteTerminal);
      const registry = new PluginRegistry({ cwd: process.cwd(), logger });
      const started: unknown[] = [];
      // The target's terminal events reach the host bus the target was made with.
      events.on('terminal.session.started' as never, (e: unknown) => started.push(e));
      registry.register(permissionPlugin);
      registry.register(
        definePlugin({
          name: 'remote-terminal',
          version: '0.0.0',
          configSchema: z.strictObject({}),
          setup: () => ({ tools: [tool] }),
        }),
      );
      await registry.expose('permission', { rules: { allow: ['python3 *'] } });
      await registry.expose('remote-terminal');
      // Whatever still asks is approved by this "human"; sudo is refused by a safety rule before that.
      const run = (args: Record<string, unknown>) =>
        registry.execute('terminal', args, { approve: async () => 'once' });
      try {
        const repl = await run({ command: 'python3 -q' });
        expect(repl).toMatchObject({ state: 'waiting' });
        expect(String(repl.output)).toContain('>>>');
        const sessionId = repl.session_id as number;
        const answered = await run({ session_id: sessionId, input: 'print(6 * 7)\n' });
        expect(String(answered.output)).toContain('42');
        const exited = await run({ session_id: sessionId, input: 'exit()\n' });
        expect(exited).toMatchObject({ exit_code: 0 });

        const cd = await run({ command: 'cd /tmp' });
        expect(cd).toMatchObject({ exit_code: 0, cwd: '/tmp' });
        const pwd = await run({ command: 'pwd' });
        expect(String(pwd.output).trim()).toBe('/tmp');

        const denied = await run({ command: 'sudo true' });
        expect(denied).toMatchObject({ permission_denied: true });
        expect(started.length).toBeGreaterThan(0);
        expect(remoteTerminal.list().length).toBeGreaterThan(0);
      } finally {
        await registry.dispose();
      }
    });
  });
}
