// Invariant: a conch temp dir whose owner died without removing it (SIGKILL) is removed by the next conch host of the same user, with the Chromium singleton dir its profile names; a live owner's dir, one of another pid namespace, another user's, one without a record and anything reached through a link are never touched.
import { spawn, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { PluginRegistry } from './registry.js';
import { makeTempDir, sweepStaleTempDirs, TEMP_OWNER_FILE } from './temp-dirs.js';

const dist = resolve(fileURLToPath(import.meta.url), '../../dist/index.js');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** A real host process that makes its temp dir in `root` (through `how`), prints it and idles. */
async function hostWithTempDir(root: string, how: 'makeTempDir' | 'registry' = 'makeTempDir') {
  const make =
    how === 'registry'
      ? `new m.PluginRegistry({ tempRoot: ${JSON.stringify(root)} }).tempDir()`
      : `m.makeTempDir('conch-host-', { root: ${JSON.stringify(root)} })`;
  const child = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(dist)}); console.log(${make}); setInterval(() => {}, 1000);`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  children.push(child);
  const dir = await new Promise<string>((done, fail) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) done(out.trim());
    });
    child.once('exit', (code) => fail(new Error(`the host exited (${code}) before printing its dir`)));
  });
  const kill = async () => {
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGKILL');
    await exited;
  };
  return { dir, pid: child.pid!, kill };
}

const record = (dir: string) =>
  JSON.parse(readFileSync(join(dir, TEMP_OWNER_FILE), 'utf8')) as Record<string, unknown>;

/** A dir with a record like a real host's, with `change` applied to it. */
function forged(root: string, name: string, change: Record<string, unknown>): string {
  const mine = makeTempDir('conch-mine-', { root });
  const dir = join(root, name);
  mkdirSync(dir);
  writeFileSync(join(dir, TEMP_OWNER_FILE), JSON.stringify({ ...record(mine), ...change }));
  writeFileSync(join(dir, 'spill.txt'), 'output');
  return dir;
}

describe('stale temp dirs', () => {
  it('a SIGKILLed host’s dir goes at the next sweep; a live host’s stays', async () => {
    const root = tempDir('conch-sweep-');
    const dead = await hostWithTempDir(root);
    const live = await hostWithTempDir(root);
    writeFileSync(join(dead.dir, 'output.txt'), 'spilled');
    expect(record(dead.dir)).toMatchObject({ pid: dead.pid });
    await dead.kill();

    expect(sweepStaleTempDirs(root)).toEqual([dead.dir]);
    expect(existsSync(dead.dir)).toBe(false);
    expect(existsSync(live.dir)).toBe(true);
    expect(sweepStaleTempDirs(root)).toEqual([]);
    await live.kill();
    expect(sweepStaleTempDirs(root)).toEqual([live.dir]);
  });

  it('a registry’s temp dir left by SIGKILL is removed when the next registry makes its own', async () => {
    const root = tempDir('conch-sweep-reg-');
    const dead = await hostWithTempDir(root, 'registry');
    expect(dead.dir.startsWith(join(root, 'conch-'))).toBe(true);
    await dead.kill();
    expect(existsSync(dead.dir)).toBe(true);

    const registry = new PluginRegistry({ tempRoot: root });
    const mine = registry.tempDir();
    expect(existsSync(dead.dir)).toBe(false);
    expect(readdirSync(root)).toEqual([mine.slice(root.length + 1)]);
    await registry.dispose();
    expect(existsSync(mine)).toBe(false);
  });

  it('a kept registry dir (keepTempFiles) has no record and is never swept', async () => {
    const root = tempDir('conch-sweep-keep-');
    const registry = new PluginRegistry({ tempRoot: root, keepTempFiles: true });
    const kept = registry.tempDir();
    expect(existsSync(join(kept, TEMP_OWNER_FILE))).toBe(false);
    await registry.dispose();
    expect(sweepStaleTempDirs(root)).toEqual([]);
    expect(existsSync(kept)).toBe(true);
  });

  it('removes the Chromium singleton dir a dead host’s profile links to, and nothing a link reaches elsewhere', async () => {
    const root = tempDir('conch-sweep-chrome-');
    const elsewhere = tempDir('conch-sweep-elsewhere-');
    const dead = await hostWithTempDir(root);
    // What Chromium leaves: <profile>/SingletonSocket -> $TMPDIR/org.chromium.Chromium.X/SingletonSocket.
    for (const [profile, singletonRoot, name] of [
      ['chrome-profile-a', root, 'org.chromium.Chromium.aaaaaa'],
      ['chrome-profile-b', elsewhere, 'org.chromium.Chromium.bbbbbb'],
      ['chrome-profile-c', root, 'not-chromium'],
    ] as const) {
      mkdirSync(join(singletonRoot, name));
      writeFileSync(join(singletonRoot, name, 'SingletonCookie'), '1');
      mkdirSync(join(dead.dir, profile));
      symlinkSync(join(singletonRoot, name, 'SingletonSocket'), join(dead.dir, profile, 'SingletonSocket'));
    }
    // A link in the dead dir to a directory of ours elsewhere: removed as a link, never followed.
    symlinkSync(elsewhere, join(dead.dir, 'escape'));
    await dead.kill();

    expect(sweepStaleTempDirs(root)).toEqual([dead.dir]);
    expect(existsSync(join(root, 'org.chromium.Chromium.aaaaaa'))).toBe(false);
    expect(existsSync(join(elsewhere, 'org.chromium.Chromium.bbbbbb', 'SingletonCookie'))).toBe(true);
    expect(existsSync(join(root, 'not-chromium', 'SingletonCookie'))).toBe(true);
  });

  it('judges owners by boot, pid namespace, pid and start time, and skips what it cannot read', async () => {
    const root = tempDir('conch-sweep-forged-');
    const me = record(makeTempDir('conch-me-', { root }));
    const gone = await hostWithTempDir(root);
    await gone.kill();
    const stale = [
      forged(root, 'conch-earlier-boot', { boot: '00000000-0000-0000-0000-000000000000' }),
      // This very pid, started at another time: a reused pid.
      forged(root, 'conch-reused-pid', { start: String(Number(me.start) - 1) }),
      forged(root, 'conch-dead-pid', { pid: gone.pid }),
    ];
    const kept = [
      forged(root, 'conch-other-pidns', { pid: gone.pid, pidns: 'pid:[1]' }),
      forged(root, 'conch-malformed', { pid: 'x' }),
      forged(root, 'conch-alive', {}),
      forged(root, 'not-conch-dead', { pid: gone.pid }),
    ];
    const noRecord = join(root, 'conch-no-record');
    mkdirSync(noRecord);
    const linkedRecord = forged(root, 'conch-linked-record', {});
    const target = forged(tempDir('conch-sweep-target-'), 'conch-target', { pid: gone.pid });
    // The record itself a link (to a dead owner's record): not followed.
    rmSync(join(linkedRecord, TEMP_OWNER_FILE));
    symlinkSync(join(target, TEMP_OWNER_FILE), join(linkedRecord, TEMP_OWNER_FILE));
    // A link named conch-* to a dead owner's dir: never followed.
    symlinkSync(target, join(root, 'conch-link'));

    const removed = sweepStaleTempDirs(root);
    expect(removed.sort()).toEqual([...stale, gone.dir].sort());
    for (const dir of [...kept, noRecord, linkedRecord, target]) expect(existsSync(dir)).toBe(true);
    expect(readlinkSync(join(root, 'conch-link'))).toBe(target);
  });

  it.runIf(process.getuid?.() === 0)('leaves another user’s dir even when its owner is dead', async () => {
    const root = tempDir('conch-sweep-uid-');
    const gone = await hostWithTempDir(root);
    await gone.kill();
    chownSync(gone.dir, 65534, 65534);
    expect(sweepStaleTempDirs(root)).toEqual([]);
    expect(existsSync(gone.dir)).toBe(true);
  });
});
