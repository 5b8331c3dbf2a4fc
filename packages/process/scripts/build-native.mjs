#!/usr/bin/env node
// Builds native/conch_spawn.c into dist/conch_spawn.node: the supervisor's posix_spawn (see
// src/native-spawn.ts). Run by this package's `build` in a checkout; a user's install runs nothing:
// the package ships the addon prebuilt (prebuilds/, see the repository's scripts/prebuild-native.mjs),
// and a build from source here, when there is one, is loaded before it.
// Optional by design: where it cannot be built (not Linux, glibc older than 2.34, no C compiler,
// no Node-API headers) it says why on stderr and exits 0; the prebuilt addon for this machine is
// used, else node's spawn (`status().spawner` tells which). `--require` makes a failure exit 1.
//
// No node-gyp: the addon is one C file against Node-API's headers (the node-api-headers package,
// else the include/node directory beside this node), so one `cc` call builds it, needs no Python,
// and one build loads in every node release. Self-contained (node built-ins only): the published
// package copies it as is.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = join(ROOT, 'native', 'conch_spawn.c');
const OUT = join(ROOT, 'dist', 'conch_spawn.node');
const required = process.argv.includes('--require');

function prebuilt() {
  if (process.platform !== 'linux' || (process.arch !== 'x64' && process.arch !== 'arm64')) return undefined;
  let family = 'glibc';
  try {
    // As src/native-spawn.ts decides: musl's loader mapped in this node.
    if (/\/ld-musl-[^/\s]+\.so/.test(readFileSync('/proc/self/maps', 'latin1'))) family = 'musl';
  } catch {
    // no /proc: glibc is the likelier
  }
  const target = `linux-${process.arch}-${family}`;
  return existsSync(join(ROOT, 'prebuilds', target, 'conch_spawn.node')) ? target : undefined;
}

function skip(reason) {
  const target = prebuilt();
  process.stderr.write(
    `conch: the native spawner was not built here (${reason}); ${target ? `the prebuilt one (prebuilds/${target}) is used` : "node's spawn is used instead"}\n`,
  );
  rmSync(OUT, { force: true });
  process.exit(required ? 1 : 0);
}

function headers() {
  try {
    const pkg = createRequire(import.meta.url).resolve('node-api-headers/package.json');
    const dir = join(dirname(pkg), 'include');
    if (existsSync(join(dir, 'node_api.h'))) return dir;
  } catch {
    // not installed: try node's own
  }
  const own = resolve(dirname(process.execPath), '..', 'include', 'node');
  return existsSync(join(own, 'node_api.h')) ? own : undefined;
}

if (process.platform !== 'linux') skip(`${process.platform}: it is built for Linux only`);
if (process.env.CONCH_NATIVE_SPAWN === '0') skip('CONCH_NATIVE_SPAWN=0');
const include = headers();
if (!include) skip('no Node-API headers: neither node-api-headers nor <node>/include/node was found');
const cc = process.env.CC || 'cc';
const tmp = `${OUT}.${process.pid}.tmp`;
mkdirSync(dirname(OUT), { recursive: true });
try {
  execFileSync(cc, ['-O2', '-shared', '-fPIC', '-I', include, SOURCE, '-o', tmp], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
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
