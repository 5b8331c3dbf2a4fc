// Builds the server bundle that is copied into targets: dist/server-bundle/ holds
//   exec-server.js         the server (esbuild: @conch/process, @conch/terminal, @conch/core, pino,
//                          zod ... in one ESM file plus shared chunks beside it), needing only node >= 20
//   attach-relay.js        the relay a re-attaching client runs (stdio <-> a detached server's socket)
//   supervisor-main.js     @conch/process's supervisor (the server's ProcessManager starts it from
//                          the directory its own code runs from)
//   node_modules/@lydell/  node-pty's JS and the prebuilt pty.node of every platform installed here
//   node_modules/web-tree-sitter, tree-sitter-bash.wasm
//                          the WASM bash parser the terminal's command analysis reads commands with
//                          (web-tree-sitter finds its tree-sitter.wasm beside its own script, so it
//                          stays a package rather than bundled code; @conch/shell-syntax's bundled
//                          code loads the grammar beside itself)
//   prebuilds/linux-{x64,arm64}-{glibc,musl}/conch_spawn.node
//                          @conch/process's posix_spawn addon for each target it is built for (the
//                          supervisor and the server load the one for their machine; without it a
//                          target's commands start with node's spawn, about twice the cost)
//   prebuilds/linux-{x64,arm64}/conch-guard
//                          @conch/sandbox's path guard (static): a sandbox in the target runs under
//                          it, not on its mounts alone
//   package.json           {"type":"module"}
//   manifest.json          { hash, files: [{ path, size, sha256, mode }] } (not part of the hash)
// The bundle hash names the directory a target installs it in, so a changed bundle is a new copy.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(pkgDir, 'dist', 'server-bundle');
const require = createRequire(join(pkgDir, 'package.json'));

// The hello names the package version the server was built from (src/version.ts): keep it true.
const version = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version;
const versionTs = readFileSync(join(pkgDir, 'src', 'version.ts'), 'utf8');
if (!versionTs.includes(`'${version}'`)) {
  throw new Error(`bundle: src/version.ts must say '${version}' (package.json's version); it does not`);
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const processDir = dirname(fileURLToPath(import.meta.resolve('@conch/process')));
await build({
  entryPoints: {
    'exec-server': join(pkgDir, 'src', 'server', 'main.ts'),
    // What a re-attaching client runs in the target: no dependencies, quick to start.
    'attach-relay': join(pkgDir, 'src', 'server', 'attach-relay.ts'),
    'supervisor-main': join(processDir, 'supervisor-main.js'),
  },
  outdir: out,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Chunks stay beside the entries: @conch/process finds supervisor-main.js, and @conch/terminal
  // resolves node-pty, relative to the file their code runs from (import.meta.url).
  chunkNames: 'chunk-[hash]',
  entryNames: '[name]',
  external: ['@lydell/node-pty', 'web-tree-sitter'],
  // CommonJS dependencies (pino, tsyringe) call require(); ESM output needs a real one.
  banner: {
    js: "import { createRequire as __conchCreateRequire } from 'node:module'; const require = __conchCreateRequire(import.meta.url);",
  },
  legalComments: 'none',
  // Smaller to copy and faster to parse at each server start; identifiers stay for stack traces.
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
  // The packages' events.js files only augment types (declare module): nothing to run.
  logOverride: { 'ignored-bare-import': 'silent' },
});

writeFileSync(join(out, 'package.json'), '{ "type": "module", "private": true }\n');

// node-pty: its JS, plus each platform's prebuilt binary installed here (pnpm installs the host's).
const ptyPkg = dirname(require.resolve('@lydell/node-pty/package.json'));
const ptyOut = join(out, 'node_modules', '@lydell', 'node-pty');
const copyTree = (from, to, keep) => {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const src = join(from, entry.name);
    if (entry.isDirectory()) copyTree(src, join(to, entry.name), keep);
    else if (keep(entry.name)) copyFileSync(src, join(to, entry.name));
  }
};
copyTree(ptyPkg, ptyOut, (name) => name.endsWith('.js') || name === 'package.json' || name === 'LICENSE');
const ptyRequire = createRequire(join(ptyPkg, 'package.json'));
const platforms = [];
for (const dep of Object.keys(
  JSON.parse(readFileSync(join(ptyPkg, 'package.json'), 'utf8')).optionalDependencies ?? {},
)) {
  let dir;
  try {
    dir = dirname(ptyRequire.resolve(`${dep}/package.json`));
  } catch {
    continue; // not installed for this host
  }
  copyTree(
    dir,
    join(out, 'node_modules', dep),
    (name) =>
      name === 'package.json' || name.endsWith('.node') || name === 'spawn-helper' || name === 'LICENSE',
  );
  const helper = join(out, 'node_modules', dep, 'spawn-helper');
  if (existsSync(helper)) chmodSync(helper, 0o755);
  platforms.push(dep.replace('@lydell/node-pty-', ''));
}
if (platforms.length === 0)
  throw new Error(
    'bundle: no prebuilt node-pty binary is installed; terminal sessions could not run anywhere',
  );

