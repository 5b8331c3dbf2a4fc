// Invariant: the file operator reads in bounded pieces that report the true size and reassemble the file exactly, refuses binary files as text, refuses protected paths with the permission gate's own words and paths outside the working dir, and refuses edits that do not match exactly once — leaving the file untouched.
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry } from '@conch/core';
import { getPermissionEngine, permissionPlugin, protectedPathReason } from '@conch/permission';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileOperationError } from './errors/file-operation-error.js';
import { InvalidFileArgumentError } from './errors/invalid-file-argument-error.js';
import { FileOperator } from './file-operator.js';
import { looksBinary } from './looks-binary.js';
import { protectedReasonFor } from './files-plugin.js';

let dir: string;
let files: FileOperator;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-')));
  files = new FileOperator({
    root: dir,
    protectedReason: (abs) => protectedPathReason(abs, { workspaceRoot: dir }),
  });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function refusal(promise: Promise<unknown>): Promise<FileOperationError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FileOperationError);
  return error as FileOperationError;
}

describe('read', () => {
  it('reads by lines with the true size and total, and next offsets reassemble the file exactly', async () => {
    const lines = Array.from({ length: 250 }, (_, i) => `line ${i + 1} ${'é'.repeat(i % 7)}`);
    const text = `${lines.join('\n')}\n`;
    writeFileSync(join(dir, 'a.txt'), text);
    const first = await files.read('a.txt', { limit: 100 });
    expect(first).toMatchObject({
      sizeBytes: Buffer.byteLength(text),
      offset: 1,
      lines: 100,
      totalLines: 250,
      truncated: true,
      nextOffset: 101,
    });
    expect(first.content.split('\n')[0]).toBe('line 1 ');
    let joined = first.content;
    let next = first.nextOffset;
    while (next !== undefined) {
      const page = await files.read('a.txt', { offset: next, limit: 100 });
      joined += page.content;
      next = page.nextOffset;
    }
    expect(joined).toBe(text);
    const last = await files.read('a.txt', { offset: 201, limit: 100 });
    expect(last).toMatchObject({ lines: 50, truncated: false, totalLines: 250 });
    expect(last.nextOffset).toBeUndefined();
  });

  it('counts a last line without a newline, and an offset past the end returns nothing', async () => {
    writeFileSync(join(dir, 'b.txt'), 'one\ntwo\nthree');
    expect(await files.read('b.txt')).toMatchObject({
      content: 'one\ntwo\nthree',
      lines: 3,
      totalLines: 3,
      truncated: false,
    });
    expect(await files.read('b.txt', { offset: 3 })).toMatchObject({ content: 'three', lines: 1 });
    expect(await files.read('b.txt', { offset: 9 })).toMatchObject({
      content: '',
      lines: 0,
      truncated: false,
    });
    writeFileSync(join(dir, 'empty.txt'), '');
    expect(await files.read('empty.txt')).toMatchObject({
      content: '',
      lines: 0,
      totalLines: 0,
      sizeBytes: 0,
    });
  });

  it('stops at the byte budget on a line boundary, across 64 KiB chunks and multi-byte characters', async () => {
    const small = new FileOperator({ root: dir, protectedReason: () => undefined, maxReadBytes: 100_000 });
    // 3-byte characters so chunk boundaries fall inside characters.
    const line = `${'€'.repeat(333)}\n`; // 1000 bytes
    writeFileSync(join(dir, 'big.txt'), line.repeat(300));
    const page = await small.read('big.txt');
    expect(page).toMatchObject({
      lines: 100,
      sizeBytes: 300_000,
      totalLines: 300,
      truncated: true,
      nextOffset: 101,
    });
    expect(page.content).toBe(line.repeat(100));
    expect(page.content.includes('\uFFFD')).toBe(false);
  });

  it('cuts a single line longer than the budget and says so', async () => {
    const small = new FileOperator({ root: dir, protectedReason: () => undefined, maxReadBytes: 4096 });
    writeFileSync(join(dir, 'min.js'), `${'€'.repeat(5000)}\nsecond\n`);
    const page = await small.read('min.js');
    expect(page).toMatchObject({
      lineCut: true,
      truncated: true,
      lines: 1,
      nextOffset: 2,
      sizeBytes: 15_008,
    });
    expect(page.content).toBe('€'.repeat(1365)); // 4095 bytes: the cut character is dropped
    expect((await small.read('min.js', { offset: 2 })).content).toBe('second\n');
  });

  it('refuses binary files as text, with their size, and reads their bytes on request', async () => {
    const png = Buffer.from([
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52,
    ]);
    writeFileSync(join(dir, 'x.png'), png);
    const error = await refusal(files.read('x.png'));
    expect(error.code).toBe('BINARY_FILE');
    expect(error.message).toContain('(16 bytes: NUL bytes or invalid UTF-8 at its start)');
    expect((await files.readBytes('x.png', { offset: 1, length: 3 })).data.toString('latin1')).toBe('PNG');
    // Latin-1 text is not UTF-8: mostly invalid bytes read as binary; a few do not.
    expect(looksBinary(Buffer.from('caf\xe9 cr\xe8me br\xfbl\xe9e \xe0 la', 'latin1'))).toBe(false);
    expect(looksBinary(Buffer.from([0xff, 0xfe, 0xfd, 0xfc, 0xc3, 0x28, 0xa0, 0xa1, 0x80, 0x81]))).toBe(true);
    expect(looksBinary(Buffer.from('plain text ✓\n'))).toBe(false);
    expect((await files.stat('x.png')).binary).toBe(true);
  });

  it('names a missing file, a directory and a bad argument', async () => {
    expect((await refusal(files.read('nope.txt'))).code).toBe('FILE_NOT_FOUND');
    mkdirSync(join(dir, 'd'));
    expect((await refusal(files.read('d'))).code).toBe('NOT_A_FILE');
    await expect(files.read('a', { offset: 0 })).rejects.toThrow(InvalidFileArgumentError);
    await expect(files.read('a', { offset: 0 })).rejects.toThrow(
      "files.read 'offset': expected an integer >= 1; received 0",
    );
    await expect(files.read('')).rejects.toThrow(/files.read 'path': expected a non-empty path/);
  });
});

