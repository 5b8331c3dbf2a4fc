// Invariant: what a finished command leaves running is reported and can be taken over: with keepLeftoverOutput every byte the leftovers write still lands in the output, done tells when they are gone, kill() ends them — through the supervisor and in-process alike.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeftoverAdoptionError } from './errors.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import { survivors } from './test-support/procs.js';

describe.each([
  ['through the supervisor', {}],
  ['in-process (no supervisor)', { supervisor: false }],
] as [string, ProcessManagerOptions][])('leftovers %s', (_name, mode) => {
  let dir: string;
  let manager: ProcessManager;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'conch-left-'));
    manager = new ProcessManager({ ...mode, cwd: dir, tempDir: () => dir, killGraceMs: 300, drainMs: 300 });
  });
  afterEach(async () => {
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  });

  const combined = { spill: 'combined' } as const;

  it('keeps every byte the leftovers write after the result, and done resolves when they are gone', async () => {
    const proc = manager.spawn(
      '(sleep 0.6; head -c 3000000 /dev/urandom | base64; echo last line) & echo early',
      [],
      {
        shell: true,
        capture: combined,
        keepLeftoverOutput: true,
      },
    );
    const chunks: Buffer[] = [];
    proc.onOutput((e) => chunks.push(e.chunk));
    const result = await proc.result;
    expect(result.stdout.head).toBe('early\n');
    expect(result.drainTimedOut).toBe(true);
    expect(result.leftRunning.length).toBeGreaterThan(0);
    const handle = manager.adoptLeftovers(proc);
    expect(manager.adoptLeftovers(proc.id)).toBe(handle);
    expect(handle.pids().length).toBeGreaterThan(0);
    await handle.done;
    expect(handle.pids()).toEqual([]);
    const all = Buffer.concat(chunks);
    expect(all.length).toBeGreaterThan(4_000_000);
    expect(handle.outputBytes()).toBe(all.length);
    expect(handle.outputFile()).toBeDefined();
    const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(sha(readFileSync(handle.outputFile()!))).toBe(sha(all));
    expect(Buffer.from(await handle.readOutput(0, 6)).toString()).toBe('early\n');
    expect(handle.lastLine()).toBe('last line');
  });

  it('without keepLeftoverOutput the pipes close at the drain time (as before): later output is not kept', async () => {
    const proc = manager.spawn('(sleep 0.6; echo late) & echo early', [], { shell: true, capture: combined });
    const result = await proc.result;
    expect(result.leftRunning.length).toBeGreaterThan(0);
    const handle = manager.adoptLeftovers(proc);
    await handle.done;
    expect(Buffer.from(await handle.readOutput(0, 100)).toString()).toBe('early\n');
  });

  it('kill() ends every leftover, setsid escapees included', async () => {
    const proc = manager.spawn('sleep 300 & setsid sleep 301 & echo started', [], {
      shell: true,
      capture: combined,
      keepLeftoverOutput: true,
    });
    const result = await proc.result;
    expect(result.leftRunning.map((l) => l.command).sort()).toEqual(['sleep 300', 'sleep 301']);
    const handle = manager.adoptLeftovers(proc);
    expect(handle.pids()).toHaveLength(2);
    await handle.kill();
    expect(survivors(proc.cookie)).toEqual([]);
    await handle.done;
  });

  it('refuses a running process and a process of another manager, naming the field', async () => {
    const running = manager.spawn('sleep', ['30']);
    expect(() => manager.adoptLeftovers(running)).toThrow(LeftoverAdoptionError);
    expect(() => manager.adoptLeftovers('p999')).toThrow(/'proc': expected a process this manager spawned/);
    await running.kill();
  });
});
