// Invariant: a write or an edit replaces the directory entry of the real path the policy judged, in one rename — a hard link's other names keep their content, a symlink never leads a write outside the allowed roots (not even one swapped in after the check), the replaced file keeps its mode, and no temp file stays behind.
import {
  chmodSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileOperationError } from './errors/file-operation-error.js';
import { FileOperator } from './file-operator.js';
import type { FileSystemBackend } from './file-system-backend.js';
import { localFileSystem } from './local-file-system.js';

let base: string;
let dir: string;
let outside: string;
let files: FileOperator;

beforeEach(() => {
  // The workspace and the "outside" directory share a file system, so hard links between them work.
  base = realpathSync(mkdtempSync(join(tmpdir(), 'conch-atomic-')));
  dir = join(base, 'work');
  outside = join(base, 'outside');
  mkdirSync(dir);
  mkdirSync(outside);
  files = new FileOperator({ root: dir });
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

async function refusal(promise: Promise<unknown>): Promise<FileOperationError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FileOperationError);
  return error as FileOperationError;
}

/** The names in a directory (a temp file left behind would show here). */
const names = (path: string) => readdirSync(path).sort();

describe('hard links', () => {
  it('a write to a hard link of a file outside the workspace replaces the workspace entry only', async () => {
    writeFileSync(join(outside, 'shared.txt'), 'original\n');
    linkSync(join(outside, 'shared.txt'), join(dir, 'linked.txt'));
    expect(statSync(join(outside, 'shared.txt')).nlink).toBe(2);

    expect(await files.write('linked.txt', 'replaced\n')).toMatchObject({ created: false, bytesWritten: 9 });
    expect(readFileSync(join(dir, 'linked.txt'), 'utf8')).toBe('replaced\n');
    expect(readFileSync(join(outside, 'shared.txt'), 'utf8')).toBe('original\n');
    expect(statSync(join(outside, 'shared.txt')).nlink).toBe(1);
    expect(statSync(join(dir, 'linked.txt')).ino).not.toBe(statSync(join(outside, 'shared.txt')).ino);
    expect(names(dir)).toEqual(['linked.txt']);
  });

  it('an edit of a hard link leaves the other name untouched too', async () => {
    writeFileSync(join(outside, 'shared.txt'), 'value = 1\n');
    linkSync(join(outside, 'shared.txt'), join(dir, 'linked.txt'));
    expect(await files.edit('linked.txt', { oldString: '1', newString: '2' })).toMatchObject({
      replacements: 1,
    });
    expect(readFileSync(join(dir, 'linked.txt'), 'utf8')).toBe('value = 2\n');
    expect(readFileSync(join(outside, 'shared.txt'), 'utf8')).toBe('value = 1\n');
  });
});

