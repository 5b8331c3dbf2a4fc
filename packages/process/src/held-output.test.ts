// Invariant: a supervisor that holds a command's output pipes (sending a short command's output with its exit, handing a longer one's pipes over) changes nothing a caller sees — every byte in order, output streamed while a command runs, output larger than a socket's buffer, output of what a command leaves running, a sandboxed child's pid — and a command with a stdin pipe is never held.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { findBwrap, type SandboxProfile } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadSpawner } from './native-spawn.js';
import { ProcessManager } from './process-manager.js';
import { SupervisorChildren } from './supervisor-children.js';
import type { SpawnRequest, SupervisorMessage } from './supervisor-protocol.js';

const bwrap = findBwrap();

/** A command printing every byte value `repeat` times, on stdout, and `tag` on stderr. */
const allBytes = (repeat: number, tag: string) =>
  `i=0; while [ $i -lt ${repeat} ]; do printf "$(printf '\\\\%03o' $(seq 0 255))"; i=$((i+1)); done; printf ${tag} >&2`;

const expectedBytes = (repeat: number) =>
  Buffer.concat(Array.from({ length: repeat }, () => Buffer.from(Array.from({ length: 256 }, (_, i) => i))));

describe('the supervisor side (SupervisorChildren with posix_spawn)', () => {
  const spawner = loadSpawner();

  // The hold decides only when output travels: held past any exit here (60 s), or handed over at
  // once (0), so each test sees one path whatever the machine's speed.
  function run(request: Omit<SpawnRequest, 't' | 'id' | 'env' | 'envBase'>, id: number, holdMs = 60_000) {
    const messages: SupervisorMessage[] = [];
    const handles: { destroy(): void }[] = [];
    const children = new SupervisorChildren(
      (message, handle) => {
        messages.push(message);
        if (handle) handles.push(handle);
      },
      false,
      spawner,
      undefined,
      false,
      holdMs,
    );
    const exited = new Promise<void>((resolve) => {
      const look = setInterval(() => {
        if (messages.some((m) => m.t === 'exit' || m.t === 'spawn-error')) {
          clearInterval(look);
          for (const handle of handles) handle.destroy();
          resolve();
        }
      }, 5);
    });
    children.spawn({
      t: 'spawn',
      id,
      env: {},
      envBase: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      ...request,
    });
    return { messages, exited };
  }

  it('loads the addon with drain (the held path is what these tests exercise)', () => {
    expect(spawner.kind).toBe('posix_spawn');
    expect(spawner.kind === 'posix_spawn' && typeof spawner.module.drain).toBe('function');
  });

  it('a held short command: no pipes in `spawned`, every byte (and stderr) in `exit`', async () => {
    const { messages, exited } = run(
      {
        file: '/bin/sh',
        args: ['-c', allBytes(8, 'E!')],
        cwd: '/',
        stdin: 'ignore',
        capture: true,
        hold: true,
      },
      1,
    );
    await exited;
    const spawned = messages.find((m) => m.t === 'spawned');
    expect(spawned).toMatchObject({ fds: [], held: [1, 2] });
    const exit = messages.find((m) => m.t === 'exit') as Extract<SupervisorMessage, { t: 'exit' }>;
    expect(exit.code).toBe(0);
    expect(Buffer.from(exit.out ?? '', 'base64').equals(expectedBytes(8))).toBe(true);
    expect(Buffer.from(exit.err ?? '', 'base64').toString()).toBe('E!');
    expect(messages.some((m) => m.t === 'unheld' || m.t === 'stream')).toBe(false);
  });

  it('a command that writes nothing: an exit without output fields', async () => {
    const { messages, exited } = run(
      { file: 'true', args: [], cwd: '/', stdin: 'ignore', capture: true, hold: true },
      2,
    );
    await exited;
    const exit = messages.find((m) => m.t === 'exit');
    expect(exit).toMatchObject({ t: 'exit', code: 0 });
    expect(exit && 'out' in exit).toBe(false);
    expect(exit && 'err' in exit).toBe(false);
  });

  it('not asked to hold (or with a stdin pipe): the pipes go with `spawned`, as before', async () => {
    for (const request of [
      { file: 'true', args: [], cwd: '/', stdin: 'ignore' as const, capture: true },
      { file: 'true', args: [], cwd: '/', stdin: 'pipe' as const, capture: true, hold: true as const },
    ]) {
      const { messages, exited } = run(request, 3);
      await exited;
      const spawned = messages.find((m) => m.t === 'spawned') as Extract<SupervisorMessage, { t: 'spawned' }>;
      expect(spawned.held).toBeUndefined();
      expect(spawned.fds).toEqual(request.stdin === 'pipe' ? [1, 2, 0] : [1, 2]);
    }
  });

  it('a command still running is handed over (`unheld`, what it wrote so far first), then exits', async () => {
    const { messages, exited } = run(
      {
        file: '/bin/sh',
        args: ['-c', 'printf first; sleep 1; printf second'],
        cwd: '/',
        stdin: 'ignore',
        capture: true,
        hold: true,
      },
      4,
      0,
    );
    await exited;
    const kinds = messages.map((m) => m.t);
    expect(exit(messages).code).toBe(0);
    expect(kinds.indexOf('unheld')).toBeGreaterThan(kinds.indexOf('spawned'));
    expect(kinds.indexOf('exit')).toBeGreaterThan(kinds.indexOf('unheld'));
    const last = exit(messages);
    // Nothing rides on the exit once the pipes were handed over: the rest came through them.
    expect('out' in last).toBe(false);
  });
});

