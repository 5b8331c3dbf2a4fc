// Invariant: a managed process never hangs on stdin, never loses output, reports how it ended, and leaves no survivor after kill, timeout, abort or dispose — through the supervisor and in-process alike.
import { createHash } from 'node:crypto';
import {
  createReadStream,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBus } from '@conch/core';
import { waitFor } from '@conch/test-support';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidSpawnOptionError } from './errors.js';
import { findCookiePids, pidAlive, procTable } from './kill-tree.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import { survivors } from './test-support/procs.js';

const prefixes: string[] = [];
afterAll(() => {
  for (const prefix of prefixes) expect(survivors(prefix)).toEqual([]);
});

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const MODES: [string, ProcessManagerOptions][] = [
  ['through the supervisor', {}],
  ['in-process (no supervisor)', { supervisor: false }],
];

describe.each(MODES)('%s', (_name, mode) => {
  let dir: string;
  let manager: ProcessManager;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'conch-pm-'));
    manager = new ProcessManager({ ...mode, tempDir: () => dir, cwd: dir, killGraceMs: 500, drainMs: 300 });
    prefixes.push(manager.cookiePrefix);
  });
  afterEach(async () => {
    await manager.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('ProcessManager basics', () => {
    it('cat with no input returns at once (stdin is /dev/null)', async () => {
      const result = await manager.spawn('cat').result;
      expect(result).toMatchObject({ exitCode: 0, signal: null, reason: 'exit', timedOut: false });
      expect(result.stdout.head).toBe('');
    });

    it('reports exit codes and signals', async () => {
      expect((await manager.spawn('exit 3', [], { shell: true }).result).exitCode).toBe(3);
      const killed = await manager.spawn('kill -TERM $$', [], { shell: true }).result;
      expect(killed).toMatchObject({ exitCode: null, signal: 'SIGTERM' });
    });

    it('reports a missing executable as a spawn error, not a throw', async () => {
      const result = await manager.spawn('definitely-not-a-command-xyz').result;
      expect(result.spawnError?.code).toBe('ENOENT');
      expect(result.reason).toBe('error');
    });

    it('passes shell args as positional parameters and env additions', async () => {
      const result = await manager.spawn('printf "%s|%s|%s" "$1" "$2" "$FOO"', ['a b', 'c'], {
        shell: true,
        env: { FOO: 'bar' },
      }).result;
      expect(result.stdout.head).toBe('a b|c|bar');
    });

    it('gives a pipe on stdin when asked', async () => {
      const proc = manager.spawn('cat', [], { stdin: 'pipe' });
      proc.stdin!.end('hello through stdin');
      expect((await proc.result).stdout.head).toBe('hello through stdin');
    });

    it('strips ANSI and OSC sequences from the text for the model', async () => {
      const result = await manager.spawn("printf '\\033[31mred\\033[0m \\033]0;title\\007ok'", [], {
        shell: true,
      }).result;
      expect(result.stdout.head).toBe('red ok');
    });

    it('lists processes and emits started/output/exited events only to listeners', async () => {
      const events = new EventBus();
      const m = new ProcessManager({ ...mode, tempDir: () => dir, events });
      const seen: string[] = [];
      events.on('process.started', (e) => seen.push(`started:${e.command}`));
      events.on('process.output', (e) => seen.push(`output:${e.stream}:${e.text.trim()}`));
      events.on('process.exited', (e) => seen.push(`exited:${e.exitCode}:${e.reason}`));
      const proc = m.spawn('echo', ['hi']);
      await proc.result;
      expect(seen).toEqual(['started:echo hi', 'output:stdout:hi', 'exited:0:exit']);
      expect(m.list()).toEqual([
        expect.objectContaining({ id: proc.id, command: 'echo hi', isRunning: false, exitCode: 0 }),
      ]);
      await m.dispose();
    });
  });

  describe('UTF-8', () => {
    it('a character split across two writes decodes to one character (capture and stream)', async () => {
      const proc = manager.spawn("printf '\\342\\202'; sleep 0.3; printf '\\254'", [], { shell: true });
      let streamed = '';
      let chunks = 0;
      proc.onOutput((e) => {
        streamed += e.text;
        chunks++;
      });
      const result = await proc.result;
      expect(result.stdout.head).toBe('€');
      expect(streamed).toBe('€');
      expect(chunks).toBeGreaterThanOrEqual(1);
      expect(result.stdout.totalBytes).toBe(3);
    });

    it('\\xff does not throw', async () => {
      const result = await manager.spawn("printf 'a\\377b'", [], { shell: true }).result;
      expect(result.stdout.head).toBe('a\ufffdb');
      expect(result.stdout.binary).toBe(false);
    });
  });

  describe('floods', () => {
    it('a 4 MB stderr-only flood does not deadlock and every byte is in the spill file', async () => {
      const result = await manager.spawn("head -c 4194304 /dev/zero | tr '\\0' x >&2", [], { shell: true })
        .result;
      expect(result.exitCode).toBe(0);
      expect(result.stderr.totalBytes).toBe(4194304);
      expect(result.stderr.truncated).toBe(true);
      expect(statSync(result.stderr.spillPath!).size).toBe(4194304);
      expect(result.stdout.totalBytes).toBe(0);
    });

    it('a 256 MiB stream keeps memory bounded and the spill file holds every byte', async () => {
      const size = 256 * 1024 * 1024;
      const baseline = process.memoryUsage();
      let peakExternal = 0;
      const sampler = setInterval(() => {
        const m = process.memoryUsage();
        peakExternal = Math.max(peakExternal, m.arrayBuffers - baseline.arrayBuffers);
      }, 20);
      const result = await manager.spawn(`yes 'line of text for the flood test' | head -c ${size}`, [], {
        shell: true,
      }).result;
      clearInterval(sampler);
      expect(result.exitCode).toBe(0);
      expect(result.stdout.totalBytes).toBe(size);
      const lineBytes = 'line of text for the flood test\n'.length;
      expect(result.stdout.lines).toBe(Math.ceil(size / lineBytes));
      expect(statSync(result.stdout.spillPath!).size).toBe(size);
      const expected = createHash('sha256');
      const line = Buffer.from('line of text for the flood test\n'.repeat(2048));
      let left = size;
      while (left > 0) {
        const n = Math.min(left, line.length);
        expected.update(line.subarray(0, n));
        left -= n;
      }
      expect(await sha256File(result.stdout.spillPath!)).toBe(expected.digest('hex'));
      // Head + tail + in-flight buffers only; generous for GC lag under load.
      expect(peakExternal).toBeLessThan(96 * 1024 * 1024);
      expect(result.stdout.head.length).toBeLessThanOrEqual(64 * 1024);
    }, 120_000);
  });

  describe('no survivors', () => {
    it("sh -c 'sleep 300 & echo started' is reported exited within the drain time, and kill leaves nothing", async () => {
      const proc = manager.spawn('sleep 300 & echo started', [], { shell: true });
      const result = await proc.result;
      expect(result.stdout.head).toBe('started\n');
      expect(result.drainTimedOut).toBe(true);
      expect(survivors(proc.cookie).length).toBe(1);
      await manager.kill(proc.id);
      await waitFor(() => survivors(proc.cookie).length === 0, { what: 'sleep killed', timeoutMs: 10_000 });
    });

    it('setsid, nohup and double-fork escapees die with kill()', async () => {
      const proc = manager.spawn(
        'setsid sleep 300 > /dev/null 2>&1 & nohup sleep 301 > /dev/null 2>&1 & (sh -c "sleep 302 & " &) ; echo ready; sleep 303',
        [],
        { shell: true },
      );
      await waitFor(() => proc.stdout.totalBytes > 0 && survivors(proc.cookie).length >= 4, {
        what: 'children',
        timeoutMs: 10_000,
      });
      const result = await proc.kill();
      expect(result.killed).toBe(true);
      expect(survivors(proc.cookie)).toEqual([]);
    });

    it('dispose() kills running trees and escapees of finished processes', async () => {
      const m = new ProcessManager({ ...mode, tempDir: () => dir, killGraceMs: 300, drainMs: 200 });
      prefixes.push(m.cookiePrefix);
      const a = m.spawn('setsid sleep 300 > /dev/null 2>&1 & echo a', [], { shell: true });
      const b = m.spawn('sleep', ['300']);
      try {
        await a.result;
        await waitFor(() => survivors(m.cookiePrefix).length >= 2, { what: 'children', timeoutMs: 10_000 });
      } finally {
        await m.dispose();
      }
      expect(survivors(m.cookiePrefix)).toEqual([]);
      expect((await b.result).killed).toBe(true);
      expect(() => m.spawn('true')).toThrow(/disposed/);
    });

    it('a timeout kills the tree and says so', async () => {
      const proc = manager.spawn('sleep 300 & sleep 300', [], { shell: true, timeoutMs: 200 });
      const result = await proc.result;
      expect(result).toMatchObject({ timedOut: true, reason: 'timeout' });
      expect(survivors(proc.cookie)).toEqual([]);
    });

    it('an abort kills the tree and says so', async () => {
      const controller = new AbortController();
      const proc = manager.spawn('sleep', ['300'], { signal: controller.signal });
      setTimeout(() => controller.abort(), 100);
      const result = await proc.result;
      expect(result).toMatchObject({ aborted: true, reason: 'aborted' });
      expect(survivors(proc.cookie)).toEqual([]);
    });

    it('a process ignoring SIGTERM is SIGKILLed after the grace period', async () => {
      const proc = manager.spawn("trap '' TERM; echo armed; sleep 300", [], { shell: true });
      await waitFor(() => proc.stdout.totalBytes > 0, { what: 'trap armed', timeoutMs: 10_000 });
      const result = await proc.kill();
      expect(result.killed).toBe(true);
      expect(survivors(proc.cookie)).toEqual([]);
    });
  });

  // The result of a kill, a timeout or an abort comes once the whole tree is dead, not when the
  // pipes close: these trees close their output first, so only the kill's end can tell.
  describe.each([
    [
      'a child ignoring SIGTERM',
      `(trap "" TERM; exec >/dev/null 2>&1; sleep 310 & echo x > ready; wait) & wait`,
    ],
    [
      'a setsid escapee',
      `setsid sh -c 'exec >/dev/null 2>&1 </dev/null; sleep 311 & echo x > ready; wait' & wait`,
    ],
    [
      'a nohup child in the group',
      `nohup sh -c 'trap "" TERM; sleep 312 & echo x > ready; wait' >/dev/null 2>&1 & wait`,
    ],
  ])('output closed early: %s', (_case, script) => {
    const readyTree = async (cookie: string) => {
      await waitFor(() => existsSync(join(dir, 'ready')) && survivors(cookie).length >= 3, {
        what: 'tree up',
        timeoutMs: 10_000,
      });
      return survivors(cookie);
    };
    const dead = (pids: number[]) => pids.filter((pid) => pidAlive(pid));

    it('kill() answers when none of it is alive', async () => {
      const proc = manager.spawn(script, [], { shell: true, cwd: dir });
      const tree = await readyTree(proc.cookie);
      const result = await proc.kill();
      expect(result.killed).toBe(true);
      expect(dead(tree)).toEqual([]);
    });

    it('an abort answers when none of it is alive', async () => {
      const controller = new AbortController();
      const proc = manager.spawn(script, [], { shell: true, cwd: dir, signal: controller.signal });
      const tree = await readyTree(proc.cookie);
      controller.abort();
      const result = await proc.result;
      expect(result.aborted).toBe(true);
      expect(dead(tree)).toEqual([]);
    });

    it('a timeout answers when none of it is alive', async () => {
      const proc = manager.spawn(script, [], { shell: true, cwd: dir, timeoutMs: 60_000 });
      const tree = await readyTree(proc.cookie);
      proc.setTimeout(1);
      const result = await proc.result;
      expect(result.timedOut).toBe(true);
      expect(dead(tree)).toEqual([]);
    });
  });

  describe('spawn errors, pids and events', () => {
    it('a file without execute permission is an EACCES spawn error', async () => {
      const script = join(dir, 'not-executable.sh');
      writeFileSync(script, '#!/bin/sh\necho hi\n', { mode: 0o644 });
      const result = await manager.spawn(script).result;
      expect(result.spawnError?.code).toBe('EACCES');
      expect(result).toMatchObject({ reason: 'error', exitCode: null, leftRunning: [] });
    });

    it('a NUL byte in an argument throws synchronously, naming the field', () => {
      expect(() => manager.spawn('echo', ['a\u0000b'])).toThrow(InvalidSpawnOptionError);
      expect(() => manager.spawn('echo', ['a\u0000b'])).toThrow(/'args'.*NUL/);
    });

    it('spawned resolves with the pid, which leads its own process group and carries the cookie', async () => {
      const proc = manager.spawn('sleep', ['30']);
      const pid = await proc.spawned;
      expect(pid).toBe(proc.pid);
      expect(procTable().find((p) => p.pid === pid)?.pgrp).toBe(pid);
      // posix_spawn returns once the child's exec has begun; its environ reads empty until the
      // kernel has laid out the new image's stack (findEnvPids), which a loaded machine can take
      // long enough to see.
      await waitFor(() => findCookiePids({ cookie: proc.cookie }).length > 0, 'the cookie in its environ');
      expect(findCookiePids({ cookie: proc.cookie })).toEqual([pid]);
      await proc.kill();
    });

    it('a kill right after spawn (before the pid is known) still kills the process', async () => {
      const proc = manager.spawn('sleep', ['300']);
      const result = await proc.kill();
      expect(result.killed).toBe(true);
      expect(survivors(proc.cookie)).toEqual([]);
    });

    it('process.started carries the pid', async () => {
      const events = new EventBus();
      const m = new ProcessManager({ ...mode, tempDir: () => dir, events });
      const pids: (number | undefined)[] = [];
      events.on('process.started', (e) => pids.push(e.pid));
      const proc = m.spawn('true');
      await proc.result;
      expect(pids).toEqual([proc.pid]);
      expect(proc.pid).toBeGreaterThan(0);
      await m.dispose();
    });
  });

  describe('leftovers', () => {
    it('reports what a finished command left running, with its command line', async () => {
      const proc = manager.spawn('sleep 300 & echo started', [], { shell: true });
      const result = await proc.result;
      expect(result.leftRunning).toEqual([{ pid: expect.any(Number), command: 'sleep 300' }]);
      await proc.kill();
      await waitFor(() => survivors(proc.cookie).length === 0, {
        what: 'leftover killed',
        timeoutMs: 10_000,
      });
    });

    it('reports a leftover that closed its output but stayed in the process group', async () => {
      const result = await manager.spawn('sleep 301 > /dev/null 2>&1 & echo started', [], { shell: true })
        .result;
      expect(result.drainTimedOut).toBe(false);
      expect(result.leftRunning.map((l) => l.command)).toEqual(['sleep 301']);
    });

    it('reports nothing for a command that leaves nothing', async () => {
      const result = await manager.spawn('echo done', [], { shell: true }).result;
      expect(result.leftRunning).toEqual([]);
    });
  });

  describe('output files', () => {
    it.each([50_001, 120_000, 199_999])(
      'spillFile always: %i bytes through spill combined land in a file, every byte',
      async (size) => {
        const proc = manager.spawn(`head -c ${size} /dev/urandom | od -An -v -tx1 | head -c ${size}`, [], {
          shell: true,
          capture: { headBytes: 100_000, tailBytes: 100_000, spill: 'combined', spillFile: 'always' },
        });
        const chunks: Buffer[] = [];
        proc.onOutput((e) => chunks.push(e.chunk));
        const result = await proc.result;
        expect(result.stdout.totalBytes).toBe(size);
        expect(result.outputFile).toBeDefined();
        const expected = createHash('sha256').update(Buffer.concat(chunks)).digest('hex');
        expect(await sha256File(result.outputFile!)).toBe(expected);
        expect(statSync(result.outputFile!).size).toBe(size);
      },
    );

    it('without spillFile a small output has no file, and materializeOutput() writes one after the end', async () => {
      const proc = manager.spawn("printf 'out1\\n'; printf 'err1\\n' >&2; printf 'out2\\n'", [], {
        shell: true,
        capture: { spill: 'combined' },
      });
      const result = await proc.result;
      expect(result.outputFile).toBeUndefined();
      const path = await proc.materializeOutput();
      expect(path).toBeDefined();
      expect(readFileSync(path!, 'utf8').split('\n').sort()).toEqual(['', 'err1', 'out1', 'out2']);
    });
  });

  describe('registry integration', () => {
    it('ensureProcessManager registers one manager per registry, disposed with it', async () => {
      const { PluginRegistry, TOKENS, definePlugin } = await import('@conch/core');
      const { ensureProcessManager } = await import('./ensure.js');
      const { z } = await import('zod');
      let fromPlugin: ProcessManager | undefined;
      const plugin = definePlugin({
        name: 'uses-processes',
        version: '0',
        configSchema: z.object({}),
        register: (ctx) => {
          fromPlugin = ensureProcessManager(ctx);
          expect(ensureProcessManager(ctx)).toBe(fromPlugin);
        },
        tools: [],
      });
      const registry = new PluginRegistry({ cwd: dir, plugins: [plugin] });
      registry.exposeSync('uses-processes', {});
      expect(registry.resolve(TOKENS.ProcessManager)).toBe(fromPlugin);
      const proc = fromPlugin!.spawn('setsid sleep 300 > /dev/null 2>&1 & sleep 300', [], { shell: true });
      prefixes.push(fromPlugin!.cookiePrefix);
      await waitFor(() => survivors(proc.cookie).length >= 2, { what: 'children', timeoutMs: 10_000 });
      await registry.dispose();
      expect(survivors(fromPlugin!.cookiePrefix)).toEqual([]);
      expect(fromPlugin!.disposed).toBe(true);
    });
  });
});
