// Invariant: output kept for a model lives in the per-user output directory and outlives the manager that wrote it; small outputs never touch it; files older than 7 days there are pruned when a new one is written.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultOutputDir, prepareOutputDir } from './output-dir.js';
import { ProcessManager } from './process-manager.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'conch-output-dir-'));
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('output files for a model', () => {
  it('defaults to the XDG cache directory', () => {
    expect(defaultOutputDir({ XDG_CACHE_HOME: '/c' })).toBe('/c/conch/output');
    expect(defaultOutputDir({ HOME: '/home/u' })).toBe('/home/u/.cache/conch/output');
    // One directory per workspace: a sandbox is shown its own workspace's files only.
    const a = defaultOutputDir({ HOME: '/home/u' }, '/home/u/src/a');
    expect(a).toMatch(/^\/home\/u\/\.cache\/conch\/output\/ws-[0-9a-f]{16}$/);
    expect(defaultOutputDir({ HOME: '/home/u' }, '/home/u/src/b')).not.toBe(a);
    expect(defaultOutputDir({ HOME: '/home/u' }, '/home/u/src/a')).toBe(a);
    expect(defaultOutputDir({ HOME: '/home/u', XDG_CACHE_HOME: 'relative' })).toBe(
      '/home/u/.cache/conch/output',
    );
    // The workspace's key is its path's sha256 (made once per path), the same for every HOME and
    // for as many workspaces as a host has.
    const key = (ws: string) => createHash('sha256').update(ws).digest('hex').slice(0, 16);
    for (let round = 0; round < 2; round++)
      for (let i = 0; i < 2100; i += 7) {
        const ws = `/w/${i}/é ${round}`;
        expect(defaultOutputDir({ XDG_CACHE_HOME: `/c${i}` }, ws)).toBe(`/c${i}/conch/output/ws-${key(ws)}`);
      }
    expect(defaultOutputDir({ HOME: '/h' }, '/home/u/src/a')).toBe(
      `/h/.cache/conch/output/${a.split('/').pop()}`,
    );
  });

  it('puts a large spill in outputDir, readable after dispose; a small output writes no file', async () => {
    const temp = join(root, 'temp');
    const out = join(root, 'out');
    mkdirSync(temp);
    const manager = new ProcessManager({ tempDir: () => temp, cwd: root, outputDir: out });
    const big = manager.spawn('seq 1 200000', [], {
      shell: true,
      capture: { headBytes: 1024, tailBytes: 1024, spill: 'combined', outputDir: true },
    });
    const small = manager.spawn('echo small', [], {
      shell: true,
      capture: { headBytes: 1024, tailBytes: 1024, spill: 'combined', outputDir: true },
    });
    const result = await big.result;
    await small.result;
    expect(result.outputFile).toBeDefined();
    expect(dirname(result.outputFile!)).toBe(out);
    // Named when it was opened: a UTC stamp, the command's cookie, random bytes.
    expect(result.outputFile!.split('/').pop()).toMatch(/^\d{8}T\d{6}Z-[A-Za-z0-9._-]+-[0-9a-f]{6}\.out$/);
    expect(readdirSync(out)).toHaveLength(1);
    expect(readdirSync(temp)).toEqual([]);
    await manager.dispose();
    const text = readFileSync(result.outputFile!, 'utf8');
    expect(text.startsWith('1\n2\n')).toBe(true);
    expect(text.endsWith('199999\n200000\n')).toBe(true);
  });

  it('prunes files older than 7 days when a new file is written', () => {
    const out = join(root, 'prune');
    mkdirSync(out);
    writeFileSync(join(out, 'old.txt'), 'old');
    writeFileSync(join(out, 'recent.txt'), 'recent');
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000);
    utimesSync(join(out, 'old.txt'), eightDaysAgo, eightDaysAgo);
    prepareOutputDir(out);
    expect(existsSync(join(out, 'old.txt'))).toBe(false);
    expect(existsSync(join(out, 'recent.txt'))).toBe(true);
  });
});

describe('supervisorPids', () => {
  it('names the running supervisor (not the host), and nothing once disposed', async () => {
    const manager = new ProcessManager({ tempDir: () => root, cwd: root });
    expect(manager.supervisorPids()).toEqual([]);
    const proc = manager.spawn('true');
    await proc.result;
    const pids = manager.supervisorPids();
    expect(pids.length).toBeGreaterThan(0);
    expect(pids).not.toContain(process.pid);
    for (const pid of pids) {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1');
      expect(cmdline).toMatch(/supervisor-main\.js|bwrap/);
    }
    await manager.dispose();
    expect(manager.supervisorPids()).toEqual([]);
  });
});
