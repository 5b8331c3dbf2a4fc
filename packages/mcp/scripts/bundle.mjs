// Builds the publishable @conch/mcp in dist/package (publishConfig.directory), run by `pnpm pack`
// and `pnpm publish` as the prepack step. The @conch/* packages are not on the registry, so their
// code is bundled into the package's own dist; every other import stays a normal npm dependency:
//
//   dist/package/package.json        this package.json, with `dependencies` = the union of the
//                                    bundled packages' own npm dependencies (catalog ranges resolved)
//   dist/package/dist/bin.cjs        the conch-mcp bin: a launcher (src/published-bin.ts) that runs
//                                    main.cjs from V8's code cache kept on disk (compile-cache.ts)
//   dist/package/dist/main.cjs       the server, self-contained: every npm dependency bundled in
//                                    but those that load native code or WASM files beside them
//                                    (BIN_EXTERNALS); one file compiles and evaluates far faster
//                                    than the hundreds of modules zod, the MCP SDK and ajv ship as.
//                                    CommonJS, so that it can run from a code cache on every node
//                                    (node 20 caches no ES module) and node's built-ins load as
//                                    plain objects, without the ES module facades that read every
//                                    lazy export (node:http's loads undici); ASCII and without
//                                    whitespace, so it reads and scans faster.
//   dist/package/dist/index.js       the host API               } esbuild, ESM: npm dependencies
//   dist/package/dist/chunk-*.js                                } stay imports, shared with the host
//   dist/package/dist/supervisor-main.js  @conch/process's supervisor, self-contained (node built-ins
//                                    only), beside the chunk that starts it: the process manager
//                                    runs `<its own dir>/supervisor-main.js`
//   dist/package/prebuilds/linux-{x64,arm64}-{glibc,musl}/conch_spawn.node
//                                    the supervisor's posix_spawn addon, prebuilt (@conch/process's
//                                    prebuilds/): nothing is compiled at install, and there is no
//                                    install script
//   dist/package/prebuilds/linux-{x64,arm64}/conch-guard
//                                    the sandbox's path guard, prebuilt and static (@conch/sandbox's)
//   dist/package/dist/tree-sitter-bash.wasm
//                                    the bash grammar @conch/shell-syntax ships
//   dist/package/dist/index.d.ts     the host API's types with the @conch/* declarations inlined
//   dist/package/dist/server-bundle/ @conch/exec-server's server, copied into remote targets
//
// Input: this package's sources (compiled here) and the other @conch/* packages' dist (run
// `pnpm build` first). Fails when bundled code imports a package that the @conch/* package it
// belongs to does not declare, or when two of them declare one with different ranges.
import { execFileSync } from 'node:child_process';
import { isAscii } from 'node:buffer';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';
import { rollup } from 'rollup';
import { dts } from 'rollup-plugin-dts';

const PKG_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(PKG_DIR, 'package.json'), 'utf8'));
const OUT = join(PKG_DIR, pkg.publishConfig.directory);
const OUT_DIST = join(OUT, 'dist');
const STAGE = join(PKG_DIR, 'node_modules', '.cache', 'conch-mcp-bundle');
const require = createRequire(import.meta.url);
const builtins = new Set(builtinModules);

function fail(message) {
  console.error(`@conch/mcp bundle: ${message}`);
  process.exit(1);
}

