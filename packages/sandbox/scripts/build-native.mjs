#!/usr/bin/env node
// Builds native/conch_guard.c into dist/conch-guard: the sandbox's path guard (see src/guard.ts).
// Run by this package's `build` in a checkout; a user's install runs nothing: the package ships the
// guard prebuilt (prebuilds/linux-{x64,arm64}/, static; see the repository's
// scripts/prebuild-native.mjs), and a build from source here, when there is one, is used before it.
// Optional by design: where it cannot be built (not Linux x86_64/aarch64, no C compiler) it says why
// on stderr and exits 0; the prebuilt guard is used, and without one sandboxes run without the
// guard: their protections are bubblewrap's mounts alone, which hold for the paths as they were at
// the sandbox's start (`status().sandbox.guard` says so). `--require` makes a failure exit 1
// instead. Self-contained (node built-ins only).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { arch } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = join(ROOT, 'native', 'conch_guard.c');
const OUT = join(ROOT, 'dist', 'conch-guard');
const required = process.argv.includes('--require');

function skip(reason) {
  const prebuilt = join(ROOT, 'prebuilds', `linux-${arch()}`, 'conch-guard');
  process.stderr.write(
    `conch: the sandbox guard was not built here (${reason}); ${existsSync(prebuilt) ? `the prebuilt one (prebuilds/linux-${arch()}) is used` : 'sandboxes will rely on their mounts alone'}\n`,
  );
  rmSync(OUT, { force: true });
  process.exit(required ? 1 : 0);
}

if (process.platform !== 'linux') skip(`${process.platform}: it is built for Linux only`);
if (arch() !== 'x64' && arch() !== 'arm64') skip(`${arch()}: it is built for x64 and arm64 only`);
const cc = process.env.CC || 'cc';
const tmp = `${OUT}.${process.pid}.tmp`;
mkdirSync(dirname(OUT), { recursive: true });
try {
  execFileSync(cc, ['-O2', '-pthread', SOURCE, '-o', tmp], { stdio: ['ignore', 'ignore', 'pipe'] });
  renameSync(tmp, OUT);
} catch (error) {
  rmSync(tmp, { force: true });
  const stderr = String(error.stderr ?? '')
    .trim()
    .split('\n')
    .slice(-3)
    .join(' | ');
  skip(
    error.code === 'ENOENT'
      ? `no C compiler: ${cc} was not found`
      : `${cc} failed: ${stderr || error.message}`,
  );
}
