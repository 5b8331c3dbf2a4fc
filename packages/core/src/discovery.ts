import { readdir, realpath, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PluginDefinition } from './define.js';
import { PluginLoadError } from './errors/plugin-load-error.js';
import { checkPluginShape } from './plugin-shape.js';
import { clearStaleStat } from './stale-stat.js';
import { readRegularFileSync } from './regular-file.js';

/**
 * The key under which a host that runs conch's code where `import()` cannot load modules provides
 * node's loader: conch-mcp's launcher runs its bundled server from a V8 code cache, and on node 20
 * an `import()` inside cached code fails (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING).
 */
export const IMPORT_MODULE_HOOK = Symbol.for('conch.importModule');

/** `import(specifier)`, through the host's loader when it provides one (IMPORT_MODULE_HOOK). */
function importModule(specifier: string): Promise<unknown> {
  // A plugin package is usually reached through a symlink (pnpm): see stale-stat.ts.
  clearStaleStat();
  const hook = (globalThis as Record<symbol, unknown>)[IMPORT_MODULE_HOOK];
  return typeof hook === 'function'
    ? (hook as (s: string) => Promise<unknown>)(specifier)
    : import(specifier);
}

/** A package that declares a conch plugin: `"conch": { "plugin": "./dist/plugin.js" }`. */
export interface PluginCandidate {
  /** Real path of the package directory. */
  dir: string;
  /** The path it was found at (a link there leads to `dir`). */
  path: string;
  packageName: string;
  manifest: unknown;
}

/**
 * The names plugin packages are published under (`conch-plugin-notes`, `@acme/conch-plugin-notes`).
 * Discovery goes by the manifest, not the name; the name only tells it that a package without a
 * manifest was probably meant to be a plugin, so it warns instead of passing it over in silence.
 */
export const PLUGIN_PACKAGE_NAME = /^(?:@[^/]+\/)?conch-plugin-[^/]+$/;

/** What a plugin package's package.json must have, as the warnings quote it. */
export const EXPECTED_MANIFEST = '"conch": { "plugin": "./dist/plugin.js" }';

/** A package named like a plugin (PLUGIN_PACKAGE_NAME) that discovery does not load: its package.json has no `conch` field. */
export interface DiscoveryWarning {
  package: string;
  /** Real path of the package directory. */
  path: string;
  problem: 'missing-manifest';
  /** One line for a human: the package, where it is, and the field to add. */
  message: string;
}

export interface LoadedPlugin {
  plugin: PluginDefinition;
  source: string;
}

