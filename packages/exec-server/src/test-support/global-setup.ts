// Builds dist/ and the server bundle once before the tests: targets run dist/server-bundle
// (esbuild of src/server/main.ts with the built @conch/process, @conch/terminal and @conch/core),
// and host scripts that must die by SIGKILL import dist/index.js.
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
  execFileSync(process.execPath, [join(pkg, 'scripts', 'bundle.mjs')], { cwd: pkg, stdio: 'inherit' });
}
