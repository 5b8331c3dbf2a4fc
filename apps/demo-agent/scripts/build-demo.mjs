// `pnpm demo` (root): says what it is about to do, then builds the demo and the workspace packages
// it depends on with turbo (cached: only the first run takes minutes). The root script then starts
// dist/main.js with the arguments pnpm forwards.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toolchainEnv } from '../../../scripts/toolchain.mjs';

const APP = dirname(dirname(fileURLToPath(import.meta.url)));
const ROOT = join(APP, '../..');

/** Workspace packages by name (the workspace's packages/, apps/, examples/ folders). */
function workspacePackages() {
  const byName = new Map();
  for (const group of ['packages', 'apps', 'examples']) {
    let dirs = [];
    try {
      dirs = readdirSync(join(ROOT, group));
    } catch {
      continue;
    }
    for (const dir of dirs) {
      try {
        const pkg = JSON.parse(readFileSync(join(ROOT, group, dir, 'package.json'), 'utf8'));
        byName.set(pkg.name, pkg);
      } catch {
        // not a package
      }
    }
  }
  return byName;
}

/** The demo and the workspace packages it needs at run time (what turbo's `...` filter builds). */
function demoPackages() {
  const byName = workspacePackages();
  const seen = new Set();
  const visit = (name) => {
    if (seen.has(name) || !byName.has(name)) return;
    seen.add(name);
    const pkg = byName.get(name);
    for (const [dep, spec] of Object.entries({ ...pkg.dependencies, ...pkg.devDependencies }))
      if (String(spec).startsWith('workspace:')) visit(dep);
  };
  visit('@conch/demo-agent');
  return [...seen].filter((name) => byName.get(name)?.scripts?.build);
}

const count = demoPackages().length;
const first = !existsSync(join(APP, 'dist/main.js'));
process.stderr.write(
  first
    ? `conch demo: building the demo's ${count} packages (the first run takes a few minutes)…\n`
    : `conch demo: checking the demo's ${count} packages are built…\n`,
);
const turbo = spawnSync(
  'turbo',
  ['run', 'build', '--filter=@conch/demo-agent...', '--output-logs=errors-only'],
  // The C compiler found is part of the build's cache key, as for the root scripts.
  { cwd: ROOT, stdio: 'inherit', env: toolchainEnv() },
);
if (turbo.error) {
  process.stderr.write(
    `conch demo: cannot run turbo (${turbo.error.message}); run \`pnpm install\` first.\n`,
  );
  process.exit(1);
}
process.exit(turbo.status ?? 1);
