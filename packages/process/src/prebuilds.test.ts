// Invariant: the posix_spawn addons shipped in prebuilds/ are built from today's native/conch_spawn.c
// (a change to the source without `pnpm native:prebuild` fails here), each is the ELF its target
// names (machine, libc), the one for this machine loads and spawns as the local build does, and the
// posix_spawn paths of kernels without close_range (glibc's closefrom action, the musl builds'
// close-on-exec marking) leave a child no fd beyond 0-2.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSpawner, NATIVE_SPAWN_ADDON, prebuiltSpawnAddon, runningOnMusl } from './native-spawn.js';

const PKG = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(join(PKG, 'prebuilds', 'manifest.json'), 'utf8')) as {
  source: string;
  sourceSha256: string;
  targets: Record<string, { file: string; sha256: string; libc: string }>;
};
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
const MACHINES: Record<string, number> = { x64: 62, arm64: 183 }; // ELF e_machine
const tmp = mkdtempSync(join(tmpdir(), 'conch-prebuilds-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the prebuilt posix_spawn addons', () => {
  it('are built from the current source, and are the files the manifest lists', () => {
    expect(
      sha256(join(PKG, manifest.source)),
      'native/conch_spawn.c changed since the prebuilt addons were made: run `pnpm native:prebuild` (see scripts/prebuild-native.mjs)',
    ).toBe(manifest.sourceSha256);
    expect(Object.keys(manifest.targets).sort()).toEqual([
      'linux-arm64-glibc',
      'linux-arm64-musl',
      'linux-x64-glibc',
      'linux-x64-musl',
    ]);
    for (const [target, entry] of Object.entries(manifest.targets)) {
      expect(entry.file).toBe(`prebuilds/${target}/conch_spawn.node`);
      expect(sha256(join(PKG, entry.file)), target).toBe(entry.sha256);
    }
  });

  it.each(Object.keys(manifest.targets))('%s is a shared object for its machine and libc', (target) => {
    const [, arch, libc] = target.split('-') as [string, string, string];
    const elf = readFileSync(join(PKG, manifest.targets[target]!.file));
    expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elf[4]).toBe(2); // 64-bit
    expect(elf.readUInt16LE(16)).toBe(3); // ET_DYN: a shared object
    expect(elf.readUInt16LE(18)).toBe(MACHINES[arch]);
    const text = elf.toString('latin1');
    if (libc === 'glibc') {
      // Linked against glibc, with the version its posix_spawn_file_actions_addclosefrom_np needs:
      // an older glibc refuses it at load (and node's spawn is used), never at the first call.
      expect(text).toContain('libc.so.6');
      expect(text).toContain('GLIBC_2.34');
      expect(text).toContain('posix_spawn_file_actions_addclosefrom_np');
    } else {
      // Linked against nothing: musl's symbols come from the libc node runs on; no glibc version.
      expect(text).not.toContain('libc.so.6');
      expect(text).not.toMatch(/GLIBC_\d/);
      expect(text).not.toContain('addclosefrom_np');
      expect(text).not.toContain('strerrorname_np');
    }
  });

  // musl's own libc, when installed (CI's musl-tools): every symbol the x64 musl addon needs is one
  // musl exports, or Node-API's.
  const muslLibc = '/usr/lib/x86_64-linux-musl/libc.so';
  it.runIf(existsSync(muslLibc) || process.env.CI)(
    'the x64 musl addon needs only what musl and Node-API give',
    () => {
      const symbols = (args: string[]) =>
        execFileSync('nm', args, { encoding: 'utf8' })
          .split('\n')
          .map((line) => line.trim().split(/\s+/).pop()!)
          .filter(Boolean);
      const exported = new Set(symbols(['-D', '--defined-only', muslLibc]));
      const needed = symbols(['-D', '--undefined-only', join(PKG, manifest.targets['linux-x64-musl']!.file)]);
      expect(needed.length).toBeGreaterThan(10);
      expect(needed.filter((name) => !name.startsWith('napi_') && !exported.has(name))).toEqual([]);
    },
  );

  it("tells musl from glibc by the loader mapped in node's process", () => {
    expect(runningOnMusl()).toBe(false); // this machine: Debian, glibc
    expect(runningOnMusl('7f0000-7f1000 r-xp 00000000 08:01 42 /lib/ld-musl-x86_64.so.1\n')).toBe(true);
    expect(runningOnMusl('7f0000-7f1000 r-xp 00000000 08:01 42 /lib/ld-musl-aarch64.so.1\n')).toBe(true);
    expect(runningOnMusl('7f0000-7f1000 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6\n')).toBe(
      false,
    );
  });

  it('the one for this machine is what loadSpawner takes when nothing was built here', () => {
    if (process.platform !== 'linux' || process.arch !== 'x64') return; // the runtime checks below are x64 glibc
    expect(prebuiltSpawnAddon()).toBe(join(PKG, 'prebuilds', 'linux-x64-glibc', 'conch_spawn.node'));
    expect(loadSpawner({}, prebuiltSpawnAddon()).kind).toBe('posix_spawn');
  });
});

