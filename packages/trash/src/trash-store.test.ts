// Invariant: what goes into the trash comes back byte-identical to where it was, a restore never overwrites, and empty deletes only what it is asked to.
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TrashError } from './errors/trash-error.js';
import { defaultTrashDir } from './trash-dir.js';
import { TrashStore } from './trash-store.js';

let root: string;
let store: TrashStore;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'conch-trash-store-'));
  store = new TrashStore({ dir: join(root, 'trash') });
});
afterEach(() => {
  // Write-protected directories a test left: opened first (an ordinary user cannot remove them).
  const open = (dir: string): void => {
    if (!lstatSync(dir).isDirectory()) return;
    chmodSync(dir, 0o700);
    for (const name of readdirSync(dir)) open(join(dir, name));
  };
  open(root);
  rmSync(root, { recursive: true, force: true });
});

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (error) {
    expect(TrashError.is(error)).toBe(true);
    return (error as TrashError).code;
  }
  throw new Error('expected a TrashError');
}

describe('TrashStore', () => {
  it('puts files, directories and symlinks away and restores them byte-identical', async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 10, 13]);
    writeFileSync(join(root, 'bin.dat'), bytes);
    mkdirSync(join(root, 'dir', 'sub'), { recursive: true });
    writeFileSync(join(root, 'dir', 'sub', 'a b.txt'), 'nested\n');
    chmodSync(join(root, 'dir', 'sub', 'a b.txt'), 0o640);
    symlinkSync('bin.dat', join(root, 'link'));
    const file = await store.put(join(root, 'bin.dat'));
    const dir = await store.put(join(root, 'dir'));
    const link = await store.put(join(root, 'link'));
    expect([file.kind, dir.kind, link.kind]).toEqual(['file', 'directory', 'symlink']);
    expect(existsSync(join(root, 'bin.dat')) || existsSync(join(root, 'dir'))).toBe(false);
    const listed = await store.list();
    expect(listed.map((e) => e.originalPath).sort()).toEqual(
      [join(root, 'bin.dat'), join(root, 'dir'), join(root, 'link')].sort(),
    );
    expect(listed.find((e) => e.id === file.id)).toMatchObject({ kind: 'file', sizeBytes: 6 });
    for (const e of [file, dir, link]) await store.restore(e.id);
    expect(readFileSync(join(root, 'bin.dat'))).toEqual(bytes);
    expect(readFileSync(join(root, 'dir', 'sub', 'a b.txt'), 'utf8')).toBe('nested\n');
    expect(lstatSync(join(root, 'dir', 'sub', 'a b.txt')).mode & 0o777).toBe(0o640);
    expect(readlinkSync(join(root, 'link'))).toBe('bin.dat');
    expect(await store.list()).toEqual([]);
  });

  it('a record a sandboxed command replaced with a FIFO is skipped: listing returns, the others listed', async () => {
    // The trash is writable inside the sandbox. Read with readFile, a FIFO record held one of
    // libuv's threads in open() forever and the listing never settled.
    writeFileSync(join(root, 'a.txt'), 'a\n');
    writeFileSync(join(root, 'b.txt'), 'b\n');
    const a = await store.put(join(root, 'a.txt'));
    const b = await store.put(join(root, 'b.txt'));
    const record = join(root, 'trash', `${a.id}.path`);
    rmSync(record);
    execFileSync('mkfifo', [record]);
    expect((await store.list()).map((e) => e.id)).toEqual([b.id]);
    await store.restore(b.id);
    expect(readFileSync(join(root, 'b.txt'), 'utf8')).toBe('b\n');
  });

  it('refuses to restore onto an existing path and overwrites nothing', async () => {
    writeFileSync(join(root, 'a.txt'), 'old\n');
    const entry = await store.put(join(root, 'a.txt'));
    writeFileSync(join(root, 'a.txt'), 'new\n');
    expect(await code(store.restore(entry.id))).toBe('TRASH_RESTORE_CONFLICT');
    await expect(store.restore(entry.id)).rejects.toThrow(
      /a file exists there now, and restore never overwrites/,
    );
    expect(readFileSync(join(root, 'a.txt'), 'utf8')).toBe('new\n');
    expect((await store.list()).map((e) => e.id)).toEqual([entry.id]);
    // Elsewhere works, creating parents.
    const back = await store.restore(entry.id, { to: join(root, 'restored', 'deep', 'a.txt') });
    expect(back.originalPath).toBe(join(root, 'restored', 'deep', 'a.txt'));
    expect(readFileSync(join(root, 'restored', 'deep', 'a.txt'), 'utf8')).toBe('old\n');
  });

  it('recreates missing parent directories on restore', async () => {
    mkdirSync(join(root, 'gone', 'deeper'), { recursive: true });
    writeFileSync(join(root, 'gone', 'deeper', 'f'), 'f\n');
    const entry = await store.put(join(root, 'gone', 'deeper', 'f'));
    rmSync(join(root, 'gone'), { recursive: true });
    await store.restore(entry.id);
    expect(readFileSync(join(root, 'gone', 'deeper', 'f'), 'utf8')).toBe('f\n');
  });

  it('says which ids exist when asked for an unknown one, and rejects ids that are paths', async () => {
    writeFileSync(join(root, 'x'), 'x');
    const entry = await store.put(join(root, 'x'));
    expect(await code(store.restore('123-4-5'))).toBe('UNKNOWN_TRASH_ENTRY');
    await expect(store.restore('123-4-5')).rejects.toThrow(entry.id);
    expect(await code(store.restore('../../etc/passwd'))).toBe('UNKNOWN_TRASH_ENTRY');
  });

  it('empties everything, or only entries older than a number of days', async () => {
    for (const name of ['old', 'new']) writeFileSync(join(root, name), name);
    const old = await store.put(join(root, 'old'));
    const fresh = await store.put(join(root, 'new'));
    const tenDaysAgo = new Date(Date.now() - 10 * 24 * 3600 * 1000);
    utimesSync(join(store.dir, `${old.id}.path`), tenDaysAgo, tenDaysAgo);
    expect(await store.empty({ olderThanDays: 7 })).toEqual({ removed: 1 });
    expect((await store.list()).map((e) => e.id)).toEqual([fresh.id]);
    expect(await store.empty()).toEqual({ removed: 1 });
    expect(await store.list()).toEqual([]);
  });

  // root ignores modes: only another user can see rm refuse a write-protected directory.
  it.skipIf(process.getuid?.() === 0)('empties write-protected directories too', async () => {
    mkdirSync(join(root, 'locked', 'inner'), { recursive: true });
    writeFileSync(join(root, 'locked', 'inner', 'f'), 'f');
    chmodSync(join(root, 'locked', 'inner'), 0o500);
    chmodSync(join(root, 'locked'), 0o500);
    await store.put(join(root, 'locked'));
    expect(await store.empty()).toEqual({ removed: 1 });
    expect(await store.list()).toEqual([]);
  });

  // Moving a directory rewrites its `..`: without write permission on it (a read-only checkout, a
  // 0555 module cache) the rename fails for its owner, though rm could not have removed it either.
  it.skipIf(process.getuid?.() === 0)(
    'moves write-protected directories in and back out with their modes (0500, 0555, a 0444 file in 0555)',
    async () => {
      const cases: [string, number, string | undefined][] = [
        ['locked', 0o500, undefined],
        ['cache', 0o555, 'mod.go'],
        ['top', 0o555, undefined],
      ];
      for (const [name, mode, file] of cases) {
        mkdirSync(join(root, name, 'inner'), { recursive: true });
        if (file) {
          writeFileSync(join(root, name, 'inner', file), 'module x\n');
          chmodSync(join(root, name, 'inner', file), 0o444);
        }
        chmodSync(join(root, name, 'inner'), mode);
        chmodSync(join(root, name), mode);
        const entry = await store.put(join(root, name));
        expect(existsSync(join(root, name))).toBe(false);
        expect(lstatSync(join(store.dir, entry.id)).mode & 0o7777).toBe(mode);
        await store.restore(entry.id);
        expect(lstatSync(join(root, name)).mode & 0o7777).toBe(mode);
        expect(lstatSync(join(root, name, 'inner')).mode & 0o7777).toBe(mode);
        if (file) expect(readFileSync(join(root, name, 'inner', file), 'utf8')).toBe('module x\n');
        await store.put(join(root, name));
      }
      expect(await store.empty()).toEqual({ removed: cases.length });
      expect(await store.list()).toEqual([]);
    },
  );

  it.skipIf(process.getuid?.() === 0)(
    "a write-protected directory in a parent it may not write stays where it is, unchanged, with the move's error",
    async () => {
      mkdirSync(join(root, 'parent', 'locked'), { recursive: true });
      chmodSync(join(root, 'parent', 'locked'), 0o500);
      chmodSync(join(root, 'parent'), 0o500);
      expect(await code(store.put(join(root, 'parent', 'locked')))).toBe('TRASH_PUT_FAILED');
      expect(lstatSync(join(root, 'parent', 'locked')).mode & 0o7777).toBe(0o500);
      expect(await store.list()).toEqual([]);
    },
  );

  it('moves across file systems (copy, then delete) when rename cannot', async () => {
    const shm = '/dev/shm';
    if (!existsSync(shm)) return;
    const other = mkdtempSync(join(shm, 'conch-trash-xdev-'));
    try {
      mkdirSync(join(other, 'd'));
      writeFileSync(join(other, 'd', 'f'), 'across\n');
      const entry = await store.put(join(other, 'd'));
      expect(existsSync(join(other, 'd'))).toBe(false);
      await store.restore(entry.id);
      expect(readFileSync(join(other, 'd', 'f'), 'utf8')).toBe('across\n');
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('never puts the trash into itself', async () => {
    expect(await code(store.put(root))).toBe('TRASH_PUT_FAILED');
    expect(await code(store.put(join(root, 'missing')))).toBe('TRASH_PUT_FAILED');
  });

  it('keeps one trash per project, under the XDG data directory', () => {
    const a = defaultTrashDir('/work/a', { XDG_DATA_HOME: '/x/data' });
    const b = defaultTrashDir('/work/b', { XDG_DATA_HOME: '/x/data' });
    expect(a).toMatch(/^\/x\/data\/conch\/trash\/a-[0-9a-f]{12}$/);
    expect(b).not.toBe(a);
    expect(defaultTrashDir('/work/a', { HOME: '/home/u' })).toMatch(
      /^\/home\/u\/\.local\/share\/conch\/trash\/a-/,
    );
  });
});