describe('paths outside the working dir', () => {
  it('are refused, through .. and through symlinks, unless the host allows them', async () => {
    const outside = realpathSync(mkdtempSync(join(tmpdir(), 'conch-outside-')));
    try {
      writeFileSync(join(outside, 'secret.txt'), 'secret');
      symlinkSync(outside, join(dir, 'link'));
      for (const path of [join(outside, 'secret.txt'), '../x', 'link/secret.txt']) {
        const error = await refusal(files.read(path));
        expect(error.code).toBe('OUTSIDE_WORKING_DIR');
        expect(error.message).toContain(`is outside the working directory ${dir}`);
      }
      expect((await refusal(files.write('link/new.txt', 'x'))).code).toBe('OUTSIDE_WORKING_DIR');
      expect((await refusal(files.glob('*', { cwd: 'link' }))).code).toBe('OUTSIDE_WORKING_DIR');

      const roots = new FileOperator({
        root: dir,
        protectedReason: () => undefined,
        allowedRoots: [outside],
      });
      expect((await roots.read('link/secret.txt')).content).toBe('secret');
      const anywhere = new FileOperator({ root: dir, protectedReason: () => undefined, allowOutside: true });
      expect((await anywhere.read(join(outside, 'secret.txt'))).content).toBe('secret');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});

describe('protected paths', () => {
  let registry: PluginRegistry;
  afterEach(() => registry?.dispose());

  it("are refused for writes and edits with the permission gate's own words", async () => {
    registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin] });
    await registry.expose('permission', { protectedPaths: ['secrets/**'] });
    const engine = getPermissionEngine(registry)!;
    const gated = new FileOperator({ root: dir, protectedReason: protectedReasonFor(registry, dir) });
    writeFileSync(join(dir, '.env'), 'A=1\n');
    mkdirSync(join(dir, '.git', 'hooks'), { recursive: true });
    for (const [path, op] of [
      ['.env', 'edit'],
      ['.env.local', 'write'],
      ['.git/hooks/pre-commit', 'write'],
      ['.git/config', 'write'],
      ['.bashrc', 'write'],
      ['.ssh/authorized_keys', 'write'],
      ['secrets/key.pem', 'write'], // the host's own protectedPaths glob
    ] as const) {
      const abs = join(dir, path);
      const reason = engine.protectedWriteReason(abs, dir)!;
      expect(reason).toBeDefined();
      const error = await refusal(
        op === 'edit' ? gated.edit(path, { oldString: 'A=1', newString: 'A=2' }) : gated.write(path, 'x'),
      );
      expect(error.code).toBe('PROTECTED_PATH');
      expect(error.message).toBe(
        `Refused: ${op} would modify ${reason}. Protected paths are never written by conch; write somewhere else.`,
      );
      // The gate refuses a command writing there with the same reason.
      const verdict = engine.evaluate(`echo x > ${path}`, dir);
      expect(verdict.verdict).toBe('deny');
      expect(verdict.decisive.reason).toContain(`would modify ${reason}`);
    }
    expect(readFileSync(join(dir, '.env'), 'utf8')).toBe('A=1\n');
    // A symlink to a protected file is the protected file.
    symlinkSync(join(dir, '.env'), join(dir, 'innocent.txt'));
    expect((await refusal(gated.write('innocent.txt', 'x'))).code).toBe('PROTECTED_PATH');
    expect(readFileSync(join(dir, '.env'), 'utf8')).toBe('A=1\n');
    // Reads are allowed (as for commands).
    expect((await gated.read('.env')).content).toBe('A=1\n');
  });

  it("follow the host's permission config: with the rule turned off, writes go through", async () => {
    registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin] });
    await registry.expose('permission', { safety: { protectedPaths: false } });
    const gated = new FileOperator({ root: dir, protectedReason: protectedReasonFor(registry, dir) });
    expect((await gated.write('.env', 'B=2\n')).created).toBe(true);
  });

  it('without a permission plugin, use the same check with its defaults', async () => {
    registry = new PluginRegistry({ cwd: dir });
    const ungated = new FileOperator({ root: dir, protectedReason: protectedReasonFor(registry, dir) });
    const error = await refusal(ungated.write('.env', 'x'));
    expect(error.message).toBe(
      `Refused: write would modify ${protectedPathReason(join(dir, '.env'), { workspaceRoot: dir })}. Protected paths are never written by conch; write somewhere else.`,
    );
  });
});

