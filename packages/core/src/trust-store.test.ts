// The trust store lives outside every workspace (0700 dir, 0600 file), is rewritten whole and atomically under a lock, survives a corrupt file, and insideWorkspace() judges real paths.
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { tempDir } from '@conch/test-support';
import { pino } from 'pino';
import { describe, expect, test } from 'vitest';
import { defaultTrustStorePath, insideWorkspace, TrustStore } from './trust-store.js';

const temp = (prefix: string) => realpathSync(tempDir(prefix));

function logged() {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: pino({ level: 'info' }, sink) };
}

describe('defaultTrustStorePath', () => {
  test('$XDG_STATE_HOME/conch/trust.json, else ~/.local/state/conch/trust.json (a relative XDG_STATE_HOME is ignored)', () => {
    expect(defaultTrustStorePath({ XDG_STATE_HOME: '/x/state', HOME: '/home/u' })).toBe(
      '/x/state/conch/trust.json',
    );
    expect(defaultTrustStorePath({ HOME: '/home/u' })).toBe('/home/u/.local/state/conch/trust.json');
    expect(defaultTrustStorePath({ XDG_STATE_HOME: 'state', HOME: '/home/u' })).toBe(
      '/home/u/.local/state/conch/trust.json',
    );
  });
});

describe('TrustStore', () => {
  test('a missing file reads as empty; an update creates a 0700 dir and a 0600 file, leaving no temp file', async () => {
    const root = temp('conch-store-');
    const file = join(root, 'state', 'conch', 'trust.json');
    const store = new TrustStore({ file });
    expect(await store.read()).toEqual({ version: 1, workspaces: {}, pins: {} });
    expect(
      await store.update((state) => {
        state.workspaces['/w'] = { since: 'now' };
        state.pins['/w/conch.config.json'] = { kind: 'config', digest: 'none', pinnedAt: 'now' };
      }),
    ).toBe(true);
    expect(statSync(join(root, 'state', 'conch')).mode & 0o777).toBe(0o700);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(root, 'state', 'conch'))).toEqual(['trust.json']);
    expect((await store.read()).pins['/w/conch.config.json']).toMatchObject({ digest: 'none' });
  });

  test('pins outside every workspace are dropped at the next write', async () => {
    const file = join(temp('conch-store-'), 'trust.json');
    const store = new TrustStore({ file });
    await store.update((state) => {
      state.workspaces['/w'] = { since: 'now' };
      state.pins['/w/a'] = { kind: 'plugin', digest: 'sha256:1', pinnedAt: 'now' };
      state.pins['/elsewhere/b'] = { kind: 'plugin', digest: 'sha256:2', pinnedAt: 'now' };
    });
    expect(Object.keys((await store.read()).pins)).toEqual(['/w/a']);
  });

  test('workspaces under the temp dir that are gone are forgotten; others are kept though missing', async () => {
    const file = join(temp('conch-store-'), 'trust.json');
    const gone = join(temp('conch-store-gone-'), 'ws');
    const kept = temp('conch-store-kept-');
    const store = new TrustStore({ file });
    await store.update((state) => {
      for (const w of [gone, kept, '/no/such/disk/ws']) state.workspaces[w] = { since: 'now' };
    });
    expect(Object.keys((await store.read()).workspaces).sort()).toEqual(['/no/such/disk/ws', kept].sort());
  });

  test('a corrupt file reads as empty, logged once per process; the next update rewrites it', async () => {
    const file = join(temp('conch-store-'), 'trust.json');
    writeFileSync(file, 'not json at all');
    const { lines, logger } = logged();
    const store = new TrustStore({ file, logger });
    expect(await store.read()).toEqual({ version: 1, workspaces: {}, pins: {} });
    expect(await store.read()).toEqual({ version: 1, workspaces: {}, pins: {} });
    const warnings = lines.filter((l) => l.msg.includes('is not a valid trust store'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.level).toBe(40);
    expect(warnings[0]?.msg).toContain(file);
    await store.update((state) => {
      state.workspaces['/w'] = { since: 'now' };
    });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ version: 1, workspaces: { '/w': {} } });
  });

  // Each store reads and writes the file on its own, through the O_EXCL lock file, as separate processes do.
  test('concurrent updates from many stores on one file lose nothing (the lock)', async () => {
    const file = join(temp('conch-store-'), 'trust.json');
    const writers = Array.from({ length: 24 }, (_, i) => i);
    const results = await Promise.all(
      writers.map((i) =>
        new TrustStore({ file }).update((state) => {
          state.workspaces[`/w${i}`] = { since: 'now' };
        }),
      ),
    );
    expect(results.every(Boolean)).toBe(true);
    expect(Object.keys((await new TrustStore({ file }).read()).workspaces).sort()).toEqual(
      writers.map((i) => `/w${i}`).sort(),
    );
  });

  test('a lock left by a process that is gone is broken; a live one is waited for, then given up (logged)', async () => {
    const file = join(temp('conch-store-'), 'trust.json');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
      encoding: 'utf8',
    });
    writeFileSync(`${file}.lock`, `${dead.stdout}\n`);
    expect(
      await new TrustStore({ file }).update((s) => {
        s.workspaces['/a'] = { since: 'now' };
      }),
    ).toBe(true);
    writeFileSync(`${file}.lock`, `${process.pid}\n`);
    const { lines, logger } = logged();
    expect(
      await new TrustStore({ file, logger, lockTimeoutMs: 100 }).update((s) => {
        s.workspaces['/b'] = { since: 'now' };
      }),
    ).toBe(false);
    expect(lines.some((l) => l.msg.includes('is held by another conch process'))).toBe(true);
    expect(Object.keys((await new TrustStore({ file }).read()).workspaces)).toEqual(['/a']);
  });
});

describe('insideWorkspace', () => {
  test('judges real paths: a link inside pointing out is outside, a link outside pointing in is inside', async () => {
    const root = temp('conch-inside-');
    const ws = join(root, 'ws');
    const out = join(root, 'out');
    mkdirSync(join(ws, 'sub'), { recursive: true });
    mkdirSync(out);
    symlinkSync(out, join(ws, 'link-out'));
    symlinkSync(join(ws, 'sub'), join(out, 'link-in'));
    expect(await insideWorkspace(join(ws, 'sub'), ws)).toBe(true);
    expect(await insideWorkspace(ws, ws)).toBe(true);
    expect(await insideWorkspace(join(ws, 'link-out', 'x'), ws)).toBe(false);
    expect(await insideWorkspace(join(out, 'link-in'), ws)).toBe(true);
    // Not yet existing paths resolve as far as they exist.
    expect(await insideWorkspace(join(ws, 'new', 'file.json'), ws)).toBe(true);
    // A sibling whose name starts with the workspace's is not inside it.
    mkdirSync(`${ws}-other`);
    expect(await insideWorkspace(`${ws}-other`, ws)).toBe(false);
    // The workspace given through a link is the same workspace.
    symlinkSync(ws, join(root, 'alias'));
    expect(await insideWorkspace(join(ws, 'sub'), join(root, 'alias'))).toBe(true);
  });
});
