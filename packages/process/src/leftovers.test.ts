// Invariant: what a finished command leaves running is reported and can be taken over: with keepLeftoverOutput every byte the leftovers write still lands in the output, done tells when they are gone, kill() ends them — through the supervisor and in-process alike.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { LeftoverAdoptionError } from './errors.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import { survivors } from './test-support/procs.js';

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0$/, '').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

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

  // A leftover that still had the cookie when the command ended, then left it (env -i): no longer
  // the command's, like any escapee that cleared its environment. Waiting for it held the call for
  // as long as it ran (a cli call of `env -i setsid sleep 31 >/dev/null 2>&1 & echo done` took 31 s
  // when the shell ended before its child's exec). Each variant execs once the handle knows it.
  it.each([
    ['env -i', 'exec env -i sleep 600'],
    ['env -i setsid', 'exec env -i setsid sleep 601'],
    ['a cleared environment, its output elsewhere', 'exec env -i sh -c "exec sleep 602" >/dev/null 2>&1'],
  ])('a leftover that drops the cookie (%s) is neither waited for nor killed', async (_name, then) => {
    const proc = manager.spawn(`(until [ -e go ]; do sleep 0.01; done; ${then}) & echo started`, [], {
      shell: true,
      capture: combined,
    });
    const result = await proc.result;
    expect(result.leftRunning.length).toBeGreaterThan(0);
    const handle = manager.adoptLeftovers(proc);
    const [pid] = handle.pids();
    expect(pid).toBeDefined();
    writeFileSync(join(dir, 'go'), '');
    // The same pid, now the long sleep without the cookie.
    await waitFor(() => /^sleep 60\d$/.test(cmdline(pid!)), { what: 'the exec', timeoutMs: 30_000 });
    onTestFinished(() => {
      try {
        process.kill(pid!, 'SIGKILL');
      } catch {
        // gone
      }
    });
    await handle.done;
    expect(handle.pids()).toEqual([]);
    await handle.kill();
    expect(cmdline(pid!)).toMatch(/^sleep 60\d$/); // not killed: it is not the command's any more
  });

  it('refuses a running process and a process of another manager, naming the field', async () => {
    const running = manager.spawn('sleep', ['30']);
    expect(() => manager.adoptLeftovers(running)).toThrow(LeftoverAdoptionError);
    expect(() => manager.adoptLeftovers('p999')).toThrow(/'proc': expected a process this manager spawned/);
    await running.kill();
  });
});