/** 'pino' -> 'pino', '@scope/x/sub.js' -> '@scope/x'. */
function packageName(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const isBuiltin = (specifier) => specifier.startsWith('node:') || builtins.has(packageName(specifier));
const isBare = (specifier) => !specifier.startsWith('.') && !isAbsolute(specifier);

/** The workspace catalog (pnpm-workspace.yaml `catalog:`), to publish real ranges for `catalog:`. */
function readCatalog() {
  let dir = PKG_DIR;
  while (!existsSync(join(dir, 'pnpm-workspace.yaml'))) {
    if (dirname(dir) === dir) fail('pnpm-workspace.yaml not found above the package');
    dir = dirname(dir);
  }
  const catalog = new Map();
  let inCatalog = false;
  for (const line of readFileSync(join(dir, 'pnpm-workspace.yaml'), 'utf8').split('\n')) {
    if (/^\S/.test(line)) inCatalog = line.trim() === 'catalog:';
    else if (inCatalog) {
      const m = /^\s+(['"]?)([^'":]+)\1:\s*(\S+)\s*$/.exec(line);
      if (m) catalog.set(m[2], m[3].replace(/^['"]|['"]$/g, ''));
    }
  }
  return catalog;
}

/** The directory of the package.json owning a file. */
function packageRootOf(file) {
  let dir = dirname(file);
  while (!existsSync(join(dir, 'package.json'))) {
    if (dirname(dir) === dir) fail(`no package.json above ${file}`);
    dir = dirname(dir);
  }
  return dir;
}

// 1. This package compiled fresh into a private directory (never over dist/, which tests and
// other packages may be running); the other packages' dist come from `pnpm build`. It sits under
// this package so that @conch/* and npm imports resolve from it as they do from dist/.
rmSync(STAGE, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [
    require.resolve('typescript/bin/tsc'),
    '-p',
    'tsconfig.build.json',
    '--outDir',
    STAGE,
    '--declarationMap',
    'false',
  ],
  { cwd: PKG_DIR, stdio: 'inherit' },
);
rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT_DIST, { recursive: true });

// Bare imports other than @conch/* stay imports (npm dependencies); @conch/* code is bundled.
const externals = {
  name: 'externals',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('@conch/')) return undefined;
      return { path: args.path, external: true };
    });
  },
};
const common = {
  absWorkingDir: PKG_DIR,
  outdir: OUT_DIST,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20.19',
  metafile: true,
  logLevel: 'warning',
  // The @conch/* packages declare "sideEffects": false; their bare `import './events.js'` lines
  // load type-only module augmentations (empty at run time), which esbuild rightly drops.
  logOverride: { 'ignored-bare-import': 'silent' },
  plugins: [externals],
};

// 2. The host API: @conch/* bundled, npm dependencies stay imports (a host shares its zod, MCP SDK
// and pino with conch). Everything stays in one directory: import.meta.url-relative paths
// (../package.json, the supervisor script, discovery's start dir) resolve as in a package.
const main = await esbuild.build({
  ...common,
  entryPoints: { index: join(STAGE, 'index.js') },
  splitting: true,
});

// 2b. The bin: the launcher (src/published-bin.ts with the code-cache runner bundled in), and the
// server with its npm dependencies bundled in, except those that find files beside their own code
// at run time (native addons, WASM): they stay requires of the published dependencies. (pino is
// bundled: conch never starts its worker transports, the one part that loads files of its own.)
// The server's sources are ES modules: `import.meta.url` and `import.meta.resolve` become their
// CommonJS equivalents, and a top-level await fails the build (esbuild refuses it).
const BIN_EXTERNALS = ['@lydell/node-pty'];
// web-tree-sitter is bundled too, so the code cache keeps it (~7 ms of a start on node 20, where
// node's own compile cache does not exist): its CommonJS build, which finds its runtime's WASM in
// its own directory (__dirname: dist/, where tree-sitter.wasm is copied below) with require(); its
// ES build imports node:module with import(), which code run from the cache cannot do.
const webTreeSitterCjs = createRequire(join(PKG_DIR, '..', 'shell-syntax', 'package.json')).resolve(
  'web-tree-sitter',
);
if (!webTreeSitterCjs.endsWith('.cjs'))
  fail(`web-tree-sitter's require entry is ${webTreeSitterCjs}, not its .cjs build`);
// The MCP SDK's server module imports its Ajv validator statically, so ajv and ajv-formats (~50
// modules) would be evaluated at every start (~6 ms on the 2-core VM) although conch-mcp passes
// its own validator (server.ts's lazyAjv) and makes the SDK's only when a client's elicitation
// answer is checked. In the bin, that module is a facade that evaluates the real one (and ajv)
// at its first construction. A plugin rather than a patch of the SDK: the host API bundle and
// every other consumer keep the SDK as published.
const AJV_PROVIDER =
  /[\\/]@modelcontextprotocol[\\/]sdk[\\/]dist[\\/]esm[\\/]validation[\\/]ajv-provider\.js$/;
const AJV_PROVIDER_FACADE = `
export class AjvJsonSchemaValidator {
  constructor(ajv) {
    const { AjvJsonSchemaValidator: Real } = require('conch-real:ajv-provider');
    return new Real(ajv);
  }
}
`;
// What the two plugins below replaced in the server build: each must have applied (a moved file in
// a new SDK or zod release fails the build instead of silently costing every start again).
const replaced = { ajvProvider: false, zodLocales: false };
const lazyAjvProvider = (build) => {
  let real;
  build.onLoad({ filter: AJV_PROVIDER, namespace: 'file' }, (args) => {
    real = args.path;
    replaced.ajvProvider = true;
    return { contents: AJV_PROVIDER_FACADE, loader: 'js', resolveDir: dirname(args.path) };
  });
  build.onResolve({ filter: /^conch-real:ajv-provider$/ }, () => {
    if (!real) fail('the ajv-provider facade was loaded before the real module was found');
    // Named by its package path (the bundle's module keys carry no path of the build machine).
    return {
      path: '@modelcontextprotocol/sdk/dist/esm/validation/ajv-provider.js',
      namespace: 'conch-real',
      pluginData: real,
    };
  });
  build.onLoad({ filter: /.*/, namespace: 'conch-real' }, (args) => ({
    contents: readFileSync(args.pluginData, 'utf8'),
    loader: 'js',
    resolveDir: dirname(args.pluginData),
  }));
};
// zod's `z.locales` namespace holds every translation of its error messages (~290 KB, half of zod
// in the bundle); conch sets none, and zod's English default is imported by its schemas module
// itself. In the bin (one process, whose code nobody else imports) the namespace holds English
// only; plugins the server discovers import their own zod from node_modules.
const ZOD_LOCALES = /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/;
const englishZodLocales = (build) => {
  build.onLoad({ filter: ZOD_LOCALES, namespace: 'file' }, (args) => {
    if (!existsSync(join(dirname(args.path), 'en.js')))
      fail(`zod's English locale is not beside ${args.path}`);
    replaced.zodLocales = true;
    return {
      contents: 'export { default as en } from "./en.js";\n',
      loader: 'js',
      resolveDir: dirname(args.path),
    };
  });
};
const binExternals = {
  name: 'bin-externals',
  setup(build) {
    lazyAjvProvider(build);
    englishZodLocales(build);
    build.onResolve({ filter: /^web-tree-sitter$/ }, () => ({ path: webTreeSitterCjs }));
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      isBuiltin(args.path) || BIN_EXTERNALS.includes(packageName(args.path))
        ? { path: args.path, external: true }
        : undefined,
    );
  },
};
// `import.meta.url` of a CommonJS file, for sources written as ES modules.
const IMPORT_META_URL = "var __conchImportMetaUrl = require('node:url').pathToFileURL(__filename).href;";
const server = await esbuild.build({
  ...common,
  entryPoints: { main: join(STAGE, 'main.js') },
  format: 'cjs',
  outExtension: { '.js': '.cjs' },
  plugins: [binExternals],
  sourcemap: process.env.CONCH_BUNDLE_SOURCEMAP ? 'external' : false,
  // Identifiers stay as written: stack traces in the log read as the sources do.
  minifyWhitespace: true,
  minifySyntax: true,
  charset: 'ascii',
  define: { 'import.meta.url': '__conchImportMetaUrl', 'import.meta.resolve': '__conchImportMetaResolve' },
  banner: {
    js: `${IMPORT_META_URL} var __conchImportMetaResolve = (specifier) => require('node:url').pathToFileURL(require.resolve(specifier)).href;`,
  },
});
const serverFile = join(OUT_DIST, 'main.cjs');
for (const [what, done] of Object.entries(replaced))
  if (!done) fail(`the server bundle no longer loads the module the ${what} replacement expects: update it`);
