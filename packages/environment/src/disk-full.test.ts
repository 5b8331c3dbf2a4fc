// Invariant: on a full disk no tool claims output it does not hold. A background task's result and
// read_background_output say which bytes were never saved (and the reader is not sent round in a
// loop at the same offset); a terminal command whose output overflows says the file holds only part
// (or none) of it, with OUTPUT_TRUNCATED_DISK_FULL — through the real tools, on a real small tmpfs.
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { terminalPlugin } from '@conch/terminal';
import { canMount, mountTmpfs, unmountAll } from '@conch/test-support';
import { mkdtempSync, realpathSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

type Result = ToolResult & Record<string, any>;
let dir: string;
let registry: PluginRegistry | undefined;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-disk-full-')));
});
afterEach(async () => {
  await registry?.dispose();
  registry = undefined;
  unmountAll();
  rmSync(dir, { recursive: true, force: true });
});

/** A registry whose cli and terminal outputs go to a small tmpfs, filled to `leaveBytes` free. */
async function setUp(leaveBytes: number): Promise<{ call: (tool: string, args: object) => Promise<Result> }> {
  const disk = mountTmpfs('1m', { at: mkdtempSync(join(dir, 'disk-')) });
  registry = new PluginRegistry({
    cwd: dir,
    tempRoot: dir,
    logger: pino({ level: 'silent' }),
    plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin],
  });
  await registry.exposeTool('permission', {});
  await registry.exposeTool('background', {});
  await registry.exposeTool('cli', { outputDir: disk });
  await registry.exposeTool('terminal', { shell: '/bin/bash', outputDir: disk });
  const r = registry;
  const call = (tool: string, args: object) =>
    r.execute(tool, args as Record<string, unknown>) as Promise<Result>;
  // warm both tools (their first calls make directories) before the disk fills
  await call('cli_based_tool', { command: 'echo warm' });
  await call('terminal', { command: 'echo warm', timeout: 60 });
  const free = Number(statfsFree(disk));
  if (free > leaveBytes) {
    try {
      writeFileSync(join(disk, 'filler'), Buffer.alloc(free - leaveBytes));
    } catch {
      // full already
    }
  }
  return { call };
}

function statfsFree(path: string): bigint {
  const st = statfsSync(path, { bigint: true });
  return st.bavail * st.bsize;
}

// They mount a small tmpfs, which needs root: CI runs as root; as another user they skip.
describe.runIf(canMount)('a full disk through the real tools', () => {
  it.each([
    ['nothing left', 0],
    ['64 KiB left', 64 * 1024],
  ])('a background task (%s): its result and its pages name what was never saved', async (_n, left) => {
    const { call } = await setUp(left);
    const started = await call('cli_based_tool', { command: 'seq 1 300000', background: true });
    const done = await call('check_background_task', {
      task_id: started.background_task_id,
      wait_seconds: 120,
    });
    expect(done.status).toBe('completed');
    const { kept_bytes, total_bytes } = done.result.output_file_incomplete;
    if (kept_bytes === 0) {
      // Nothing reached the file: none is named, and the error says the disk is full.
      expect(done.result.error_code).toBe('OUTPUT_NOT_SAVED');
      expect(done.result.output_file).toBeUndefined();
      expect(done.result.error).toMatch(/the disk is full/);
    } else expect(done.result.error_code).toBe('OUTPUT_TRUNCATED_DISK_FULL');
    expect(total_bytes).toBe(1_988_895);
    expect(kept_bytes).toBeLessThan(total_bytes);
    // page through: every page either has bytes or says they are gone; never the same offset twice
    let offset = 0;
    const seen = new Set<number>();
    let text = '';
    for (let page = 0; page < 100; page++) {
      const res = await call('read_background_output', {
        task_id: started.background_task_id,
        offset,
        limit: 200_000,
      });
      expect(seen.has(res.offset), `offset ${res.offset} read twice`).toBe(false);
      seen.add(res.offset);
      text += res.output;
      if (!res.has_more) {
        if (res.next_offset < total_bytes) {
          expect(res.error_code).toBe(kept_bytes === 0 ? 'OUTPUT_NOT_SAVED' : 'OUTPUT_TRUNCATED_DISK_FULL');
          expect(res.error).toContain(`Bytes ${res.offset}–${total_bytes}`);
          expect(res.error).toContain('(the disk filled up)');
          if (kept_bytes === 0) expect(res.output_file).toBeUndefined();
        }
        break;
      }
      offset = res.next_offset;
    }
    // what was read is the start of the real output, byte for byte
    expect('1\n2\n3\n'.startsWith(text.slice(0, 6)) || text === '').toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(kept_bytes + 200_000);
  });

  it.each([
    ['nothing left', 0],
    ['64 KiB left', 64 * 1024],
  ])('a terminal command that overflows (%s): the result says how much the file holds', async (_n, left) => {
    const { call } = await setUp(left);
    const res = await call('terminal', { command: 'seq 1 300000', timeout: 120 });
    expect(res.exit_code).toBe(0);
    expect(res.error_code).toBe('OUTPUT_TRUNCATED_DISK_FULL');
    expect(res.output_file_incomplete).toMatchObject({ reason: expect.stringMatching(/ENOSPC/) });
    const { kept_bytes, total_bytes } = res.output_file_incomplete;
    expect(kept_bytes).toBeLessThan(total_bytes);
    if (res.output_file) expect(statSync(res.output_file).size).toBe(kept_bytes);
    else expect(kept_bytes).toBe(0);
    expect(res.output).not.toMatch(/full output: \//);
    expect(res.display).toMatch(/OUTPUT_TRUNCATED_DISK_FULL/);
    // the end is still shown
    expect(res.output).toContain('300000');
  });
});
