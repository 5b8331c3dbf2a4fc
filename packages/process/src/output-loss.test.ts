// Invariant: output that cannot be kept where it was asked for never ends the host and is never claimed kept — a directory that cannot be made falls back (temp dir, then the system's), and a full or read-only disk, no writable directory at all, and the spill limits are reported exactly (bytes kept of bytes produced, and why).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import type { CaptureOptions } from './spawn-options.js';
import { checkoutViewForAnyUser } from './test-support/procs.js';
import { canMount, fillToTheLastByte, mountTmpfs, unmountAll } from '@conch/test-support';

const BYTES = (n: number) => `head -c ${n} /dev/zero | tr '\\0' a`;

let root: string;
let temp: string;
const managers: ProcessManager[] = [];
const savedTmpdir = process.env.TMPDIR;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'conch-output-loss-'));
  temp = join(root, 'temp');
  mkdirSync(temp);
});
afterEach(async () => {
  for (const m of managers.splice(0)) await m.dispose();
  if (savedTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmpdir;
  unmountAll();
  rmSync(root, { recursive: true, force: true });
});

function manager(options: ProcessManagerOptions = {}): ProcessManager {
  const m = new ProcessManager({ tempDir: () => temp, cwd: root, ...options });
  managers.push(m);
  return m;
}

const forModel = (extra: CaptureOptions = {}): CaptureOptions => ({
  headBytes: 1024,
  tailBytes: 1024,
  spill: 'combined',
  outputDir: true,
  ...extra,
});

describe('an output directory that cannot be made', () => {
  it('under a file (ENOTDIR): the output goes to the temp dir, every byte, and the result says why', async () => {
    writeFileSync(join(root, 'a-file'), 'x');
    const wanted = join(root, 'a-file', 'out');
    const m = manager({ outputDir: wanted });
    // Over 128 KiB: the size at which the sink used to throw ENOTDIR inside a stream handler.
    const result = await m.spawn(BYTES(300_000), [], { shell: true, capture: forModel() }).result;
    expect(result.exitCode).toBe(0);
    expect(dirname(result.outputFile!)).toBe(temp);
    expect(statSync(result.outputFile!).size).toBe(300_000);
    expect(result.spill).toMatchObject({
      complete: true,
      keptBytes: 300_000,
      totalBytes: 300_000,
      relocated: { from: wanted, temporary: true, reason: expect.stringMatching(/ENOTDIR/) },
    });
    // spill: 'separate' (plumbing in the temp dir) and materializeOutput() after the end as well.
    const separate = m.spawn(BYTES(200_000), [], {
      shell: true,
      capture: { headBytes: 1024, tailBytes: 1024, outputDir: wanted },
    });
    const r2 = await separate.result;
    expect(r2.stdout.spill).toMatchObject({ complete: true, relocated: { from: wanted } });
    expect(statSync(r2.stdout.spillPath!).size).toBe(200_000);
  });

  it.runIf(canMount)(
    'a host running as nobody with HOME=/nonexistent keeps running and gets its output',
    async () => {
      // A real host process as the user many containers run as: no writable HOME. The checkout may
      // sit in a directory only its owner can enter (a 0700 home): nobody reaches it through a bind
      // mount of the repository at a path every user can walk (pnpm's links are relative).
      const view = checkoutViewForAnyUser();
      const dist = join(view, 'packages', 'process', 'dist', 'index.js');
      const script = join(root, 'host.mjs');
      writeFileSync(
        script,
        `import { ProcessManager } from ${JSON.stringify(dist)};
const m = new ProcessManager();
const p = m.spawn(${JSON.stringify(BYTES(300_000))}, [], { shell: true, capture: { headBytes: 1024, tailBytes: 1024, spill: 'combined', outputDir: true } });
const r = await p.result;
console.log(JSON.stringify({ outputFile: r.outputFile, spill: r.spill, exitCode: r.exitCode }));
await m.dispose();
`,
      );
      execFileSync('chmod', ['755', root]);
      execFileSync('chmod', ['644', script]);
      const out = execFileSync(
        'setpriv',
        ['--reuid=nobody', '--regid=nogroup', '--clear-groups', process.execPath, script],
        { env: { PATH: process.env.PATH, HOME: '/nonexistent' }, encoding: 'utf8', cwd: '/' },
      );
      const reported = JSON.parse(out) as { outputFile?: string; spill?: { relocated?: { from: string } } };
      expect(reported).toMatchObject({ exitCode: 0 });
      expect(reported.spill?.relocated?.from).toMatch(
        /^\/nonexistent\/\.cache\/conch\/output\/ws-[0-9a-f]{16}$/,
      );
      // The fallback was the manager's own temp dir, removed by dispose(): gone, as the report said.
      expect(reported.outputFile).toMatch(/conch-proc-/);
    },
  );
});

describe.runIf(canMount)('a full or read-only disk', () => {
  it('full: the file holds a prefix, and the report says exactly how much of how much', async () => {
    const small = mountTmpfs('2m');
    const m = manager({ outputDir: small });
    const result = await m.spawn(BYTES(5_000_000), [], { shell: true, capture: forModel() }).result;
    expect(result.exitCode).toBe(0);
    expect(dirname(result.outputFile!)).toBe(small);
    const size = statSync(result.outputFile!).size;
    expect(size).toBeLessThan(5_000_000);
    expect(result.spill).toMatchObject({
      complete: false,
      problem: 'disk-full',
      keptBytes: size,
      totalBytes: 5_000_000,
      reason: expect.stringMatching(/ENOSPC/),
    });
    // The capture still has the true size and the end.
    expect(result.stdout.totalBytes).toBe(5_000_000);
    expect(result.stdout.tail.endsWith('a')).toBe(true);
  });

  it.each([
    ['after it ended', 10_000],
    ['after it ended', 300_000],
    ['while it runs', 10_000],
    ['while it runs', 300_000],
  ] as const)(
    'full before the first byte, output written out on request %s (%d bytes): the report says disk-full, every time',
    async (when, size) => {
      const small = mountTmpfs('1m');
      expect(fillToTheLastByte(small)).toBe(0);
      const m = manager({ outputDir: small });
      // Within the capture, so in memory until asked for: the cli asks for output cut by
      // characters after the command, a background task's reader while it runs. The write's
      // callback used to resolve before the stream's error event, so a report made at once named a
      // file that kept nothing (every time while it runs, 1 run in 5 after it ended).
      for (let i = 0; i < 3; i++) {
        const running = when === 'while it runs';
        const proc = m.spawn(`${BYTES(size)}${running ? '; exec sleep 600' : ''}`, [], {
          shell: true,
          capture: { headBytes: 512 * 1024, tailBytes: 512 * 1024, spill: 'combined', outputDir: small },
        });
        if (running) {
          let seen = 0;
          await new Promise<void>((resolve) => {
            const off = proc.onOutput((event) => {
              seen += event.chunk.length;
              if (seen >= size) {
                off();
                resolve();
              }
            });
          });
        } else {
          expect((await proc.result).outputFile).toBeUndefined();
        }
        const file = await proc.materializeOutput();
        const report = proc.spillReport();
        expect(report, `run ${i}: ${JSON.stringify(report)}`).toMatchObject({
          complete: false,
          problem: 'disk-full',
          keptBytes: 0,
          totalBytes: size,
        });
        if (running) await proc.kill();
        if (file) rmSync(file, { force: true });
      }
    },
  );

  it('read-only: the file is made in the temp dir instead, complete, and the report names the directory', async () => {
    const ro = mountTmpfs('2m', { readOnly: true });
    const m = manager({ outputDir: ro });
    const result = await m.spawn(BYTES(300_000), [], { shell: true, capture: forModel() }).result;
    expect(dirname(result.outputFile!)).toBe(temp);
    expect(readFileSync(result.outputFile!, 'latin1')).toBe('a'.repeat(300_000));
    expect(result.spill).toMatchObject({
      complete: true,
      relocated: { from: ro, reason: expect.stringMatching(/EROFS|read-only/i) },
    });
  });

  it('nowhere writable: no file, no throw, and the report lists every directory tried', async () => {
    const ro = mountTmpfs('1m', { readOnly: true });
    process.env.TMPDIR = ro; // the last resort: the system's temp dir
    const m = manager({ outputDir: join(ro, 'out'), tempDir: () => join(ro, 'temp') });
    const proc = m.spawn(BYTES(300_000), [], { shell: true, capture: forModel() });
    const result = await proc.result;
    expect(result.exitCode).toBe(0);
    expect(result.outputFile).toBeUndefined();
    expect(result.spill).toMatchObject({
      complete: false,
      problem: 'not-saved',
      keptBytes: 0,
      totalBytes: 300_000,
    });
    expect(result.spill!.tried).toHaveLength(3);
    expect(await proc.materializeOutput()).toBeUndefined();
    expect(result.stdout.head).toBe('a'.repeat(1024));
  });
});

describe('spill limits', () => {
  it('per process: the file stops at the limit, the command runs on, the report says so', async () => {
    const m = manager({ outputDir: join(root, 'out') });
    const result = await m.spawn(BYTES(3_000_000), [], {
      shell: true,
      capture: forModel({ maxFileBytes: 1_048_576 }),
    }).result;
    expect(result.exitCode).toBe(0);
    expect(statSync(result.outputFile!).size).toBe(1_048_576);
    expect(result.spill).toMatchObject({
      complete: false,
      problem: 'limit',
      keptBytes: 1_048_576,
      totalBytes: 3_000_000,
      limit: { scope: 'call', bytes: 1_048_576 },
    });
    expect(result.spill!.stopped).toBeUndefined();
  });

  it("onFileLimit 'stop' kills a runaway at the limit", async () => {
    const m = manager({ outputDir: join(root, 'out') });
    const result = await m.spawn('cat /dev/zero', [], {
      shell: true,
      capture: forModel({ maxFileBytes: 1_048_576, onFileLimit: 'stop' }),
    }).result;
    expect(result.killed).toBe(true);
    expect(statSync(result.outputFile!).size).toBe(1_048_576);
    expect(result.spill).toMatchObject({ problem: 'limit', stopped: true, keptBytes: 1_048_576 });
  });

  it('per manager: the total is shared by every process, and setSpillLimits changes it', async () => {
    const m = manager({ outputDir: join(root, 'out'), spillLimits: { total: 1_500_000 } });
    const first = await m.spawn(BYTES(1_000_000), [], { shell: true, capture: forModel() }).result;
    expect(first.spill).toBeUndefined();
    const second = await m.spawn(BYTES(1_000_000), [], { shell: true, capture: forModel() }).result;
    expect(second.spill).toMatchObject({
      problem: 'limit',
      keptBytes: 500_000,
      limit: { scope: 'registry', bytes: 1_500_000 },
    });
    m.setSpillLimits({ total: 10_000_000 });
    const third = await m.spawn(BYTES(1_000_000), [], { shell: true, capture: forModel() }).result;
    expect(third.spill).toBeUndefined();
    expect(m.spillLimits()).toMatchObject({ total: 10_000_000, used: 2_500_000 });
  });
});