describe('write', () => {
  it("creates parents, writes a symlink's real file (the symlink stays), and reports bytes", async () => {
    expect(await files.write('deep/er/new.txt', 'héllo')).toMatchObject({ bytesWritten: 6, created: true });
    expect(readFileSync(join(dir, 'deep/er/new.txt'), 'utf8')).toBe('héllo');
    symlinkSync(join(dir, 'deep/er/new.txt'), join(dir, 'alias.txt'));
    expect(await files.write('alias.txt', 'bye')).toMatchObject({ created: false });
    expect(readFileSync(join(dir, 'deep/er/new.txt'), 'utf8')).toBe('bye');
    await expect(files.write('x', 3 as unknown as string)).rejects.toThrow(
      /files.write 'content': expected a string or a Uint8Array/,
    );
    expect((await refusal(files.write('deep', 'x'))).code).toBe('NOT_A_FILE');
  });

  it('says permission denied for a read-only file', async () => {
    if (process.getuid?.() === 0) return; // root writes anyway
    writeFileSync(join(dir, 'ro.txt'), 'x');
    chmodSync(join(dir, 'ro.txt'), 0o444);
    expect((await refusal(files.write('ro.txt', 'y'))).code).toBe('FILE_PERMISSION_DENIED');
    // The atomic write's rename needs only the directory's permission: the file's mode decides.
    expect((await refusal(files.edit('ro.txt', { oldString: 'x', newString: 'y' }))).code).toBe(
      'FILE_PERMISSION_DENIED',
    );
    expect(readFileSync(join(dir, 'ro.txt'), 'utf8')).toBe('x');
  });
});