// The bash parser (@conch/shell-syntax's): web-tree-sitter's ESM entry and runtime WASM, and the
// grammar's WASM @conch/shell-syntax ships (its bundled code loads it from beside itself).
const shellRequire = createRequire(fileURLToPath(import.meta.resolve('@conch/shell-syntax')));
const webTreeSitter = dirname(shellRequire.resolve('web-tree-sitter'));
copyTree(webTreeSitter, join(out, 'node_modules', 'web-tree-sitter'), (name) =>
  ['package.json', 'LICENSE', 'tree-sitter.js', 'tree-sitter.wasm'].includes(name),
);
rmSync(join(out, 'node_modules', 'web-tree-sitter', 'debug'), { recursive: true, force: true });
rmSync(join(out, 'node_modules', 'web-tree-sitter', 'lib'), { recursive: true, force: true });
rmSync(join(out, 'node_modules', 'web-tree-sitter', 'src'), { recursive: true, force: true });
const shellDist = dirname(fileURLToPath(import.meta.resolve('@conch/shell-syntax')));
for (const file of ['tree-sitter-bash.wasm', 'tree-sitter-bash.LICENSE'])
  copyFileSync(join(shellDist, file), join(out, file));

// The prebuilt native parts, every target's: the target's machine is not known here. The bundled
// code looks for prebuilds/ beside itself (native-spawn.ts, guard.ts).
// (@conch/sandbox is @conch/process's dependency, not this package's: found from there.)
const processRoot = join(processDir, '..');
const sandboxRoot = dirname(
  createRequire(join(processRoot, 'package.json')).resolve('@conch/sandbox/package.json'),
);
for (const root of [processRoot, sandboxRoot]) {
  const from = join(root, 'prebuilds');
  const targets = existsSync(join(from, 'manifest.json'))
    ? readdirSync(from, { withFileTypes: true }).filter((e) => e.isDirectory())
    : [];
  if (targets.length === 0)
    throw new Error(`bundle: ${from} holds no prebuilt targets (run pnpm native:prebuild)`);
  // copyFileSync keeps each file's mode: the guard stays executable (the manifest records it).
  for (const target of targets)
    copyTree(join(from, target.name), join(out, 'prebuilds', target.name), () => true);
}

// The manifest and the bundle hash (the boot script computes it the same way).
const files = [];
const walk = (dir) => {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path);
    else {
      const bytes = readFileSync(path);
      files.push({
        path: relative(out, path).split('\\').join('/'),
        size: bytes.length,
        sha256: createHash('sha256').update(bytes).digest('hex'),
        mode: statSync(path).mode & 0o777,
      });
    }
  }
};
walk(out);
files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
const hash = createHash('sha256')
  .update(files.map((f) => `${f.path}\0${f.sha256}\n`).join(''))
  .digest('hex')
  .slice(0, 24);
writeFileSync(join(out, 'manifest.json'), `${JSON.stringify({ hash, platforms, files }, null, 2)}\n`);
const total = files.reduce((n, f) => n + f.size, 0);
process.stdout.write(
  `exec-server bundle ${hash}: ${files.length} files, ${(total / 1024).toFixed(0)} KiB, node-pty for ${platforms.join(', ')}\n`,
);
