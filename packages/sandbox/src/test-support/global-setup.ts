// Builds dist/ (the CLI and the init script run from there) and the guard once before the tests (--require: where it cannot be built the suite fails here
// instead of quietly testing sandboxes without it).
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
