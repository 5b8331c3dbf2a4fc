// File operations answer the same in a target as on this machine (the environment file operator's semantics, its error codes), and a remote write is judged by the host's protected-path rule on what the path really is in the target.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ExecClient } from './client/exec-client.js';
import { RemoteFileOperator } from './client/remote-file-operator.js';
import { FileOperator, isFileOperationError, type FileOperations } from '@conch/files';
import { CommandTransport } from './transport/command-transport.js';

let dir: string;
let root: string;
let client: ExecClient;
let local: FileOperations;
let remote: FileOperations;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-exec-files-'));
  root = join(dir, 'work');
  mkdirSync(join(root, 'src', 'deep'), { recursive: true });
  mkdirSync(join(root, 'node_modules', 'x'), { recursive: true });
  writeFileSync(join(root, 'src', 'a.ts'), 'line 1\nline 2\nline 3\n');
  writeFileSync(join(root, 'src', 'deep', 'b.ts'), 'x = 1;\nx = 1;\n');
  writeFileSync(join(root, 'node_modules', 'x', 'c.ts'), '');
  writeFileSync(join(root, 'blob.bin'), Buffer.from([0, 1, 2, 3, 255, 0]));
  writeFileSync(join(dir, 'outside.txt'), 'outside\n');
  client = new ExecClient({
    transport: new CommandTransport({ command: [], target: 'local-pipe' }),
    cacheDir: join(dir, 'cache'),
  });
  local = new FileOperator({ root });
  remote = new RemoteFileOperator({ client, policy: { root } });
});

afterAll(async () => {
  await client?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** The outcome of an operation as data: its result, or its error's code and message. */
async function outcome(run: () => Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await run() };
  } catch (error) {
    if (!isFileOperationError(error) && (error as { code?: string }).code !== 'INVALID_FILE_ARGUMENT')
      throw error;
    const e = error as { code: string; message: string; name: string };
    // In a target the server's temp dir (spill and overflow files) is an allowed root too, and
    // this refusal lists the allowed roots: the code and the path are compared, not the list.
    const message =
      e.code === 'OUTSIDE_WORKING_DIR' ? e.message.replace(/ and the allowed roots [^.]*\./, '.') : e.message;
    return { error: e.code, name: e.name, message };
  }
}

describe('the same answers locally and in a target', () => {
  const reads: [string, (f: FileOperations) => Promise<unknown>][] = [
    ['read a window of lines', (f) => f.read('src/a.ts', { offset: 2, limit: 1 })],
    ['read a whole file', (f) => f.read('src/a.ts')],
    ['read a missing file', (f) => f.read('src/missing.ts')],
    ['read a directory', (f) => f.read('src')],
    ['read a binary file', (f) => f.read('blob.bin')],
    ['read outside the working dir', (f) => f.read('../outside.txt')],
    ['read with a bad offset', (f) => f.read('src/a.ts', { offset: 0 })],
    ['list', (f) => f.list('src')],
    ['list a file', (f) => f.list('src/a.ts')],
    ['glob (node_modules left out)', (f) => f.glob('**/*.ts')],
    ['glob an absolute pattern', (f) => f.glob('/etc/*')],
    ['stat a file', async (f) => ({ ...(await f.stat('src/a.ts')), modifiedAt: 'x' })],
    ['stat a missing path', (f) => f.stat('nope')],
  ];
  test.each(reads)('%s', async (_name, run) => {
    const here = await outcome(() => run(local));
    const there = await outcome(() => run(remote));
    expect(there).toEqual(here);
  });

  test('readBytes returns the raw bytes with the true size', async () => {
    const there = await remote.readBytes('blob.bin', { offset: 1, length: 4 });
    expect([...there.data]).toEqual([1, 2, 3, 255]);
    expect(there.sizeBytes).toBe(6);
  });

  test('write, edit (exact, unique or replaceAll, refusals), each side on its own copy', async () => {
    for (const [name, f] of [
      ['here', local],
      ['there', remote],
    ] as const) {
      const file = `edits/${name}.txt`;
      expect(await f.write(file, 'a\nb\na\n')).toMatchObject({ created: true, bytesWritten: 6 });
      expect(await outcome(() => f.edit(file, { oldString: 'a', newString: 'z' }))).toMatchObject({
        error: 'EDIT_AMBIGUOUS',
      });
      expect(await outcome(() => f.edit(file, { oldString: 'q', newString: 'z' }))).toMatchObject({
        error: 'EDIT_NO_MATCH',
      });
      expect(await outcome(() => f.edit(file, { oldString: 'b', newString: 'b' }))).toMatchObject({
        error: 'EDIT_NO_CHANGE',
      });
      expect(await f.edit(file, { oldString: 'a', newString: 'z', replaceAll: true })).toMatchObject({
        replacements: 2,
        line: 1,
      });
      expect(readFileSync(join(root, file), 'utf8')).toBe('z\nb\nz\n');
      expect(await f.write(file, new Uint8Array([104, 105]))).toMatchObject({
        created: false,
        bytesWritten: 2,
      });
      expect(readFileSync(join(root, file), 'utf8')).toBe('hi');
    }
  });
});

describe("the host's protected-path rule on a remote write", () => {
  test('a path protected as written or through a symlink in the target is refused before anything is sent', async () => {
    mkdirSync(join(root, 'secrets'), { recursive: true });
    writeFileSync(join(root, 'secrets', 'key'), 'k');
    symlinkSync(join(root, 'secrets'), join(root, 'innocent'));
    const judged: string[] = [];
    const guarded = new RemoteFileOperator({
      client,
      policy: { root },
      protectedReason: (abs) => {
        judged.push(abs);
        return abs.includes('/secrets/') ? 'a secrets file' : undefined;
      },
    });
    const direct = await outcome(() => guarded.write('secrets/key', 'x'));
    expect(direct).toMatchObject({
      error: 'PROTECTED_PATH',
      message: expect.stringContaining('a secrets file'),
    });
    const viaLink = await outcome(() => guarded.edit('innocent/key', { oldString: 'k', newString: 'x' }));
    expect(viaLink).toMatchObject({ error: 'PROTECTED_PATH' });
    expect(judged).toContain(join(root, 'secrets', 'key'));
    expect(readFileSync(join(root, 'secrets', 'key'), 'utf8')).toBe('k');
    expect(await guarded.write('fine.txt', 'ok')).toMatchObject({ created: true });
  });
});