const exit = (messages: SupervisorMessage[]) =>
  messages.find((m) => m.t === 'exit') as Extract<SupervisorMessage, { t: 'exit' }>;

describe('through the process manager', () => {
  let ws: string;
  let manager: ProcessManager;
  beforeEach(() => {
    ws = mkdtempSync(join(tmpdir(), 'conch-held-'));
    manager = new ProcessManager({ cwd: ws });
  });
  afterEach(async () => {
    await manager.dispose();
    rmSync(ws, { recursive: true, force: true });
  });

  /** Runs `command`, collecting each stream's bytes from the output events. */
  async function collect(command: string, onChunk?: (stream: string, text: string) => void) {
    const proc = manager.spawn('/bin/sh', ['-c', command]);
    const bytes = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    proc.onOutput((event) => {
      bytes[event.stream].push(event.chunk);
      onChunk?.(event.stream, event.text);
    });
    const result = await proc.result;
    return { result, stdout: Buffer.concat(bytes.stdout), stderr: Buffer.concat(bytes.stderr), proc };
  }

  it('every byte value, on both streams, for short commands one after another', async () => {
    for (const repeat of [1, 3, 40]) {
      const { result, stdout, stderr } = await collect(
        `${allBytes(repeat, 'tag')}; { ${allBytes(repeat, 'x')}; } >&2`,
      );
      expect(result.exitCode).toBe(0);
      expect(stdout.equals(expectedBytes(repeat))).toBe(true);
      expect(
        stderr.equals(Buffer.concat([Buffer.from('tag'), expectedBytes(repeat), Buffer.from('x')])),
      ).toBe(true);
      expect(result.stdout.totalBytes).toBe(256 * repeat);
    }
  });

  it('output far larger than a socket buffer arrives whole (the writer waits for the hand-over)', async () => {
    const size = 6 * 1024 * 1024 + 123;
    const { result, stdout } = await collect(
      `head -c ${size} /dev/urandom | od -An -v -tx1 | head -c ${size}`,
    );
    expect(result.exitCode).toBe(0);
    expect(stdout.length).toBe(size);
    expect(result.stdout.totalBytes).toBe(size);
  });

  it('a line sequence spanning the hand-over keeps its order', async () => {
    const { result, stdout } = await collect(
      'for i in $(seq 1 300); do echo $i; [ $((i % 50)) = 0 ] && sleep 0.05; done',
    );
    expect(result.exitCode).toBe(0);
    expect(stdout.toString()).toBe(`${Array.from({ length: 300 }, (_, i) => i + 1).join('\n')}\n`);
  });

  it('output streams while the command runs (not held until it exits)', async () => {
    const seen: string[] = [];
    const proc = manager.spawn('/bin/sh', ['-c', 'printf "early "; echo err-early >&2; exec sleep 60']);
    proc.onOutput((event) => seen.push(`${event.stream}:${event.text}`));
    await waitFor(() => seen.includes('stdout:early ') && seen.includes('stderr:err-early\n'), {
      timeoutMs: 30_000,
    });
    expect(proc.isRunning).toBe(true);
    await proc.kill();
    const result = await proc.result;
    expect(result.stdout.head).toBe('early ');
  });

  it('output of what a command left running, after the command itself exited', async () => {
    const { result, stdout } = await collect('echo first; (sleep 0.3; echo second) & exit 3');
    expect(result.exitCode).toBe(3);
    expect(stdout.toString()).toBe('first\nsecond\n');
  });

  it('a stdin pipe still works (never held)', async () => {
    const proc = manager.spawn('cat', [], { stdin: 'pipe' });
    proc.stdin!.end('to cat and back');
    const result = await proc.result;
    expect(result.stdout.head).toBe('to cat and back');
  });

  it.skipIf(!bwrap)(
    "in the workspace-write sandbox: short commands' output, a running one's host pid",
    async () => {
      const profile: SandboxProfile = {
        kind: 'workspace-write',
        writableRoots: [ws],
        readOnlyPaths: [],
        network: 'none',
      };
      for (let i = 0; i < 5; i++) {
        const proc = manager.spawn('/bin/sh', ['-c', `printf 'out${i}'; printf 'err${i}' >&2; exit ${i}`], {
          sandbox: profile,
        });
        const result = await proc.result;
        expect(result.sandbox).toBe('workspace-write');
        expect(result.exitCode).toBe(i);
        expect(result.stdout.head).toBe(`out${i}`);
        expect(result.stderr.head).toBe(`err${i}`);
      }
      // Its pidfd came alone on the fd channel (the pipes held): the host pid is the running sleep.
      const proc = manager.spawn('/bin/sh', ['-c', 'printf ready; exec sleep 60'], { sandbox: profile });
      await waitFor(() => proc.lastLine() === 'ready', { timeoutMs: 30_000 });
      expect(proc.pid).toBeGreaterThan(1);
      expect(readFileSync(`/proc/${proc.pid}/cmdline`, 'utf8')).toBe('sleep\x0060\x00');
      await proc.kill();
      expect((await proc.result).stdout.head).toBe('ready');
    },
  );
});
