// Invariant: the path guards shipped in prebuilds/ are built from today's native/conch_guard.c (a
// change to the source without `pnpm native:prebuild` fails here), are static executables of their
// machine (so they run on glibc and musl alike), and the one for this machine passes the same probe
// the sandbox asks of any guard before it uses one.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BUILT_GUARD_BINARY,
  executableGuard,
  GUARD_BINARY,
  guardAvailability,
  PREBUILT_GUARD_BINARY,
} from './guard.js';
import { findBwrap } from './find-bwrap.js';

const PKG = join(dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(join(PKG, 'prebuilds', 'manifest.json'), 'utf8')) as {
  source: string;
  sourceSha256: string;
  targets: Record<string, { file: string; sha256: string }>;
};
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
const MACHINES: Record<string, number> = { x64: 62, arm64: 183 }; // ELF e_machine

/** Whether an ELF file has a PT_INTERP program header (a dynamic loader to run it). */
function hasInterpreter(elf: Buffer): boolean {
  const phoff = Number(elf.readBigUInt64LE(32));
  const size = elf.readUInt16LE(54);
  const count = elf.readUInt16LE(56);
  for (let i = 0; i < count; i++) if (elf.readUInt32LE(phoff + i * size) === 3) return true;
  return false;
}

describe('the prebuilt path guards', () => {
  it('are built from the current source, and are the files the manifest lists', () => {
    expect(
      sha256(join(PKG, manifest.source)),
      'native/conch_guard.c changed since the prebuilt guards were made: run `pnpm native:prebuild` (see scripts/prebuild-native.mjs)',
    ).toBe(manifest.sourceSha256);
    expect(Object.keys(manifest.targets).sort()).toEqual(['linux-arm64', 'linux-x64']);
    for (const [target, entry] of Object.entries(manifest.targets)) {
      expect(entry.file).toBe(`prebuilds/${target}/conch-guard`);
      expect(sha256(join(PKG, entry.file)), target).toBe(entry.sha256);
    }
  });

  it.each(Object.keys(manifest.targets))('%s is a static executable of its machine', (target) => {
    const elf = readFileSync(join(PKG, manifest.targets[target]!.file));
    expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elf.readUInt16LE(16)).toBe(2); // ET_EXEC
    expect(elf.readUInt16LE(18)).toBe(MACHINES[target.split('-')[1]!]);
    expect(hasInterpreter(elf)).toBe(false);
  });

  it.runIf(process.platform === 'linux' && process.arch === 'x64')(
    "this machine's passes the sandbox's probe",
    () => {
      expect(PREBUILT_GUARD_BINARY).toBe(join(PKG, 'prebuilds', 'linux-x64', 'conch-guard'));
      expect(guardAvailability(PREBUILT_GUARD_BINARY, {})).toMatchObject({
        available: true,
        binary: PREBUILT_GUARD_BINARY,
      });
      // The local build is preferred while there is one (it follows the source).
      expect(GUARD_BINARY).toBe(BUILT_GUARD_BINARY);
    },
  );

  // Package managers drop file modes (`pnpm pack` writes 0644): the guard is made executable where
  // it lies, or copied to the user's cache when its directory is not this user's to change.
  describe.runIf(process.platform === 'linux' && process.arch === 'x64')(
    'a guard installed without its mode',
    () => {
      let dir: string;
      beforeEach(() => {
        dir = mkdtempSync(join(tmpdir(), 'conch-guard-mode-'));
        mkdirSync(join(dir, 'pkg'));
        copyFileSync(PREBUILT_GUARD_BINARY, join(dir, 'pkg', 'conch-guard'));
        chmodSync(join(dir, 'pkg', 'conch-guard'), 0o644);
      });
      afterEach(() => rmSync(dir, { recursive: true, force: true }));

      it('is made executable in place', () => {
        const file = join(dir, 'pkg', 'conch-guard');
        expect(executableGuard(file, { XDG_CACHE_HOME: join(dir, 'cache') })).toBe(file);
        expect(statSync(file).mode & 0o111).not.toBe(0);
        expect(guardAvailability(file, {})).toMatchObject({ available: true });
      });

      it.runIf(findBwrap() || process.env.CI)(
        'is copied to the cache, once, when its directory is read-only',
        () => {
          const file = join(dir, 'pkg', 'conch-guard');
          const cache = join(dir, 'cache');
          mkdirSync(cache);
          // A node that sees the package read-only (as a root-owned global install is to a user).
          const script = `import(${JSON.stringify(pathToFileURL(join(PKG, 'dist', 'guard.js')).href)}).then((m) => console.log(m.executableGuard(${JSON.stringify(file)}, { XDG_CACHE_HOME: ${JSON.stringify(cache)} })))`;
          const run = () =>
            spawnSync(
              findBwrap()!,
              [
                '--dev-bind',
                '/',
                '/',
                '--ro-bind',
                join(dir, 'pkg'),
                join(dir, 'pkg'),
                process.execPath,
                '-e',
                script,
              ],
              { encoding: 'utf8' },
            );
          const first = run();
          expect(first.status, first.stderr).toBe(0);
          const copy = first.stdout.trim();
          expect(copy.startsWith(join(cache, 'conch', 'guard'))).toBe(true);
          expect(statSync(file).mode & 0o111).toBe(0); // the original untouched
          expect(readFileSync(copy).equals(readFileSync(file))).toBe(true);
          expect(guardAvailability(copy, {})).toMatchObject({ available: true });
          // Reused while it is the same bytes; a changed copy is written over.
          const made = statSync(copy).ino;
          expect(run().stdout.trim()).toBe(copy);
          expect(statSync(copy).ino).toBe(made);
          writeFileSync(copy, '#!/bin/sh\necho replaced\n', { mode: 0o755 });
          expect(run().stdout.trim()).toBe(copy);
          expect(readFileSync(copy).equals(readFileSync(file))).toBe(true);
        },
      );
    },
  );

  // With qemu-user (qemu-user-static), the arm64 one starts and reaches its own checks; qemu does
  // not emulate seccomp's user notification, so its probe stops there with its own message.
  const qemu = spawnSync('qemu-aarch64-static', ['--version']).status === 0;
  it.runIf(qemu || process.env.CI)('the arm64 one runs on arm64 (emulated)', () => {
    const run = spawnSync(
      'qemu-aarch64-static',
      [join(PKG, manifest.targets['linux-arm64']!.file), '--probe'],
      {
        encoding: 'utf8',
      },
    );
    expect(`${run.stdout}${run.stderr}`).toMatch(/^conch-guard: |"ok":true/);
  });
});
