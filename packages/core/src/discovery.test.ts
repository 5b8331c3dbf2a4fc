// Discovery finds plugin packages by manifest (node_modules walk-up and named dirs) and skips broken ones without failing the rest.
import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tempDir } from '@conch/test-support';
import { pino } from 'pino';
import { afterEach, describe, expect, test } from 'vitest';
import { IMPORT_MODULE_HOOK } from './discovery.js';
import { PluginRegistry } from './registry.js';

const here = dirname(fileURLToPath(import.meta.url));
const examples = resolve(here, '../../../examples');
const coreNodeModules = resolve(here, '../node_modules');
const registries: PluginRegistry[] = [];
afterEach(async () => {
  await Promise.all(registries.splice(0).map((r) => r.dispose()));
});

/** Writes a package with a conch manifest; `code` is the plugin module's source. */
function writePackage(root: string, name: string, manifest: unknown, code?: string) {
  const dir = join(root, ...name.split('/'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name, version: '1.0.0', type: 'module', conch: manifest }),
  );
  if (code !== undefined) writeFileSync(join(dir, 'plugin.js'), code);
  return dir;
}

// Plugins written by "third parties": they import zod from core's own node_modules by path.
const zodImport = `import { z } from ${JSON.stringify(join(coreNodeModules, 'zod', 'index.js'))};`;
const goodPlugin = (name: string, tool: string) => `${zodImport}
export default { name: '${name}', version: '1.0.0', configSchema: z.object({}),
  tools: [{ name: '${tool}', description: 'a tool', inputSchema: z.object({}), execute: () => ({ from: '${name}' }) }] };`;

describe('discover', () => {
  test('finds the example word-count plugin in a named directory without importing it by hand', async () => {
    const registry = new PluginRegistry({ pluginDirs: [examples] });
    registries.push(registry);
    const report = await registry.discover();
    expect(report.loaded).toContain('word-count');
    registry.exposeSync('word-count');
    expect(await registry.execute('word_count', { text: 'a b c' })).toMatchObject({ words: 3 });
  });

  test('walks node_modules from cwd up, including scoped packages, once per package', async () => {
    const root = tempDir('conch-disc-');
    const nested = join(root, 'project', 'sub');
    mkdirSync(nested, { recursive: true });
    writePackage(
      join(root, 'node_modules'),
      '@acme/conch-hello',
      { plugin: './plugin.js' },
      goodPlugin('hello', 'say_hello'),
    );
    writePackage(
      join(root, 'project', 'node_modules'),
      'conch-near',
      { plugin: './plugin.js' },
      goodPlugin('near', 'near_tool'),
    );
    writePackage(join(root, 'project', 'node_modules'), 'not-a-plugin', undefined);
    const registry = new PluginRegistry({ cwd: nested });
    registries.push(registry);
    const report = await registry.discover();
    expect(report.errors).toEqual([]);
    expect(report.loaded.sort()).toEqual(['hello', 'near']);
    registry.exposeSync('hello');
    expect(await registry.execute('say_hello', {})).toEqual({ from: 'hello', display: '✓' });
    expect((await registry.discover()).loaded).toEqual([]);
  });

  test('a plugin that throws on load, an invalid manifest, a bad shape and a duplicate tool are skipped with typed errors', async () => {
    const root = tempDir('conch-broken-');
    const modules = join(root, 'node_modules');
    writePackage(modules, 'a-good', { plugin: './plugin.js' }, goodPlugin('good', 'good_tool'));
    writePackage(modules, 'b-throws', { plugin: './plugin.js' }, `throw new Error('boom at load');`);
    writePackage(modules, 'c-manifest', 'plugin.js');
    writePackage(
      modules,
      'd-shape',
      { plugin: './plugin.js' },
      `export default { name: 'Bad Name', version: '1' };`,
    );
    writePackage(modules, 'e-dup', { plugin: './plugin.js' }, goodPlugin('dup', 'good_tool'));
    const errors: string[] = [];
    const registry = new PluginRegistry({ cwd: root });
    registries.push(registry);
    registry.events.on('plugin.load-error', (e) => errors.push(e.code));
    const report = await registry.discover();
    expect(report.loaded).toEqual(['good']);
    const byCode = Object.fromEntries(report.errors.map((e) => [e.code, e.message]));
    expect(Object.keys(byCode).sort()).toEqual(
      ['PLUGIN_DUPLICATE_TOOL', 'PLUGIN_INVALID_MANIFEST', 'PLUGIN_LOAD_FAILED'].sort(),
    );
    expect(report.errors).toHaveLength(4);
    expect(byCode.PLUGIN_LOAD_FAILED).toContain('boom at load');
    expect(byCode.PLUGIN_DUPLICATE_TOOL).toContain("tool 'good_tool' is already provided by plugin 'good'");
    expect(report.errors.map((e) => e.message).join('\n')).toMatch(/name: expected a plugin name/);
    expect(report.errors.map((e) => e.message).join('\n')).toMatch(/"conch" must be an object/);
    expect(errors).toHaveLength(4);
    expect(registry.loadErrors).toHaveLength(4);
    registry.exposeSync('good');
    expect(await registry.execute('good_tool', {})).toEqual({ from: 'good', display: '✓' });
  });
});