describe('symlinks', () => {
  it('a write or an edit through a symlink to a file outside the allowed roots is refused, and nothing changes', async () => {
    writeFileSync(join(outside, 'target.txt'), 'secret\n');
    symlinkSync(join(outside, 'target.txt'), join(dir, 'link.txt'));
    symlinkSync(outside, join(dir, 'out'));
    for (const attempt of [
      () => files.write('link.txt', 'x'),
      () => files.edit('link.txt', { oldString: 'secret', newString: 'x' }),
      () => files.write('out/target.txt', 'x'),
      () => files.write('out/new.txt', 'x'),
    ]) {
      expect((await refusal(attempt())).code).toBe('OUTSIDE_WORKING_DIR');
    }
    expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('secret\n');
    expect(names(outside)).toEqual(['target.txt']);
    expect(readlinkSync(join(dir, 'link.txt'))).toBe(join(outside, 'target.txt'));
  });

  it('a dangling symlink to outside is replaced by the file, never followed', async () => {
    symlinkSync(join(outside, 'planted.txt'), join(dir, 'dangling.txt'));
    expect(await files.write('dangling.txt', 'mine\n')).toMatchObject({ created: true });
    expect(names(outside)).toEqual([]);
    expect(lstatSync(join(dir, 'dangling.txt')).isFile()).toBe(true);
    expect(readFileSync(join(dir, 'dangling.txt'), 'utf8')).toBe('mine\n');
    // A dangling symlink standing for a directory: nothing is created where it points.
    symlinkSync(join(outside, 'planted-dir'), join(dir, 'dangling-dir'));
    await refusal(files.write('dangling-dir/x.txt', 'x'));
    expect(names(outside)).toEqual([]);
  });

  it('a symlink inside the workspace leads to its real file, which is replaced; the symlink stays', async () => {
    mkdirSync(join(dir, 'src'));
    writeFileSync(join(dir, 'src', 'real.txt'), 'old\n');
    symlinkSync(join(dir, 'src', 'real.txt'), join(dir, 'alias.txt'));
    expect(await files.write('alias.txt', 'new\n')).toMatchObject({
      path: join(dir, 'alias.txt'),
      created: false,
    });
    expect(lstatSync(join(dir, 'alias.txt')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, 'src', 'real.txt'), 'utf8')).toBe('new\n');
    await files.edit('alias.txt', { oldString: 'new', newString: 'newer' });
    expect(lstatSync(join(dir, 'alias.txt')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, 'src', 'real.txt'), 'utf8')).toBe('newer\n');
    expect(names(join(dir, 'src'))).toEqual(['real.txt']);
  });

  it('a symlink swapped in after the check is replaced by the rename, not written through', async () => {
    writeFileSync(join(outside, 'victim.txt'), 'untouched\n');
    writeFileSync(join(dir, 'a.txt'), 'before\n');
    // The race, made certain: between the policy check and the write, a.txt becomes a symlink
    // to a file outside the workspace.
    const racing: FileSystemBackend = {
      ...localFileSystem,
      async writeFileAtomic(path, data, options) {
        unlinkSync(path);
        symlinkSync(join(outside, 'victim.txt'), path);
        return localFileSystem.writeFileAtomic(path, data, options);
      },
    };
    const raced = new FileOperator({ root: dir, backend: racing });
    await raced.write('a.txt', 'after\n');
    expect(readFileSync(join(outside, 'victim.txt'), 'utf8')).toBe('untouched\n');
    expect(lstatSync(join(dir, 'a.txt')).isFile()).toBe(true);
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('after\n');
  });
});

describe('modes', () => {
  it('a replaced file keeps its mode, exactly (no umask), through write and edit', async () => {
    for (const mode of [0o600, 0o640, 0o755, 0o777]) {
      const name = `m${mode.toString(8)}.sh`;
      writeFileSync(join(dir, name), 'echo 1\n');
      chmodSync(join(dir, name), mode);
      await files.write(name, 'echo 2\n');
      expect(statSync(join(dir, name)).mode & 0o7777).toBe(mode);
      await files.edit(name, { oldString: '2', newString: '3' });
      expect(statSync(join(dir, name)).mode & 0o7777).toBe(mode);
      expect(readFileSync(join(dir, name), 'utf8')).toBe('echo 3\n');
    }
  });

  it('a new file gets the default mode (0o666 less the umask), as a plain write would', async () => {
    await files.write('fresh.txt', 'x');
    writeFileSync(join(dir, 'plain.txt'), 'x');
    expect(statSync(join(dir, 'fresh.txt')).mode & 0o7777).toBe(
      statSync(join(dir, 'plain.txt')).mode & 0o7777,
    );
  });
});

describe('localFileSystem.writeFileAtomic', () => {
  it('createOnly fails with EEXIST when anything is there (a file, a dangling symlink), leaving it and no temp file', async () => {
    writeFileSync(join(dir, 'there.txt'), 'first\n');
    symlinkSync(join(outside, 'nowhere'), join(dir, 'dangling'));
    for (const name of ['there.txt', 'dangling']) {
      await expect(
        localFileSystem.writeFileAtomic(join(dir, name), Buffer.from('second\n'), { createOnly: true }),
      ).rejects.toMatchObject({ code: 'EEXIST' });
    }
    expect(readFileSync(join(dir, 'there.txt'), 'utf8')).toBe('first\n');
    expect(names(dir)).toEqual(['dangling', 'there.txt']);
    expect(names(outside)).toEqual([]);
    await localFileSystem.writeFileAtomic(join(dir, 'new.txt'), Buffer.from('new\n'), { createOnly: true });
    expect(readFileSync(join(dir, 'new.txt'), 'utf8')).toBe('new\n');
    expect(names(dir)).toEqual(['dangling', 'new.txt', 'there.txt']);
  });

  it('a failed write leaves the old file and no temp file (a directory in the way)', async () => {
    mkdirSync(join(dir, 'taken'));
    await expect(localFileSystem.writeFileAtomic(join(dir, 'taken'), Buffer.from('x'))).rejects.toMatchObject(
      {
        code: expect.stringMatching(/^(EISDIR|ENOTEMPTY|EEXIST)$/),
      },
    );
    expect(names(dir)).toEqual(['taken']);
  });
});
