// discover() imports a plugin package from a workspace only when it is what conch last loaded there (or on the workspace's first use); new or changed ones are reported, not imported, until the host accepts them.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { removeTempDirs, tempDir } from '@conch/test-support';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, test } from 'vitest';
import { createRegistryFromConfig } from './config-file.js';
import { ConchError } from './errors/conch-error.js';
import { PluginRegistry, type PluginRegistryOptions } from './registry.js';
import { PACKAGE_DIGEST_LIMITS } from './package-digest.js';
import { UNTRUSTED_REASONS } from './trust-store.js';

const here = dirname(fileURLToPath(import.meta.url));
const zodPath = resolve(here, '../node_modules/zod/index.js');
const registries: PluginRegistry[] = [];
afterEach(async () => {
  await Promise.all(registries.splice(0).map((r) => r.dispose()));
});
// Here, not at the worker's exit: vitest gives a stopped worker 500 ms, and the huge package takes longer.
afterAll(removeTempDirs);

const temp = (prefix: string) => realpathSync(tempDir(prefix));

/** A plugin module: one tool answering `{ from, mark }`; the mark tells which version ran. */
const pluginCode = (name: string, mark = 'v1') => `import { z } from ${JSON.stringify(zodPath)};
import { mark } from './lib/mark.js';
export default { name: '${name}', version: '1.0.0', configSchema: z.object({}),
  tools: [{ name: '${name}_tool', description: 'a tool', inputSchema: z.object({}),
    execute: () => ({ from: '${name}', mark: mark + '/${mark}' }) }] };`;

