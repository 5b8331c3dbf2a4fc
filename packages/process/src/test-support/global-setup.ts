// Builds dist/ once before the tests: the supervisor runs as a separate node process from
// dist/supervisor-main.js (node cannot run the .ts sources), and host scripts import dist/index.js;
// the supervisor's posix_spawn addon is built into dist/ too (--require: a test run where it cannot
// be built fails here rather than quietly testing node's spawn twice).
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const pkg = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  execFileSync(
    process.execPath,
    [join(pkg, '../../node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: pkg,
      stdio: 'inherit',
    },
  );
  execFileSync(process.execPath, [join(pkg, 'scripts', 'build-native.mjs'), '--require'], {
    cwd: pkg,
    stdio: 'inherit',
  });
}
