// Invariant: the file operator touches the file system only through its FileSystemBackend (it works whole on one that exists only in memory), and a backend's errno errors come back as FileOperationErrors with a stable code and a message naming the path, leaving the file as it was.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileOperationError, isFileOperationError } from './errors/file-operation-error.js';
import { FileOperator } from './file-operator.js';
import { errnoError, type FileSystemBackend } from './file-system-backend.js';
import { localFileSystem } from './local-file-system.js';
import { MemoryFileSystem } from './test-support/memory-file-system.js';

async function refusal(promise: Promise<unknown>): Promise<FileOperationError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isFileOperationError(error)).toBe(true);
  return error as FileOperationError;
}

describe('every access through the backend', () => {
  it('reads, writes, edits, lists, stats and globs files that exist only in the backend', async () => {
    const memory = new MemoryFileSystem();
    // Not on disk: node:fs used around the backend would find nothing here.
    const root = '/conch-memory-only/work';
    memory.put(`${root}/src/a.ts`, 'line 1\nline 2\n');
    memory.put(`${root}/src/deep/b.ts`, 'x = 1;\n', 0o600);
    memory.put(`${root}/node_modules/x/c.ts`, '');
    const files = new FileOperator({ root, backend: memory });

    expect(await files.read('src/a.ts', { offset: 2 })).toMatchObject({ content: 'line 2\n', totalLines: 2 });
    expect(await files.write('src/new/c.ts', 'new\n')).toMatchObject({ created: true, bytesWritten: 4 });
    expect(await files.edit('src/deep/b.ts', { oldString: '1', newString: '2' })).toMatchObject({
      replacements: 1,
    });
    expect(memory.nodes.get(`${root}/src/deep/b.ts`)).toMatchObject({ mode: 0o100600 });
    expect((await files.read('src/deep/b.ts')).content).toBe('x = 2;\n');
    expect((await files.list('src')).entries).toEqual([
      { name: 'a.ts', type: 'file', size: 14 },
      { name: 'deep', type: 'directory' },
      { name: 'new', type: 'directory' },
    ]);
    expect(await files.stat('src/a.ts')).toMatchObject({
      type: 'file',
      sizeBytes: 14,
      mode: '644',
      binary: false,
    });
    expect((await files.glob('**/*.ts')).matches).toEqual(['src/a.ts', 'src/deep/b.ts', 'src/new/c.ts']);
    expect((await refusal(files.read('../outside.txt'))).code).toBe('OUTSIDE_WORKING_DIR');
    expect((await refusal(files.read('src/missing.ts'))).code).toBe('FILE_NOT_FOUND');

    const kinds = new Set(memory.calls.map((c) => c.split(' ')[0]));
    expect([...kinds].sort()).toEqual([
      'lstat',
      'mkdirp',
      'open',
      'readdir',
      'realpath',
      'stat',
      'writeFileAtomic',
    ]);
    // The write went to the backend's one write primitive, on the real path.
    expect(memory.calls).toContain(`writeFileAtomic ${root}/src/new/c.ts`);
  });
});

describe('backend errors', () => {
  let dir: string;
  beforeEach(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-backend-')));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** The local file system, except that writes fail with `code` (a read-only mount, a full disk). */
  const failingWrites = (code: string): FileSystemBackend => ({
    ...localFileSystem,
    writeFileAtomic: (path) => Promise.reject(errnoError(code, 'open', path)),
  });

  it('EROFS on writeFileAtomic is FILE_PERMISSION_DENIED naming the path, for write and edit; the file is unchanged', async () => {
    writeFileSync(join(dir, 'a.txt'), 'before\n');
    const files = new FileOperator({ root: dir, backend: failingWrites('EROFS') });
    const write = await refusal(files.write('a.txt', 'after\n'));
    expect(write).toBeInstanceOf(FileOperationError);
    expect(write).toMatchObject({ code: 'FILE_PERMISSION_DENIED', operation: 'write', path: 'a.txt' });
    expect(write.message).toBe(
      `Permission denied: write ${join(dir, 'a.txt')} (EROFS): the file system is read-only there (a read-only mount or the sandbox's wall). Nothing was changed; write inside the working directory.`,
    );
    expect(write.display).toBe('write refused: a.txt is on a read-only file system');
    expect((write.cause as NodeJS.ErrnoException).code).toBe('EROFS');

    const edit = await refusal(files.edit('a.txt', { oldString: 'before', newString: 'after' }));
    expect(edit).toMatchObject({ code: 'FILE_PERMISSION_DENIED', operation: 'edit' });
    expect(edit.message).toContain(`edit ${join(dir, 'a.txt')} (EROFS)`);
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('before\n');

    const created = await refusal(files.write('new/b.txt', 'x'));
    expect(created.message).toContain(join(dir, 'new', 'b.txt'));
  });

  it('other errno codes keep their stable codes, the message naming the path', async () => {
    writeFileSync(join(dir, 'a.txt'), 'x');
    for (const [errno, code] of [
      ['EACCES', 'FILE_PERMISSION_DENIED'],
      ['ENOENT', 'FILE_NOT_FOUND'],
      ['ENOSPC', 'FILE_ERROR'],
    ] as const) {
      const files = new FileOperator({ root: dir, backend: failingWrites(errno) });
      const error = await refusal(files.write('a.txt', 'y'));
      expect(error.code).toBe(code);
      expect(error.message).toContain(join(dir, 'a.txt'));
    }
  });
});

describe('what is not a regular file', () => {
  it('read of a FIFO, or of a symlink to one, fails NOT_A_FILE at once (never waits for a writer)', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-fifo-')));
    try {
      execFileSync('mkfifo', [join(dir, 'pipe')]);
      symlinkSync(join(dir, 'pipe'), join(dir, 'to-pipe'));
      writeFileSync(join(dir, 'ok.txt'), 'fine\n');
      const files = new FileOperator({ root: dir, backend: localFileSystem });
      for (const name of ['pipe', 'to-pipe']) {
        const error = await refusal(files.read(name));
        expect(error.code, name).toBe('NOT_A_FILE');
        expect(error.message, name).toMatch(/is not a regular file/);
      }
      // A regular file beside them reads as before.
      expect((await files.read('ok.txt')).content).toBe('fine\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