// Written as node wraps a CommonJS module, so the launcher hands V8 the file's text as it is
// (compile-cache.ts, `wrapped`): adding the wrapper at run time made V8 copy 2.5 MB once more.
// The head shares the first line with the code: line numbers stay those of the file.
{
  const { WRAPPER_HEAD, WRAPPER_TAIL } = await import(pathToFileURL(join(STAGE, 'compile-cache.js')).href);
  const text = readFileSync(serverFile, 'latin1');
  writeFileSync(serverFile, `${WRAPPER_HEAD}${text.replace(/\n$/, '')}${WRAPPER_TAIL}`, 'latin1');
}
// CONCH_BUNDLE_METAFILE=<file>: esbuild's account of the server bundle (what each input adds), for
// `esbuild --analyze`-style reading of what conch-mcp loads at start.
if (process.env.CONCH_BUNDLE_METAFILE)
  writeFileSync(process.env.CONCH_BUNDLE_METAFILE, JSON.stringify(server.metafile));
const serverBytes = readFileSync(serverFile);
// esbuild escapes non-ASCII characters everywhere but in regular expression literals.
if (!isAscii(serverBytes))
  console.warn(
    `@conch/mcp bundle: ${serverFile} is not ASCII (a regular expression literal?): the launcher decodes it as UTF-8, slower than latin1`,
  );