async function readJson(file: string): Promise<unknown> {
  // A package.json in a node_modules an agent could write: read only as a regular file.
  return JSON.parse(readRegularFileSync(file, { maxBytes: 16 * 1024 * 1024, encoding: 'utf8' })) as unknown;
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** What one package directory is to discovery: a candidate, a near miss (a warning), or nothing. */
type Inspected = { candidate: PluginCandidate } | { warning: DiscoveryWarning } | undefined;

async function inspect(dir: string): Promise<Inspected> {
  let pkg: unknown;
  try {
    pkg = await readJson(join(dir, 'package.json'));
  } catch {
    return undefined;
  }
  if (typeof pkg !== 'object' || pkg === null) return undefined;
  const record = pkg as { name?: unknown; conch?: unknown };
  const name = typeof record.name === 'string' ? record.name : undefined;
  if (!('conch' in pkg)) {
    if (name === undefined || !PLUGIN_PACKAGE_NAME.test(name)) return undefined;
    const path = await realpath(dir);
    return {
      warning: {
        package: name,
        path,
        problem: 'missing-manifest',
        message:
          `package '${name}' at ${path} is named like a conch plugin but is not loaded: its package.json ` +
          `has no "conch" field; a plugin package declares its entry module with ${EXPECTED_MANIFEST}`,
      },
    };
  }
  return {
    candidate: {
      dir: await realpath(dir),
      path: resolve(dir),
      packageName: name ?? dir,
      manifest: record.conch,
    },
  };
}

async function packagesIn(nodeModules: string): Promise<string[]> {
  let entries: string[];
  try {
    entries = await readdir(nodeModules);
  } catch {
    return [];
  }
  // Scopes read at once, in entry order: a node_modules of a big project holds hundreds of them.
  const groups = await Promise.all(
    entries
      .filter((entry) => !entry.startsWith('.'))
      .map(async (entry) => {
        const full = join(nodeModules, entry);
        if (!entry.startsWith('@')) return [full];
        return (await readdir(full).catch(() => [] as string[])).map((scoped) => join(full, scoped));
      }),
  );
  return groups.flat();
}

/**
 * Finds plugin packages: in every `node_modules` from each start directory up to the filesystem
 * root (like node resolution), and in the named directories (a plugin package itself, or a folder
 * of them). Each package is reported once, by real path; so is each package named like a plugin
 * whose package.json has no `conch` field (`warnings`).
 */
export async function findPluginCandidates(
  startDirs: readonly string[],
  namedDirs: readonly string[],
): Promise<{ candidates: PluginCandidate[]; warnings: DiscoveryWarning[] }> {
  const seen = new Set<string>();
  const found: PluginCandidate[] = [];
  const warnings: DiscoveryWarning[] = [];
  const add = (inspected: Inspected) => {
    if (!inspected) return;
    const path = 'candidate' in inspected ? inspected.candidate.dir : inspected.warning.path;
    if (seen.has(path)) return;
    seen.add(path);
    if ('candidate' in inspected) found.push(inspected.candidate);
    else warnings.push(inspected.warning);
  };
  const consider = async (dir: string) => add(await inspect(dir));
  for (const named of namedDirs) {
    const dir = resolve(named);
    const itself = await inspect(dir);
    add(itself);
    if (itself && 'candidate' in itself) continue;
    for (const sub of await readdir(dir).catch(() => [] as string[])) {
      if (await isDir(join(dir, sub))) await consider(join(dir, sub));
    }
  }
  const visitedModules = new Set<string>();
  for (const start of startDirs) {
    let dir = resolve(start);
    for (;;) {
      const nodeModules = join(dir, 'node_modules');
      if (!visitedModules.has(nodeModules)) {
        visitedModules.add(nodeModules);
        // Every package.json of a node_modules read at once (one await per file in turn cost a
        // conch-mcp start ~5 ms per hundred packages); reported in directory order all the same.
        const inspected = await Promise.all((await packagesIn(nodeModules)).map(inspect));
        for (const item of inspected) add(item);
      }
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  return { candidates: found, warnings };
}

/** Imports a candidate's entry and checks every plugin it exports. Never throws: failures are returned. */
export async function loadCandidate(
  candidate: PluginCandidate,
): Promise<{ plugins: LoadedPlugin[]; errors: PluginLoadError[] }> {
  const source = `${candidate.packageName} (${candidate.dir})`;
  const manifest = candidate.manifest;
  if (
    typeof manifest !== 'object' ||
    manifest === null ||
    typeof (manifest as { plugin?: unknown }).plugin !== 'string'
  ) {
    return {
      plugins: [],
      errors: [
        new PluginLoadError(
          source,
          'invalid-manifest',
          `package.json "conch" must be an object like { "plugin": "./dist/plugin.js" }; got ${JSON.stringify(manifest)}`,
        ),
      ],
    };
  }
  const entry = resolve(candidate.dir, (manifest as { plugin: string }).plugin);
  let mod: Record<string, unknown>;
  try {
    mod = (await importModule(pathToFileURL(entry).href)) as Record<string, unknown>;
  } catch (error) {
    return {
      plugins: [],
      errors: [
        new PluginLoadError(
          source,
          'load-failed',
          `importing ${entry} threw: ${error instanceof Error ? error.message : String(error)}`,
          error,
        ),
      ],
    };
  }
  const exported = mod.default ?? mod.plugin ?? mod.plugins;
  const list = Array.isArray(exported) ? exported : [exported];
  const plugins: LoadedPlugin[] = [];
  const errors: PluginLoadError[] = [];
  for (const value of list) {
    const check = checkPluginShape(value);
    if (check.ok) plugins.push({ plugin: check.plugin, source });
    else
      errors.push(
        new PluginLoadError(
          source,
          'invalid-manifest',
          `the module's default export is not a plugin: ${check.detail}`,
        ),
      );
  }
  return { plugins, errors };
}