/** A package.json without a conch manifest (`extra` may add a malformed one). */
function writePlainPackage(root: string, name: string, extra: Record<string, unknown> = {}) {
  const dir = join(root, ...name.split('/'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name, version: '1.0.0', type: 'module', ...extra }),
  );
  return realpathSync(dir);
}

/** A registry with its own trust store whose log lines (warn and up) are kept, parsed. */
function loggedRegistry(cwd: string, options: ConstructorParameters<typeof PluginRegistry>[0] = {}) {
  const lines: { level: number; msg: string; [key: string]: unknown }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  const registry = new PluginRegistry({
    cwd,
    trustStore: join(tempDir('conch-disc-store-'), 'trust.json'),
    logger: pino({ level: 'warn' }, sink),
    ...options,
  });
  registries.push(registry);
  return { registry, lines };
}

describe('a package named like a plugin that discovery does not load', () => {
  test('is warned about once, naming the package, its path and the field, and listed in status().discovery', async () => {
    const root = realpathSync(tempDir('conch-disc-warn-'));
    const modules = join(root, 'node_modules');
    const forgot = writePlainPackage(modules, 'conch-plugin-forgot');
    const scoped = writePlainPackage(modules, '@acme/conch-plugin-scoped');
    const malformed = writePlainPackage(modules, 'conch-plugin-malformed', { conch: './plugin.js' });
    writePlainPackage(modules, 'left-pad');
    writePlainPackage(modules, 'conch-plugins-list');
    writePackage(modules, 'conch-plugin-good', { plugin: './plugin.js' }, goodPlugin('good', 'good_tool'));
    // Named by the host: the directory is a package itself, without the field.
    const named = writePlainPackage(join(root, 'named'), 'conch-plugin-named');
    // The same package reached a second time, through a link in another node_modules.
    const other = join(root, 'other');
    mkdirSync(join(other, 'node_modules'), { recursive: true });
    symlinkSync(forgot, join(other, 'node_modules', 'conch-plugin-forgot'));

    const { registry, lines } = loggedRegistry(root, { pluginDirs: [named], searchPaths: [other] });
    const report = await registry.discover();
    expect(report.loaded).toEqual(['good']);
    expect(report.warnings.map((w) => [w.package, w.path, w.problem]).sort()).toEqual(
      [
        ['@acme/conch-plugin-scoped', scoped, 'missing-manifest'],
        ['conch-plugin-forgot', forgot, 'missing-manifest'],
        ['conch-plugin-named', named, 'missing-manifest'],
      ].sort(),
    );
    await registry.discover();
    await registry.trust();

    const warned = lines.filter((l) => l.level === 40 && l.problem === 'missing-manifest');
    expect(warned.map((l) => l.package).sort()).toEqual(
      ['@acme/conch-plugin-scoped', 'conch-plugin-forgot', 'conch-plugin-named'].sort(),
    );
    const forgotLine = warned.find((l) => l.package === 'conch-plugin-forgot');
    expect(forgotLine).toMatchObject({ path: forgot });
    expect(forgotLine?.msg).toContain(`package 'conch-plugin-forgot' at ${forgot}`);
    expect(forgotLine?.msg).toContain('has no "conch" field');
    expect(forgotLine?.msg).toContain('"conch": { "plugin": "./dist/plugin.js" }');
    // A malformed field is a load error (logged at error level), naming the package, path and shape.
    const malformedLines = lines.filter((l) => String(l.msg).includes('conch-plugin-malformed'));
    expect(malformedLines[0]).toMatchObject({ level: 50, code: 'PLUGIN_INVALID_MANIFEST' });
    expect(malformedLines[0]?.msg).toContain(`conch-plugin-malformed (${malformed})`);
    expect(malformedLines[0]?.msg).toContain(
      '"conch" must be an object like { "plugin": "./dist/plugin.js" }',
    );
    // Packages not named like plugins are passed over without a word.
    expect(lines.some((l) => /left-pad|conch-plugins-list/.test(String(l.msg)))).toBe(false);

    const status = await registry.status();
    expect(status.discovery.warnings.map((w) => w.package).sort()).toEqual(
      ['@acme/conch-plugin-scoped', 'conch-plugin-forgot', 'conch-plugin-named'].sort(),
    );
    expect(status.discovery.loadErrors).toContainEqual(
      expect.objectContaining({
        code: 'PLUGIN_INVALID_MANIFEST',
        source: `conch-plugin-malformed (${malformed})`,
      }),
    );

    // Given the field, the package loads and leaves the list.
    writePackage(
      modules,
      'conch-plugin-forgot',
      { plugin: './plugin.js' },
      goodPlugin('forgot', 'forgot_tool'),
    );
    expect((await registry.trust([forgot])).loaded).toEqual(['forgot']);
    expect((await registry.status()).discovery.warnings.map((w) => w.package)).not.toContain(
      'conch-plugin-forgot',
    );
  });
});

