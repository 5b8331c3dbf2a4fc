#!/usr/bin/env node
// `node scripts/pack-for-install.mjs <dir>`: the install recipe for a host project while the
// packages are not on the npm registry. Builds and packs every publishable workspace package the
// way `pnpm publish` would (see scripts/workspace-packages.mjs, which `pnpm check:packages` packs
// with too) into <dir>, and writes <dir>/INSTALL.md: what to run in the host project, for npm and
// for pnpm 10. docs/src/packed-install.test.ts runs this and both installs from INSTALL.md.
//
// Why a tarball of every package, and overrides for pnpm: each tarball depends on the other
// @conch/* packages by version (`workspace:*` became `0.0.0`), which no registry has. npm takes a
// tarball named on the command line as the package for that name everywhere in the tree; pnpm
// resolves a dependency's range from the registry unless `pnpm.overrides` points it at a file.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildPackages, packPackage, workspacePackages } from './workspace-packages.mjs';

const [target, ...rest] = process.argv.slice(2);
if (!target || rest.length > 0 || target.startsWith('-')) {
  console.error('usage: node scripts/pack-for-install.mjs <dir>   (the directory the tarballs go to)');
  process.exit(2);
}
const out = resolve(target);
mkdirSync(out, { recursive: true });

const packages = workspacePackages().filter(({ manifest }) => manifest.private !== true);
buildPackages(packages.map(({ manifest }) => manifest.name));
const packed = packages.map(({ dir, manifest }) => {
  let tarball;
  try {
    tarball = join(out, packPackage(dir, out));
  } catch (error) {
    // pnpm's stderr has been shown already.
    console.error(String(error.stdout ?? '').trim() || error.message);
    console.error(`pack-for-install: pnpm pack failed for ${manifest.name}`);
    process.exit(1);
  }
  console.log(`packed ${manifest.name} -> ${tarball}`);
  return { name: manifest.name, tarball };
});

/** A word for sh: as is when it is plain, else single-quoted. */
const shWord = (s) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);
const tarballs = packed.map(({ tarball }) => shWord(tarball)).join(' ');
const overrides = Object.fromEntries(packed.map(({ name, tarball }) => [name, `file:${tarball}`]));

const guide = `# Installing conch from these tarballs

Every \`@conch/*\` package, packed by \`node scripts/pack-for-install.mjs\` as \`pnpm publish\`
would. Run the lines below in your project's directory (the one with its package.json). The
tarballs depend on each other by version, which the npm registry does not have yet, so each
install below points every \`@conch/*\` name at its tarball here: keep this directory.

## npm

\`\`\`sh
npm install ${tarballs}
\`\`\`

## pnpm 10

Add the overrides to your package.json first (merged into its \`"pnpm"\` key if it has one), so
that each tarball's own \`@conch/*\` dependencies resolve to these tarballs; then add them (or only
the ones you use: the overrides bring in their \`@conch/*\` dependencies):

\`\`\`json
${JSON.stringify({ pnpm: { overrides } }, null, 2)}
\`\`\`

\`\`\`sh
pnpm add ${tarballs}
\`\`\`
`;
writeFileSync(join(out, 'INSTALL.md'), guide);
console.log(`\n${join(out, 'INSTALL.md')}:\n\n${guide}`);