/** A real plugin package on disk: package.json with a conch manifest, plugin.js and lib/mark.js. */
function writePlugin(dir: string, name: string, options: { mark?: string; version?: string } = {}) {
  mkdirSync(join(dir, 'lib'), { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({
      name: `conch-plugin-${name}`,
      version: options.version ?? '1.0.0',
      type: 'module',
      conch: { plugin: './plugin.js' },
    }),
  );
  writeFileSync(join(dir, 'plugin.js'), pluginCode(name, options.mark));
  writeFileSync(join(dir, 'lib', 'mark.js'), `export const mark = 'lib1';\n`);
  return dir;
}

/** A workspace with its own trust store (a file beside it, outside it). */
function workspace(prefix = 'conch-trust-ws-') {
  const root = temp(prefix);
  const ws = join(root, 'ws');
  mkdirSync(ws);
  return { ws, store: join(root, 'state', 'trust.json'), modules: join(ws, 'node_modules') };
}

/** A registry whose warnings are kept (parsed). */
function registryIn(cwd: string, store: string, options: PluginRegistryOptions = {}) {
  const lines: { msg: string; [key: string]: unknown }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  const registry = new PluginRegistry({
    cwd,
    trustStore: store,
    logger: pino({ level: 'warn' }, sink),
    ...options,
  });
  registries.push(registry);
  return { registry, lines };
}

/** A fresh registry's discovery in `cwd`: the next session in that folder. */
async function nextSession(cwd: string, store: string, options: PluginRegistryOptions = {}) {
  const { registry, lines } = registryIn(cwd, store, options);
  const report = await registry.discover();
  return { registry, report, lines };
}

describe('first use and later sessions', () => {
  test('the first discover loads and pins what is there; the next session loads it again', async () => {
    const { ws, store, modules } = workspace();
    writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    const first = await nextSession(ws, store);
    expect(first.report.loaded).toEqual(['alpha']);
    expect(first.report.untrusted).toEqual([]);
    const pins = JSON.parse(readFileSync(store, 'utf8')) as {
      workspaces: Record<string, unknown>;
      pins: Record<string, { kind: string; digest: string; package?: string }>;
    };
    expect(Object.keys(pins.workspaces)).toEqual([ws]);
    expect(pins.pins[join(modules, 'conch-plugin-alpha')]).toMatchObject({
      kind: 'plugin',
      package: 'conch-plugin-alpha',
      digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    });
    // The workspace's conch.config.json is pinned too: there was none.
    expect(pins.pins[join(ws, 'conch.config.json')]).toMatchObject({ kind: 'config', digest: 'none' });

    const second = await nextSession(ws, store);
    expect(second.report.loaded).toEqual(['alpha']);
    second.registry.exposeSync('alpha');
    expect(await second.registry.execute('alpha_tool', {})).toMatchObject({ mark: 'lib1/v1' });
    expect((await second.registry.status()).trust).toEqual({ store, workspace: ws, untrusted: [] });
  });

  test('a plugin package written after the first session is not imported: reported, logged, emitted; the rest load', async () => {
    const { ws, store, modules } = workspace();
    writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    await nextSession(ws, store);
    // What a sandboxed command could do: write a package with a conch manifest into node_modules.
    const planted = join(modules, 'conch-plugin-evil');
    writePlugin(planted, 'evil');
    writeFileSync(
      join(planted, 'plugin.js'),
      `import { writeFileSync } from 'node:fs';
writeFileSync(${JSON.stringify(join(ws, 'IMPORTED'))}, 'the host imported me');
export default { name: 'evil', version: '1.0.0', configSchema: { safeParse: (v) => ({ success: true, data: v }) }, tools: [] };`,
    );

    const { registry, lines } = registryIn(ws, store);
    const events: unknown[] = [];
    registry.events.on('plugin.untrusted', (e) => events.push(e));
    const report = await registry.discover();
    expect(report.loaded).toEqual(['alpha']);
    expect(existsSync(join(ws, 'IMPORTED'))).toBe(false);
    const item = {
      kind: 'plugin',
      path: planted,
      package: 'conch-plugin-evil',
      reason: 'new since conch last ran in this workspace',
    };
    expect(report.untrusted).toEqual([item]);
    expect(registry.untrusted()).toEqual([item]);
    expect((await registry.status()).trust).toEqual({ store, workspace: ws, untrusted: [item] });
    expect(events).toEqual([{ ...item, workspace: ws }]);
    const warning = lines.find((l) => l.path === planted);
    expect(warning?.msg).toContain(`plugin package 'conch-plugin-evil' at ${planted} is not loaded`);
    expect(warning?.msg).toContain('new since conch last ran in this workspace');
    expect(warning?.msg).toContain('registry.trust()');
    expect(warning?.msg).toContain('--trust');
    // Still not imported in the session after: reporting it did not pin it.
    expect((await nextSession(ws, store)).report.untrusted).toEqual([item]);
    expect(existsSync(join(ws, 'IMPORTED'))).toBe(false);
  });

  test('a pinned plugin whose entry file changed is not imported; registry.trust() loads and re-pins it', async () => {
    const { ws, store, modules } = workspace();
    const dir = writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    await nextSession(ws, store);
    writeFileSync(join(dir, 'plugin.js'), pluginCode('alpha', 'v2'));

    const { registry, report } = await nextSession(ws, store);
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toEqual([
      {
        kind: 'plugin',
        path: dir,
        package: 'conch-plugin-alpha',
        reason: 'changed since conch last ran in this workspace',
      },
    ]);
    const accepted = await registry.trust();
    expect(accepted.loaded).toEqual(['alpha']);
    expect(accepted.accepted).toMatchObject([{ path: dir, reason: UNTRUSTED_REASONS.changed }]);
    expect(registry.untrusted()).toEqual([]);
    expect((await registry.status()).trust).toMatchObject({ untrusted: [] });
    registry.exposeSync('alpha');
    // (This process imported the first version already: node's module cache serves that one.)
    expect(await registry.execute('alpha_tool', {})).toMatchObject({ from: 'alpha' });
    // Pinned as it is now: the next session loads it without asking.
    expect((await nextSession(ws, store)).report).toMatchObject({ loaded: ['alpha'], untrusted: [] });
  });

  test('discover({ trust: "all" }) accepts everything found now', async () => {
    const { ws, store, modules } = workspace();
    await nextSession(ws, store);
    writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    writePlugin(join(modules, 'conch-plugin-beta'), 'beta');
    const { registry } = registryIn(ws, store);
    const report = await registry.discover({ trust: 'all' });
    expect(report.loaded.sort()).toEqual(['alpha', 'beta']);
    expect(report.accepted.map((i) => i.package).sort()).toEqual(['conch-plugin-alpha', 'conch-plugin-beta']);
    expect((await nextSession(ws, store)).report.loaded.sort()).toEqual(['alpha', 'beta']);
  });

  test('registry.trust(paths) accepts only the packages named', async () => {
    const { ws, store, modules } = workspace();
    await nextSession(ws, store);
    const alpha = writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    const beta = writePlugin(join(modules, 'conch-plugin-beta'), 'beta');
    const { registry, report } = await nextSession(ws, store);
    expect(report.untrusted.map((i) => i.path).sort()).toEqual([alpha, beta]);
    const accepted = await registry.trust([beta]);
    expect(accepted.loaded).toEqual(['beta']);
    expect(registry.untrusted().map((i) => i.path)).toEqual([alpha]);
    expect((await nextSession(ws, store)).report).toMatchObject({
      loaded: ['beta'],
      untrusted: [{ path: alpha }],
    });
  });
  test('registry.trust() accepts what it listed, not a package that appeared since', async () => {
    const { ws, store, modules } = workspace();
    await nextSession(ws, store);
    writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    const { registry } = await nextSession(ws, store);
    const late = writePlugin(join(modules, 'conch-plugin-late'), 'late');
    const accepted = await registry.trust();
    expect(accepted.loaded).toEqual(['alpha']);
    expect(accepted.untrusted).toMatchObject([{ path: late, reason: UNTRUSTED_REASONS.new }]);
    expect(registry.untrusted().map((i) => i.path)).toEqual([late]);
  });
});

describe('what counts as a change', () => {
  /** Pins `dir` in a first session, applies `change`, and returns the next session's report. */
  async function afterChange(change: (dir: string, modules: string) => void) {
    const { ws, store, modules } = workspace();
    const dir = writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    expect((await nextSession(ws, store)).report.loaded).toEqual(['alpha']);
    change(dir, modules);
    return { ...(await nextSession(ws, store)), dir };
  }

  test('a changed package.json (a version bump)', async () => {
    const { report } = await afterChange((dir) => writePlugin(dir, 'alpha', { version: '1.0.1' }));
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toMatchObject([{ reason: UNTRUSTED_REASONS.changed }]);
  });

  test('a changed file the entry imports, inside the package', async () => {
    const { report } = await afterChange((dir) =>
      writeFileSync(join(dir, 'lib', 'mark.js'), `export const mark = 'lib2';\n`),
    );
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toMatchObject([{ reason: UNTRUSTED_REASONS.changed }]);
  });

  test('a new file anywhere in the package, and a file renamed', async () => {
    const added = await afterChange((dir) => writeFileSync(join(dir, 'lib', 'extra.js'), ''));
    expect(added.report.untrusted).toMatchObject([{ reason: UNTRUSTED_REASONS.changed }]);
    const renamed = await afterChange((dir) =>
      renameSync(join(dir, 'lib', 'mark.js'), join(dir, 'lib', 'mark2.js')),
    );
    expect(renamed.report.untrusted).toMatchObject([{ reason: UNTRUSTED_REASONS.changed }]);
  });

  test('a package deleted and recreated: the same bytes load, other bytes do not', async () => {
    const same = await afterChange((dir) => {
      rmSync(dir, { recursive: true });
      writePlugin(dir, 'alpha');
    });
    expect(same.report).toMatchObject({ loaded: ['alpha'], untrusted: [] });
    const other = await afterChange((dir) => {
      rmSync(dir, { recursive: true });
      writePlugin(dir, 'alpha', { mark: 'recreated' });
    });
    expect(other.report).toMatchObject({ loaded: [], untrusted: [{ reason: UNTRUSTED_REASONS.changed }] });
  });

  test("the package's own nested node_modules is not part of its digest (documented bound)", async () => {
    const { report } = await afterChange((dir) => {
      mkdirSync(join(dir, 'node_modules', 'dep'), { recursive: true });
      writeFileSync(join(dir, 'node_modules', 'dep', 'index.js'), '');
    });
    expect(report).toMatchObject({ loaded: ['alpha'], untrusted: [] });
  });

  test('a FIFO planted in a package is hashed by its mode, never opened (discovery does not hang)', async () => {
    const { ws, store, modules } = workspace();
    const dir = writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    execFileSync('mkfifo', [join(dir, 'lib', 'pipe')]);
    expect((await nextSession(ws, store)).report.loaded).toEqual(['alpha']);
    expect((await nextSession(ws, store)).report.loaded).toEqual(['alpha']);
  });

  test(`a package over ${PACKAGE_DIGEST_LIMITS.maxFiles} files is never trusted automatically, not even on first use`, async () => {
    const { ws, store, modules } = workspace();
    const dir = writePlugin(join(modules, 'conch-plugin-huge'), 'huge');
    mkdirSync(join(dir, 'data'));
    for (let i = 0; i <= PACKAGE_DIGEST_LIMITS.maxFiles; i++)
      writeFileSync(join(dir, 'data', `${i}.txt`), '');
    const { registry, report } = await nextSession(ws, store);
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toEqual([
      { kind: 'plugin', path: dir, package: 'conch-plugin-huge', reason: UNTRUSTED_REASONS.tooLarge },
    ]);
    // Accepted, it loads this once; it cannot be pinned, so the next session reports it again.
    expect((await registry.trust()).loaded).toEqual(['huge']);
    expect((await nextSession(ws, store)).report.untrusted).toMatchObject([{ path: dir }]);
  });
});

describe('inside and outside the workspace', () => {
  test('a plugin outside every workspace (a host-named directory elsewhere) always loads, new or changed', async () => {
    const { ws, store } = workspace();
    const elsewhere = temp('conch-trust-elsewhere-');
    await nextSession(ws, store, { pluginDirs: [elsewhere] });
    const dir = writePlugin(join(elsewhere, 'alpha'), 'alpha');
    expect((await nextSession(ws, store, { pluginDirs: [elsewhere] })).report).toMatchObject({
      loaded: ['alpha'],
      untrusted: [],
    });
    writeFileSync(join(dir, 'plugin.js'), pluginCode('alpha', 'v2'));
    expect((await nextSession(ws, store, { pluginDirs: [elsewhere] })).report).toMatchObject({
      loaded: ['alpha'],
      untrusted: [],
    });
    // Nothing outside the workspace was pinned.
    const state = JSON.parse(readFileSync(store, 'utf8')) as { pins: Record<string, unknown> };
    expect(Object.keys(state.pins).filter((p) => p.startsWith(elsewhere))).toEqual([]);
  });

  test('a link elsewhere that points into the workspace: pinned by its real path inside', async () => {
    const { ws, store } = workspace();
    const dir = writePlugin(join(ws, 'vendor', 'alpha'), 'alpha');
    const elsewhere = temp('conch-trust-links-');
    symlinkSync(dir, join(elsewhere, 'alpha'));
    expect((await nextSession(ws, store, { pluginDirs: [elsewhere] })).report.loaded).toEqual(['alpha']);
    writeFileSync(join(dir, 'plugin.js'), pluginCode('alpha', 'v2'));
    const { report } = await nextSession(ws, store, { pluginDirs: [elsewhere] });
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toEqual([
      { kind: 'plugin', path: dir, package: 'conch-plugin-alpha', reason: UNTRUSTED_REASONS.changed },
    ]);
  });

  test('a link in the workspace that points out: pinned by where it leads (retargeting it is a change)', async () => {
    const { ws, store, modules } = workspace();
    const outside = temp('conch-trust-target-');
    const first = writePlugin(join(outside, 'one'), 'alpha');
    const second = writePlugin(join(outside, 'two'), 'alpha', { mark: 'other' });
    mkdirSync(modules);
    const link = join(modules, 'conch-plugin-alpha');
    symlinkSync(first, link);
    expect((await nextSession(ws, store)).report.loaded).toEqual(['alpha']);
    // Its target changing outside the workspace is not a sandbox's doing: it still loads.
    writeFileSync(join(first, 'plugin.js'), pluginCode('alpha', 'v2'));
    expect((await nextSession(ws, store)).report.loaded).toEqual(['alpha']);
    // The link pointed elsewhere (what a sandboxed command could do): not imported.
    rmSync(link);
    symlinkSync(second, link);
    const { report } = await nextSession(ws, store);
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toEqual([
      { kind: 'plugin', path: link, package: 'conch-plugin-alpha', reason: UNTRUSTED_REASONS.changed },
    ]);
  });

  test("a package inside another workspace conch ran in is judged by that workspace's pins, even on this one's first use", async () => {
    const a = workspace();
    const dir = writePlugin(join(a.ws, 'plugins', 'alpha'), 'alpha');
    await nextSession(a.ws, a.store, { pluginDirs: [join(a.ws, 'plugins')] });
    writeFileSync(join(dir, 'plugin.js'), pluginCode('alpha', 'v2'));
    const other = join(dirname(a.ws), 'other');
    mkdirSync(other);
    const { report } = await nextSession(other, a.store, { pluginDirs: [join(a.ws, 'plugins')] });
    expect(report.loaded).toEqual([]);
    expect(report.untrusted).toMatchObject([{ path: dir, reason: UNTRUSTED_REASONS.changed }]);
  });

  test('the workspace through a symlinked cwd is the same workspace', async () => {
    const { ws, store, modules } = workspace();
    writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    const alias = join(temp('conch-trust-alias-'), 'ws');
    symlinkSync(ws, alias);
    await nextSession(alias, store);
    writePlugin(join(modules, 'conch-plugin-beta'), 'beta');
    const { report } = await nextSession(ws, store);
    expect(report).toMatchObject({ loaded: ['alpha'], untrusted: [{ package: 'conch-plugin-beta' }] });
  });
});

describe('the store file', () => {
  test('a corrupt trust.json does not crash discovery: logged once, read as empty, rewritten', async () => {
    const { ws, store, modules } = workspace();
    writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
    mkdirSync(dirname(store), { recursive: true });
    writeFileSync(store, '{ "version": 1, "workspaces": ');
    const first = await nextSession(ws, store);
    expect(first.report.loaded).toEqual(['alpha']);
    expect(first.lines.filter((l) => l.msg.includes('is not a valid trust store'))).toHaveLength(1);
    expect(JSON.parse(readFileSync(store, 'utf8'))).toMatchObject({ version: 1, workspaces: { [ws]: {} } });
    // The wrong shape is corrupt too.
    writeFileSync(store, JSON.stringify({ version: 7, pins: [] }));
    expect((await nextSession(ws, store)).report.loaded).toEqual(['alpha']);
  });

  test('the default store is $XDG_STATE_HOME/conch/trust.json (the tests set a throwaway one)', async () => {
    const { ws } = workspace();
    const { registry } = registryIn(ws, undefined as never, {});
    expect(registry.trustStore.file).toBe(join(process.env.XDG_STATE_HOME as string, 'conch', 'trust.json'));
    expect(process.env.XDG_STATE_HOME?.startsWith(tmpdir())).toBe(true);
  });
});

test('createRegistryFromConfig naming a plugin whose package was not trusted says so (PLUGIN_UNTRUSTED)', async () => {
  const { ws, store, modules } = workspace();
  await nextSession(ws, store);
  writePlugin(join(modules, 'conch-plugin-alpha'), 'alpha');
  const error = await createRegistryFromConfig(
    { plugins: { alpha: {} } },
    { baseDir: ws, trustStore: store, logger: pino({ level: 'silent' }) },
  ).catch((e: unknown) => e);
  expect(ConchError.isInstance(error) && error.code).toBe('PLUGIN_UNTRUSTED');
  expect((error as Error).message).toContain(`Unknown plugin 'alpha'`);
  expect((error as Error).message).toContain(join(modules, 'conch-plugin-alpha'));
  expect((error as Error).message).toContain('new since conch last ran in this workspace');
  // Accepted (conch-mcp --trust passes trust: 'all'), the same config runs.
  const registry = await createRegistryFromConfig(
    { plugins: { alpha: {} } },
    { baseDir: ws, trustStore: store, logger: pino({ level: 'silent' }), trust: 'all' },
  );
  registries.push(registry);
  expect(registry.tools().map((t) => t.name)).toEqual(['alpha_tool']);
});
