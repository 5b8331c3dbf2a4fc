// Invariant: a file tool refuses a path past PATH_MAX, a glob pattern past 4096 bytes and a content or edit string past maxWriteBytes before touching the file system, naming the field and the size; a failing operation's message and display name a long path by a bounded prefix, never twice over.
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConchError, PluginRegistry, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileOperator } from './file-operator.js';
import { filesPlugin } from './files-plugin.js';

let dir: string;
let registry: PluginRegistry;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-bounded-')));
  registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, filesPlugin] });
});
afterEach(async () => {
  await registry.dispose();
  rmSync(dir, { recursive: true, force: true });
});

async function invalid(tool: string, args: Record<string, unknown>): Promise<string> {
  try {
    await registry.execute(tool, args);
  } catch (error) {
    if (ConchError.isInstance(error) && error.code === 'INVALID_ARGUMENTS') return error.message;
    throw error;
  }
  throw new Error(`${tool} ran`);
}

describe('file tools: byte limits before any work', () => {
  it('refuses a path past 4096 bytes in every tool, a pattern past 4096, and content past maxWriteBytes', async () => {
    await registry.exposeTool('permission', { sandbox: 'off', mode: 'acceptAll' });
    await registry.exposeTool('files', { maxWriteBytes: 2048 });
    const long = 'a/'.repeat(2049);
    for (const tool of ['read_file', 'stat_file', 'list_directory']) {
      expect(await invalid(tool, { path: long })).toMatch(
        /path: a string of at most 4096 bytes \(UTF-8\); received a string of 4098 bytes/,
      );
    }
    expect(await invalid('write_file', { path: long, content: 'x' })).toMatch(
      /path: a string of at most 4096/,
    );
    expect(await invalid('glob', { pattern: '*'.repeat(4097) })).toMatch(/pattern: a string of at most 4096/);
    expect(await invalid('glob', { pattern: '*', cwd: long })).toMatch(/cwd: a string of at most 4096/);
    expect(await invalid('write_file', { path: 'a.txt', content: 'x'.repeat(2049) })).toMatch(
      /content: a string of at most 2048 bytes \(UTF-8\); received a string of 2049 bytes/,
    );
    for (const field of ['old_string', 'new_string']) {
      expect(
        await invalid('edit_file', {
          path: 'a.txt',
          old_string: 'a',
          new_string: 'b',
          [field]: 'é'.repeat(1025),
        }),
      ).toMatch(
        new RegExp(`${field}: a string of at most 2048 bytes \\(UTF-8\\); received a string of 2050 bytes`),
      );
    }
    // At the limit, the write happens.
    const wrote = (await registry.execute('write_file', {
      path: 'a.txt',
      content: 'x'.repeat(2048),
    })) as ToolResult;
    expect(wrote).toMatchObject({ bytes_written: 2048 });
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toHaveLength(2048);
  });

  it('a path the kernel refuses is named once, by a bounded prefix, in the error and the display', async () => {
    await registry.exposeTool('permission', { sandbox: 'off', mode: 'acceptAll' });
    await registry.exposeTool('files');
    // One component of 4000 bytes: within PATH_MAX, past NAME_MAX (255).
    const result = (await registry.execute('stat_file', { path: 'n'.repeat(4000) })) as ToolResult;
    expect(result.error_code).toBe('FILE_ERROR');
    expect(result.error).toMatch(/ENAMETOOLONG: name too long \((l?stat)\)$/);
    expect((result.error as string).match(/n{400}/g)).toHaveLength(2); // the start and end, once
    expect((result.error as string).length).toBeLessThan(1300);
    expect((result.display as string).length).toBeLessThanOrEqual(300);
  });
});

describe('FileOperator (the host API): a path past PATH_MAX is refused before the file system sees it', () => {
  it('names the field and the size, not the path', async () => {
    const files = new FileOperator({ root: dir });
    const error = await files.stat('p'.repeat(1_500_000)).catch((e: unknown) => e as ConchError);
    expect(error).toMatchObject({ code: 'INVALID_FILE_ARGUMENT' });
    expect((error as Error).message).toBe(
      "files.stat 'path': expected a path of at most 4096 bytes (PATH_MAX); received a path of 1500000 bytes",
    );
  });
});
