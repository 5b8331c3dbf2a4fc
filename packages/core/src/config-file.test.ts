// conch.config.json is validated with named-field errors and exposes the plugins it names, in order.
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@conch/test-support';
import { expect, test } from 'vitest';
import { createRegistryFromConfig, loadConchConfig } from './config-file.js';
import { ConchError } from './errors/conch-error.js';

const examples = resolve(dirname(fileURLToPath(import.meta.url)), '../../../examples');

test('loads, resolves paths against the file and exposes named plugins', async () => {
  const dir = tempDir('conch-cfg-');
  const file = join(dir, 'conch.config.json');
  writeFileSync(
    file,
    JSON.stringify({ cwd: '.', pluginDirs: [examples], plugins: { 'word-count': { max_bytes: 10 } } }),
  );
  const config = await loadConchConfig(file);
  const registry = await createRegistryFromConfig(config, { baseDir: config.baseDir });
  try {
    expect(registry.cwd).toBe(dir);
    expect(registry.tools().map((t) => t.name)).toEqual(['word_count']);
    writeFileSync(join(dir, 'big.txt'), 'x'.repeat(20));
    expect(await registry.execute('word_count', { path: 'big.txt' })).toMatchObject({
      error: expect.stringContaining('10-byte limit'),
    });
  } finally {
    await registry.dispose();
  }
});

test('a bad file names the field', async () => {
  const dir = tempDir('conch-cfg-');
  const file = join(dir, 'conch.config.json');
  writeFileSync(file, JSON.stringify({ plugins: { cli: 3 }, colour: 'red' }));
  const error = await loadConchConfig(file).catch((e: unknown) => e);
  expect(ConchError.isInstance(error) && error.code).toBe('INVALID_CONFIG');
  expect(String((error as Error).message)).toMatch(/plugins\.cli: .*expected record/);
  expect(String((error as Error).message)).toMatch(/colour: no such key/);
  writeFileSync(file, '{ nope');
  expect(((await loadConchConfig(file).catch((e: unknown) => e)) as ConchError).code).toBe(
    'CONFIG_FILE_UNREADABLE',
  );
});

test('an unknown plugin in the config fails with the known list and leaves nothing behind', async () => {
  const error = await createRegistryFromConfig({ plugins: { nope: {} } }, { pluginDirs: [examples] }).catch(
    (e: unknown) => e,
  );
  expect((error as ConchError).code).toBe('NO_SUCH_PLUGIN');
  expect((error as Error).message).toContain('word-count');
});