/**
 * Runs a fresh node that loads `addon` and spawns through it, with an fd (3) it inherited without
 * close-on-exec, as a supervisor might: the child must still see only 0-2. Returns what it saw.
 */
function spawnThrough(addon: string): { fds: string[]; echoed: string; missing: string } {
  const script = `
const m = require(${JSON.stringify(addon)});
const fs = require('fs');
const read = (fd) => { let s = ''; const b = Buffer.alloc(4096); for (let n; (n = fs.readSync(fd, b)) > 0;) s += b.toString('utf8', 0, n); return s; };
const [, , out1] = m.spawn('/bin/sh', ['sh', '-c', 'ls /proc/$$/fd'], '/', ['PATH=/usr/bin:/bin'], false, true);
const fds = read(out1).trim().split('\\n');
const [, inFd, out2] = m.spawn('cat', ['cat'], '/', ['PATH=/usr/bin:/bin'], true, true);
fs.writeSync(inFd, 'through stdin'); fs.closeSync(inFd);
const echoed = read(out2);
let missing = '';
try { m.spawn('no-such-program-here', ['x'], '/', ['PATH=/usr/bin:/bin'], false, true); } catch (e) { missing = e.code + ' ' + e.message; }
console.log(JSON.stringify({ fds, echoed, missing }));`;
  // stdio[3] is a pipe: node's child gets it as fd 3 without FD_CLOEXEC.
  const run = spawnSync(process.execPath, ['-e', script], {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`${addon}: ${run.stderr}`);
  return JSON.parse(run.stdout) as { fds: string[]; echoed: string; missing: string };
}

const cc = spawnSync(process.env.CC || 'cc', ['--version']).status === 0 ? process.env.CC || 'cc' : undefined;

/** The addon's source compiled here with `defines` (undefined without a compiler). */
function compileVariant(name: string, defines: string[]): string | undefined {
  if (!cc) return undefined;
  const include = join(
    dirname(createRequire(import.meta.url).resolve('node-api-headers/package.json')),
    'include',
  );
  const out = join(tmp, `${name}.node`);
  execFileSync(cc, [
    ...defines,
    '-O2',
    '-shared',
    '-fPIC',
    '-I',
    include,
    join(PKG, manifest.source),
    '-o',
    out,
  ]);
  return out;
}

describe.runIf(process.platform === 'linux' && process.arch === 'x64')('spawning through each build', () => {
  const variants: [string, () => string | undefined][] = [
    ['the prebuilt glibc addon', () => join(PKG, 'prebuilds', 'linux-x64-glibc', 'conch_spawn.node')],
    ['the local build', () => (existsSync(NATIVE_SPAWN_ADDON) ? NATIVE_SPAWN_ADDON : undefined)],
    // The posix_spawn path kernels before 5.9 take (no close_range for the vfork path's child),
    // compiled here: with glibc's closefrom action, and as the musl builds compile it (fds marked
    // close-on-exec before the spawn instead).
    ['the posix_spawn path (Linux before 5.9)', () => compileVariant('posix-spawn', ['-DCONCH_NO_VFORK'])],
    [
      'the close-on-exec path of the musl builds (Linux before 5.9)',
      () => {
        const out = compileVariant('noclosefrom', ['-DCONCH_NO_VFORK', '-DCONCH_NO_CLOSEFROM']);
        if (out) expect(readFileSync(out).toString('latin1')).not.toContain('addclosefrom_np');
        return out;
      },
    ],
  ];
  it.runIf(cc || process.env.CI).each(variants)(
    "%s: no inherited fd, stdin and stdout, node's error codes",
    (_name, make) => {
      const addon = make();
      if (!addon) throw new Error('not built: pnpm build builds it where a C compiler is');
      const seen = spawnThrough(addon);
      expect(seen.fds.sort()).toEqual(['0', '1', '2']);
      expect(seen.echoed).toBe('through stdin');
      expect(seen.missing).toBe('ENOENT spawn no-such-program-here ENOENT');
    },
  );
});