describe('IMPORT_MODULE_HOOK', () => {
  afterEach(() => {
    delete (globalThis as Record<symbol, unknown>)[IMPORT_MODULE_HOOK];
  });

  test("is the global registry's symbol for 'conch.importModule' (a host sets it without importing core)", () => {
    expect(IMPORT_MODULE_HOOK).toBe(Symbol.for('conch.importModule'));
  });

  test("a host's loader imports discovered plugins when set; import() does otherwise", async () => {
    const root = tempDir('conch-disc-hook-');
    const dir = writePackage(
      join(root, 'node_modules'),
      'conch-hooked',
      { plugin: './plugin.js' },
      goodPlugin('hooked', 'hooked_tool'),
    );
    const seen: string[] = [];
    (globalThis as Record<symbol, unknown>)[IMPORT_MODULE_HOOK] = (specifier: string) => {
      seen.push(specifier);
      return import(specifier);
    };
    const hooked = new PluginRegistry({ cwd: root });
    registries.push(hooked);
    expect((await hooked.discover()).loaded).toContain('hooked');
    expect(seen).toEqual([pathToFileURL(join(realpathSync(dir), 'plugin.js')).href]);
    // A loader that refuses: the plugin is reported as failed to load, naming what the loader said.
    (globalThis as Record<symbol, unknown>)[IMPORT_MODULE_HOOK] = () =>
      Promise.reject(new Error('loader says no'));
    const refused = new PluginRegistry({ cwd: root });
    registries.push(refused);
    const report = await refused.discover();
    expect(report.loaded).not.toContain('hooked');
    expect(JSON.stringify(report.errors)).toContain('loader says no');
    // No hook: node's own import().
    delete (globalThis as Record<symbol, unknown>)[IMPORT_MODULE_HOOK];
    const plain = new PluginRegistry({ cwd: root });
    registries.push(plain);
    expect((await plain.discover()).loaded).toContain('hooked');
    expect(seen).toHaveLength(1);
  });
});
