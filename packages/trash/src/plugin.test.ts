// Invariant: the trash tool lists what rm moved away, puts an entry back only where nothing exists, asks the gate before writing or deleting, and names the field of a bad call.
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  InvalidArgumentsError,
  PluginRegistry,
  TOKENS,
  TRASH_SERVICE,
  type PermissionGate,
  type PermissionRequest,
} from '@conch/core';
import { trashPlugin } from './plugin.js';

let root: string;
let registry: PluginRegistry;
let asked: PermissionRequest[];

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'conch-trash-tool-'));
  registry = new PluginRegistry({ cwd: root, tempRoot: root, logger: pino({ level: 'silent' }) });
  registry.register(trashPlugin);
  asked = [];
  const gate: PermissionGate = {
    check: async (request) => {
      asked.push(request);
      return { outcome: 'allow', reason: 'test' };
    },
  };
  registry.container.register(TOKENS.PermissionGate, { useValue: gate });
  await registry.expose('trash', { dir: 'trash' });
});
afterEach(async () => {
  await registry.dispose();
  rmSync(root, { recursive: true, force: true });
});

/** rm through the shell function the service hands out, as a terminal session runs it. */
function shellRm(args: string): void {
  const trash = registry.resolveOptional(TRASH_SERVICE)!;
  const fn = join(root, 'rm.bash');
  writeFileSync(fn, trash.shellFunction('bash'));
  execFileSync('bash', ['--norc', '-c', `. '${fn}'; rm ${args}`], { cwd: root });
}

describe('trash tool', () => {
  it('lists entries rm made and restores one; a list asks nothing, a restore asks the gate', async () => {
    writeFileSync(join(root, 'keep me.txt'), 'precious\n');
    shellRm('"keep me.txt"');
    expect(existsSync(join(root, 'keep me.txt'))).toBe(false);
    const listed = (await registry.execute('trash', { action: 'list' })) as {
      entries: { id: string; original_path: string; kind: string; deleted_at: string }[];
      total: number;
      display: string;
    };
    expect(listed.total).toBe(1);
    expect(listed.entries[0]).toMatchObject({ original_path: join(root, 'keep me.txt'), kind: 'file' });
    expect(Date.parse(listed.entries[0]!.deleted_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(listed.display).toBe('✓ trash: 1 entry');
    expect(asked).toEqual([]);
    const restored = await registry.execute('trash', { action: 'restore', id: listed.entries[0]!.id });
    expect(restored).toMatchObject({ restored: { original_path: join(root, 'keep me.txt') } });
    expect(readFileSync(join(root, 'keep me.txt'), 'utf8')).toBe('precious\n');
    expect(asked).toEqual([expect.objectContaining({ kind: 'action', tool: 'trash' })]);
  });

  it('returns TRASH_RESTORE_CONFLICT with a display when the path exists again', async () => {
    writeFileSync(join(root, 'a.txt'), 'first\n');
    shellRm('a.txt');
    writeFileSync(join(root, 'a.txt'), 'second\n');
    const [entry] = await registry.resolveOptional(TRASH_SERVICE)!.list();
    const r = await registry.execute('trash', { action: 'restore', id: entry!.id });
    expect(r).toMatchObject({
      error_code: 'TRASH_RESTORE_CONFLICT',
      error: expect.stringContaining(`cannot restore ${entry!.id} to ${join(root, 'a.txt')}`),
      display: expect.stringMatching(/^✗ TRASH_RESTORE_CONFLICT: /),
    });
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('second\n');
    const elsewhere = await registry.execute('trash', { action: 'restore', id: entry!.id, to: 'old/a.txt' });
    expect(elsewhere).toMatchObject({ restored: { original_path: join(root, 'old', 'a.txt') } });
    expect(readFileSync(join(root, 'old', 'a.txt'), 'utf8')).toBe('first\n');
  });

  it('filters a list by path and empties the trash', async () => {
    for (const n of ['one.ts', 'two.ts', 'three.md']) writeFileSync(join(root, n), n);
    shellRm('one.ts two.ts three.md');
    const ts = (await registry.execute('trash', { action: 'list', path: '.ts' })) as { total: number };
    expect(ts.total).toBe(2);
    const limited = (await registry.execute('trash', { action: 'list', limit: 1 })) as {
      entries: unknown[];
      message: string;
    };
    expect(limited.entries).toHaveLength(1);
    expect(limited.message).toMatch(/2 older entries not shown/);
    expect(await registry.execute('trash', { action: 'empty' })).toMatchObject({ removed: 3 });
    expect(asked.at(-1)).toMatchObject({
      kind: 'action',
      summary: expect.stringContaining('permanently delete'),
    });
    expect(await registry.execute('trash', { action: 'list' })).toMatchObject({
      total: 0,
      display: '✓ trash: empty',
    });
  });

  it('throws InvalidArgumentsError naming the field of a bad call', async () => {
    await expect(registry.execute('trash', { action: 'restore' })).rejects.toThrow(InvalidArgumentsError);
    await expect(registry.execute('trash', { action: 'restore' })).rejects.toThrow(
      /id.*action 'restore' needs id/s,
    );
    await expect(registry.execute('trash', { action: 'list', id: 'x' })).rejects.toThrow(
      /id applies to action 'restore' only; given with action 'list'/,
    );
    await expect(registry.execute('trash', { action: 'shred' })).rejects.toThrow(/action/);
  });

  it('returns UNKNOWN_TRASH_ENTRY for an id that is not there', async () => {
    expect(await registry.execute('trash', { action: 'restore', id: '1-2-3' })).toMatchObject({
      error_code: 'UNKNOWN_TRASH_ENTRY',
      error: expect.stringContaining('the trash is empty'),
    });
  });
});