describe('edit', () => {
  const source = 'function a() {\n  return 1;\n}\n\nfunction b() {\n  return 1;\n}\n';

  beforeEach(() => writeFileSync(join(dir, 'src.js'), source));
  const content = () => readFileSync(join(dir, 'src.js'), 'utf8');

  it('replaces exactly one exact match', async () => {
    const r = await files.edit('src.js', {
      oldString: 'function b() {\n  return 1;',
      newString: 'function b() {\n  return 2;',
    });
    expect(r).toMatchObject({ replacements: 1, line: 5 });
    expect(content()).toBe('function a() {\n  return 1;\n}\n\nfunction b() {\n  return 2;\n}\n');
  });

  it('refuses a text that does not match exactly, saying why, and changes nothing', async () => {
    const error = await refusal(
      files.edit('src.js', { oldString: 'function a() {\n    return 1;', newString: 'x' }),
    );
    expect(error.code).toBe('EDIT_NO_MATCH');
    expect(error.message).toBe(
      'Refused: oldString was not found in src.js; nothing was changed. It must match exactly, whitespace and line endings included (a match exists that differs only in whitespace or indentation). Read the file again and copy the text.',
    );
    expect(
      (await refusal(files.edit('src.js', { oldString: 'return 3;', newString: 'x' }))).message,
    ).not.toContain('differs only');
    expect(content()).toBe(source);
  });

  it('points at CRLF line endings', async () => {
    writeFileSync(join(dir, 'win.txt'), 'a\r\nb\r\n');
    const error = await refusal(files.edit('win.txt', { oldString: 'a\nb', newString: 'c' }));
    expect(error.message).toContain('the file uses CRLF line endings');
  });

  it('refuses a text that occurs more than once, naming the lines, unless replaceAll', async () => {
    const error = await refusal(files.edit('src.js', { oldString: 'return 1;', newString: 'return 2;' }));
    expect(error.code).toBe('EDIT_AMBIGUOUS');
    expect(error.message).toContain('oldString occurs 2 times in src.js (lines 2, 6); nothing was changed');
    expect(content()).toBe(source);
    expect(
      await files.edit('src.js', { oldString: 'return 1;', newString: 'return $&;', replaceAll: true }),
    ).toMatchObject({
      replacements: 2,
      line: 2,
    });
    // Literal replacement: `$&` is not a replacement pattern here.
    expect(content()).toBe(source.split('return 1;').join('return $&;'));
  });

  it('refuses an edit that changes nothing, an empty oldString and binary files', async () => {
    expect((await refusal(files.edit('src.js', { oldString: 'a', newString: 'a' }))).code).toBe(
      'EDIT_NO_CHANGE',
    );
    await expect(files.edit('src.js', { oldString: '', newString: 'x' })).rejects.toThrow(
      /files.edit 'oldString': expected a non-empty string \(to create or replace a whole file, use write\)/,
    );
    writeFileSync(join(dir, 'bin'), Buffer.from([1, 0, 2]));
    expect((await refusal(files.edit('bin', { oldString: '\u0001', newString: 'x' }))).code).toBe(
      'BINARY_FILE',
    );
    expect((await refusal(files.edit('missing.js', { oldString: 'a', newString: 'b' }))).code).toBe(
      'FILE_NOT_FOUND',
    );
  });
});

describe('list, stat, glob', () => {
  beforeEach(() => {
    mkdirSync(join(dir, 'src/lib'), { recursive: true });
    mkdirSync(join(dir, 'node_modules/pkg'), { recursive: true });
    writeFileSync(join(dir, 'src/a.ts'), 'a');
    writeFileSync(join(dir, 'src/lib/b.ts'), 'bb');
    writeFileSync(join(dir, 'src/.hidden.ts'), 'h');
    writeFileSync(join(dir, 'node_modules/pkg/index.ts'), 'n');
    writeFileSync(join(dir, '.env'), 'E=1');
  });

  it('lists a directory sorted, with types and sizes', async () => {
    const r = await files.list('src');
    expect(r.entries).toEqual([
      { name: '.hidden.ts', type: 'file', size: 1 },
      { name: 'a.ts', type: 'file', size: 1 },
      { name: 'lib', type: 'directory' },
    ]);
    expect(r).toMatchObject({ total: 3, truncated: false });
    expect(await files.list('src', { limit: 1 })).toMatchObject({ total: 3, truncated: true });
    expect((await refusal(files.list('src/a.ts'))).code).toBe('NOT_A_DIRECTORY');
  });

  it('stats files, directories and symlinks', async () => {
    symlinkSync('src/a.ts', join(dir, 'ln'));
    expect(await files.stat('src/lib/b.ts')).toMatchObject({ type: 'file', sizeBytes: 2, binary: false });
    expect(await files.stat('src')).toMatchObject({ type: 'directory' });
    expect(await files.stat('ln')).toMatchObject({ type: 'symlink', target: 'src/a.ts' });
  });

  it('globs with picomatch semantics: dotfiles only when asked or spelled, node_modules skipped', async () => {
    expect((await files.glob('**/*.ts')).matches).toEqual(['src/a.ts', 'src/lib/b.ts']);
    expect((await files.glob('**/*.ts', { dot: true })).matches).toEqual([
      'src/.hidden.ts',
      'src/a.ts',
      'src/lib/b.ts',
    ]);
    expect((await files.glob('.env*')).matches).toEqual(['.env']);
    expect((await files.glob('**/*.ts', { ignore: [] })).matches).toContain('node_modules/pkg/index.ts');
    expect((await files.glob('*.ts', { cwd: 'src' })).matches).toEqual(['a.ts']);
    expect((await files.glob('{src/a,src/lib/b}.ts')).matches).toEqual(['src/a.ts', 'src/lib/b.ts']);
    expect(await files.glob('**/*.ts', { limit: 1 })).toMatchObject({
      matches: ['src/a.ts'],
      total: 2,
      truncated: true,
    });
    await expect(files.glob('../**')).rejects.toThrow(/relative patterns without '\.\.'/);
    await expect(files.glob('/etc/*')).rejects.toThrow(InvalidFileArgumentError);
  });
});
