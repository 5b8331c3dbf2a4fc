#!/usr/bin/env node
// The C compiler the build would use, as an environment variable turbo hashes into the build's
// cache key (turbo.json: build.env CONCH_BUILD_CC). Without it, a first build on a machine with no
// compiler is cached without the native pieces, and a later build after installing one is a cache
// hit that replays the old message and leaves them missing (the prebuilt ones are used meanwhile).
// Imported by scripts/test.mjs; `node scripts/toolchain.mjs <turbo args…>` runs turbo with it (the
// root package's build, typecheck and bench scripts).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `env` with CONCH_BUILD_CC: `<cc>: <its --version line>`, or `<cc>: none`. */
export function toolchainEnv(env = process.env) {
  const cc = env.CC || 'cc';
  const probe = spawnSync(cc, ['--version'], { encoding: 'utf8' });
  const found = probe.status === 0 ? probe.stdout.split('\n')[0].trim() : 'none';
  return { ...env, CONCH_BUILD_CC: `${cc}: ${found}` };
}

/** The turbo binary of this workspace. */
export function turboBin() {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('turbo/package.json')), 'bin', 'turbo');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const run = spawnSync(turboBin(), process.argv.slice(2), { stdio: 'inherit', env: toolchainEnv() });
  if (run.error) throw run.error;
  process.exit(run.status ?? 1);
}