if (/\bimport\.meta\b/.test(serverBytes.toString('latin1').replace(/"(?:[^"\\\n]|\\.)*"/g, '""')))
  fail(`${serverFile} still uses import.meta outside a string`);
// The launcher is CommonJS too: an ES module entry costs node's ES module loader and a facade
// for each built-in it imports (~8 ms of a start on node 24).
await esbuild.build({
  ...common,
  entryPoints: { bin: join(STAGE, 'published-bin.js') },
  format: 'cjs',
  outExtension: { '.js': '.cjs' },
  plugins: [binExternals],
  metafile: false,
  define: { 'import.meta.url': '__conchImportMetaUrl' },
  banner: { js: IMPORT_META_URL },
});
chmodSync(join(OUT_DIST, 'bin.cjs'), 0o755);

// The bundled workspace packages, found from the files esbuild actually read.
const bundled = new Map(); // package root -> package.json
for (const input of Object.keys(main.metafile.inputs)) {
  const root = packageRootOf(resolve(PKG_DIR, input));
  if (!bundled.has(root)) bundled.set(root, JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')));
}
for (const [root, manifest] of bundled) {
  if (!manifest.name?.startsWith('@conch/')) fail(`bundled a file of a non-conch package at ${root}`);
}

// 3. The supervisor, self-contained, beside the chunk that runs it.
const processRoot = [...bundled].find(([, m]) => m.name === '@conch/process')?.[0];
if (!processRoot) fail('@conch/process was not bundled: cannot place its supervisor');
const supervisorEntry = join(processRoot, 'dist', 'supervisor-main.js');
if (!existsSync(supervisorEntry)) fail(`${supervisorEntry} is missing: run \`pnpm build\` first`);
const supervisor = await esbuild.build({
  ...common,
  entryPoints: { 'supervisor-main': supervisorEntry },
});
for (const [file, output] of Object.entries(supervisor.metafile.outputs)) {
  const foreign = output.imports.filter((i) => i.external && !isBuiltin(i.path)).map((i) => i.path);
  // It runs inside bubblewrap with only its own directory visible under a private /tmp.
  if (foreign.length > 0) fail(`${file} must import only node built-ins; it imports ${foreign.join(', ')}`);
}
// Its posix_spawn addon and the sandbox's path guard ship prebuilt, as @conch/process and
// @conch/sandbox ship them (their prebuilds/, made by the repository's scripts/prebuild-native.mjs),
// in the package's prebuilds/: the bundled code looks there (one directory above its dist/).
const sandboxRoot = [...bundled].find(([, m]) => m.name === '@conch/sandbox')?.[0];
if (!sandboxRoot) fail('@conch/sandbox is not among the bundled packages');
for (const root of [processRoot, sandboxRoot]) {
  const from = join(root, 'prebuilds');
  if (!existsSync(join(from, 'manifest.json'))) fail(`${from} is missing (run pnpm native:prebuild)`);
  for (const target of readdirSync(from, { withFileTypes: true }).filter((e) => e.isDirectory()))
    cpSync(join(from, target.name), join(OUT, 'prebuilds', target.name), { recursive: true });
}

// The bash grammar's WASM @conch/shell-syntax ships: its bundled parser loads it from beside itself.
const shellRoot = [...bundled].find(([, m]) => m.name === '@conch/shell-syntax')?.[0];
if (!shellRoot) fail('@conch/shell-syntax is not among the bundled packages');
for (const file of ['tree-sitter-bash.wasm', 'tree-sitter-bash.LICENSE']) {
  if (!existsSync(join(shellRoot, 'dist', file))) fail(`${join(shellRoot, 'dist', file)} is missing`);
  cpSync(join(shellRoot, 'dist', file), join(OUT, 'dist', file));
}
// The runtime's own WASM beside the bundled web-tree-sitter (see BIN_EXTERNALS), with its licence.
for (const [file, as] of [
  ['tree-sitter.wasm', 'tree-sitter.wasm'],
  ['LICENSE', 'tree-sitter.LICENSE'],
]) {
  const from = join(dirname(webTreeSitterCjs), file);
  if (!existsSync(from)) fail(`${from} is missing`);
  cpSync(from, join(OUT_DIST, as));
}

// 3b. The exec server's deployable bundle (@conch/exec-server, the `executor` plugin), beside the
// chunks: bundleDir() looks for `server-bundle` next to the running code. It is copied as built
// (its own node-pty and bash parser inside), so the hash a target caches it under stays the same.
const execServerRoot = [...bundled].find(([, m]) => m.name === '@conch/exec-server')?.[0];
if (execServerRoot) {
  const serverBundle = join(execServerRoot, 'dist', 'server-bundle');
  if (!existsSync(join(serverBundle, 'manifest.json')))
    fail(`${serverBundle} is missing: run \`pnpm build\` first`);
  cpSync(serverBundle, join(OUT_DIST, 'server-bundle'), { recursive: true });
}

// 4. Dependencies: what the bundled packages declare, checked against what their code imports.
const catalog = readCatalog();
const dependencies = {};
const declaredBy = {};
for (const manifest of bundled.values()) {
  for (const [name, rawSpec] of Object.entries(manifest.dependencies ?? {})) {
    if (name.startsWith('@conch/')) continue;
    let spec = rawSpec;
    if (spec === 'catalog:' || spec === 'catalog:default') {
      spec = catalog.get(name);
      if (!spec) fail(`${manifest.name} uses catalog: for ${name}, which the catalog does not list`);
    }
    if (spec.includes(':')) fail(`${manifest.name} depends on ${name}@${spec}: not publishable`);
    if (dependencies[name] !== undefined && dependencies[name] !== spec) {
      fail(`${name}: ${declaredBy[name]} wants ${dependencies[name]}, ${manifest.name} wants ${spec}`);
    }
    dependencies[name] = spec;
    declaredBy[name] = manifest.name;
  }
  if (Object.keys(manifest.peerDependencies ?? {}).length > 0) {
    fail(`${manifest.name} has peerDependencies, which bundling would hide from the installer`);
  }
}
for (const [input, info] of Object.entries(main.metafile.inputs)) {
  const owner = bundled.get(packageRootOf(resolve(PKG_DIR, input)));
  for (const imported of info.imports) {
    if (!imported.external || isBuiltin(imported.path) || !isBare(imported.path)) continue;
    const name = packageName(imported.path);
    if (!owner.dependencies?.[name]) {
      fail(`${input} imports ${imported.path}, but ${owner.name} does not list ${name} in dependencies`);
    }
  }
}
for (const [file, output] of Object.entries(main.metafile.outputs)) {
  for (const imported of output.imports) {
    if (imported.path.startsWith('@conch/')) fail(`${file} still imports ${imported.path}`);
  }
}
for (const [file, output] of Object.entries(server.metafile.outputs)) {
  for (const imported of output.imports) {
    if (!imported.external || isBuiltin(imported.path)) continue;
    if (!dependencies[packageName(imported.path)])
      fail(`${file} imports ${imported.path}, which the published dependencies do not list`);
  }
}

// 5. Types of the host API, @conch/* declarations inlined.
const types = await rollup({
  input: join(STAGE, 'index.d.ts'),
  external: (id) => isBare(id) && !id.startsWith('@conch/'),
  plugins: [dts({ respectExternal: true })],
  onwarn(warning) {
    fail(`types: ${warning.message}`);
  },
});
const { output: typeChunks } = await types.write({ file: join(OUT_DIST, 'index.d.ts'), format: 'es' });
await types.close();
rmSync(STAGE, { recursive: true, force: true });
for (const chunk of typeChunks) {
  for (const imported of chunk.imports ?? []) {
    if (isBuiltin(imported)) continue;
    if (!dependencies[packageName(imported)]) fail(`index.d.ts imports ${imported}, not a dependency`);
  }
}

// 6. The manifest: this package.json as published, minus the workspace.
const published = {};
for (const key of [
  'name',
  'version',
  'description',
  'keywords',
  'homepage',
  'bugs',
  'repository',
  'license',
  'author',
  'type',
  'sideEffects',
  'engines',
  'bin',
  'exports',
  'main',
  'types',
  'files',
]) {
  if (pkg[key] !== undefined) published[key] = pkg[key];
}
// In the workspace the bin is a committed shim (bin/conch-mcp.js, importing dist/bin.js, so a fresh
// install can link it before the build); published, it is the bundled dist/bin.cjs itself.
published.bin = { 'conch-mcp': './dist/bin.cjs' };
published.files = [...new Set([...(published.files ?? []), 'prebuilds'])];
// No scripts: an install runs nothing (the native pieces are prebuilt; where none fits, the
// supervisor uses node's spawn and sandboxes their mounts alone, and status() says which).
published.dependencies = Object.fromEntries(
  Object.entries(dependencies).sort(([a], [b]) => a.localeCompare(b)),
);
writeFileSync(join(OUT, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
cpSync(join(PKG_DIR, 'README.md'), join(OUT, 'README.md'));

const names = [...bundled.values()].map((m) => m.name).sort();
console.log(
  `@conch/mcp bundle: ${relative(PKG_DIR, OUT)} (bundled ${names.join(', ')}; ${Object.keys(dependencies).length} npm dependencies)`,
);
