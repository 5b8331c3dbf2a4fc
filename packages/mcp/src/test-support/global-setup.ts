// Builds dist once so the tests drive the real conch-mcp bin.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { PACKAGE_DIR } from './harness.js';

export default function setup(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: PACKAGE_DIR, stdio: 'inherit' });
}
