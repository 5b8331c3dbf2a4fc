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
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { bin, buildPackages, packPackage, ROOT, workspacePackages } from './workspace-packages.mjs';

// `pnpm check:packages [name ...]` checks only the named packages.
const only = process.argv.slice(2);
const all = workspacePackages();
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
buildPackages(packages.map(({ manifest }) => manifest.name));

const out = mkdtempSync(join(tmpdir(), 'conch-check-packages-'));
try {
  for (const { dir, manifest } of packages) {
    const where = relative(ROOT, dir);
    console.log(`\n=== ${manifest.name} (${where})`);
    let tarball;
    try {
      tarball = packPackage(dir, out);
    } catch (error) {
      console.log(`${error.stdout ?? ''}${error.stderr ?? ''}`.trimEnd() || error.message);
      failures.push(`${manifest.name}: pnpm pack failed`);
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
