// The example plugin is discovered from its directory and its tool really counts files.
import 'reflect-metadata';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PluginRegistry } from '@conch/core';
import { afterEach, expect, test } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
let registry;
afterEach(() => registry?.dispose());

test('discovered by directory, counts text and files', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'wc-'));
  writeFileSync(join(cwd, 'a.txt'), 'one two\nthree\n');
  registry = new PluginRegistry({ cwd, pluginDirs: [here] });
  const report = await registry.discover();
  expect(report.loaded).toContain('word-count');
  await registry.expose('word-count');
  expect(await registry.execute('word_count', { text: 'héllo world' })).toEqual({
    lines: 1,
    words: 2,
    chars: 11,
    bytes: 12,
    display: '✓ 1 line, 2 words',
  });
  expect(await registry.execute('word_count', { path: 'a.txt' })).toMatchObject({ lines: 2, words: 3 });
  expect(await registry.execute('word_count', { path: 'missing.txt' })).toMatchObject({
    error: expect.stringContaining('ENOENT'),
    error_code: 'NO_SUCH_FILE',
  });
  writeFileSync(join(cwd, 'big.txt'), 'x'.repeat(64));
  const small = new PluginRegistry({ cwd, pluginDirs: [here] });
  await small.discover();
  await small.expose('word-count', { maxBytes: 10 });
  expect(await small.execute('word_count', { path: 'big.txt' })).toMatchObject({
    error_code: 'FILE_TOO_LARGE',
    display: expect.stringMatching(/^✗ FILE_TOO_LARGE: big\.txt is 64 bytes/),
  });
  await small.dispose();
  await expect(registry.execute('word_count', {})).rejects.toThrow(/exactly one of `text` or `path`/);
});
