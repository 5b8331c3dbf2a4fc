// `pnpm check:packages`: packs every publishable workspace package the way `pnpm publish` would
// (workspace: and catalog: ranges replaced, prepack run: @conch/mcp's self-contained bundle) and
// lints each tarball with publint (--strict: warnings fail) and @arethetypeswrong/cli.
//
// attw runs with `--profile esm-only`: every package is ESM only by convention ("type": "module",
// an exports map with `types` + `import` and no `require` condition), so the two resolutions that
// model CommonJS consumers are not goals: `node16 (from CJS)` (it reports "ESM, dynamic import
// only", as for every ESM-only package; Node >= 20.19, our engines floor, can require() ESM anyway)
// and `node10` (TypeScript's legacy resolution without exports maps). Everything else fails the run.
//
// Private workspace packages (the demo app, the bench, the examples) are never published: skipped.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => join(ROOT, 'node_modules', '.bin', name);

/** pnpm as this script was started with (`pnpm check:packages`), else pnpm 10 through npx. */
function pnpm(args, cwd) {
  const execpath = process.env.npm_execpath;
  if (execpath && /pnpm/.test(basename(execpath))) {
    return execFileSync(process.execPath, [execpath, ...args], { cwd, encoding: 'utf8' });
  }
  return execFileSync('npx', ['-y', 'pnpm@10', ...args], { cwd, encoding: 'utf8' });
}

/** Workspace package directories from pnpm-workspace.yaml (`dir/*` and `dir` entries). */
function workspaceDirs() {
  const yaml = readFileSync(join(ROOT, 'pnpm-workspace.yaml'), 'utf8');
  const dirs = [];
  let inPackages = false;
  for (const line of yaml.split('\n')) {
    if (/^\S/.test(line)) inPackages = line.trim() === 'packages:';
    else if (inPackages) {
      const m = /^\s+-\s+['"]?([^'"]+?)['"]?\s*$/.exec(line);
      if (!m) continue;
      const pattern = m[1];
      if (pattern.endsWith('/*')) {
        const parent = join(ROOT, pattern.slice(0, -2));
        for (const entry of existsSync(parent) ? readdirSync(parent).sort() : [])
          dirs.push(join(parent, entry));
      } else dirs.push(join(ROOT, pattern));
    }
  }
  return dirs.filter((dir) => existsSync(join(dir, 'package.json')));
}

// `pnpm check:packages [name ...]` checks only the named packages.
const only = process.argv.slice(2);
const all = workspaceDirs().map((dir) => ({
  dir,
  manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')),
}));
const packages = all
  .filter(({ manifest }) => manifest.private !== true)
  .filter(({ manifest }) => only.length === 0 || only.includes(manifest.name));
const skipped = all.filter(({ manifest }) => manifest.private === true).length;
for (const name of only) {
  if (!packages.some(({ manifest }) => manifest.name === name)) {
    console.error(`check:packages: no publishable workspace package named ${name}`);
    process.exit(1);
  }
}

// One Node range everywhere: the root's (20.19+, 22 and 24 are the lines CI and the README name).
const engines = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).engines?.node;
const failures = [];
for (const { dir, manifest } of all) {
  if (manifest.engines?.node !== engines) {
    failures.push(
      `${relative(ROOT, dir)}: engines.node is ${JSON.stringify(manifest.engines?.node)}, not ${engines}`,
    );
  }
}

// The tarballs are made from dist: build what is stale (cached by turbo otherwise).
execFileSync(
  bin('turbo'),
  [
    'run',
    'build',
    '--output-logs=errors-only',
    ...packages.map(({ manifest }) => `--filter=${manifest.name}`),
  ],
  { cwd: ROOT, stdio: 'inherit' },
);

const out = mkdtempSync(join(tmpdir(), 'conch-check-packages-'));
try {
  for (const { dir, manifest } of packages) {
    const where = relative(ROOT, dir);
    console.log(`\n=== ${manifest.name} (${where})`);
    const before = new Set(readdirSync(out));
    try {
      pnpm(['pack', '--pack-destination', out], dir);
    } catch (error) {
      console.log(`${error.stdout ?? ''}${error.stderr ?? ''}`.trimEnd());
      failures.push(`${manifest.name}: pnpm pack failed`);
      continue;
    }
    const tarball = readdirSync(out).find((f) => !before.has(f) && f.endsWith('.tgz'));
    if (!tarball) {
      failures.push(`${manifest.name}: pnpm pack made no tarball`);
      continue;
    }
    for (const [tool, args] of [
      ['publint', ['run', join(out, tarball), '--strict']],
      ['attw', [join(out, tarball), '--profile', 'esm-only', '--format', 'ascii', '--no-emoji']],
    ]) {
      try {
        const text = execFileSync(bin(tool), args, { cwd: out, encoding: 'utf8', stdio: 'pipe' });
        console.log(text.trimEnd());
      } catch (error) {
        console.log(`${error.stdout ?? ''}${error.stderr ?? ''}`.trimEnd());
        failures.push(`${manifest.name}: ${tool} failed`);
      }
    }
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}

console.log(
  `\ncheck:packages: ${packages.length} publishable packages checked (${skipped} private skipped), ${failures.length} failed`,
);
for (const failure of failures) console.log(`  - ${failure}`);
process.exit(failures.length > 0 ? 1 : 0);
