// Builds dist/ once before the tests: the supervisor runs as a separate node process from
// dist/supervisor-main.js (node cannot run the .ts sources), and host scripts import dist/index.js.
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
}
