// Invariant: under bubblewrap the root is read-only, the workspace writable, and killing the sandbox leaves nothing alive.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { findBwrap } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BubblewrapExecutor } from './bubblewrap-executor.js';
import { ProcessManager } from './process-manager.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();
let dir: string;
let manager: ProcessManager;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-bwrap-'));
});
afterEach(async () => {
  await manager?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

// Under CI (.ci/run installs bubblewrap) a missing bwrap fails these tests instead of skipping them.
describe.runIf(bwrap || process.env.CI)('BubblewrapExecutor (bwrap present)', () => {
  it('root read-only, workspace writable', async () => {
    manager = new ProcessManager({ tempDir: () => dir, cwd: dir, executor: new BubblewrapExecutor() });
    const result = await manager.spawn('echo hi > f; touch /usr/conch-should-fail; echo rc=$?', [], {
      shell: true,
    }).result;
    expect(result.stdout.head).toBe('rc=1\n');
    expect(result.stderr.head).toMatch(/Read-only file system/);
    expect(readFileSync(join(dir, 'f'), 'utf8')).toBe('hi\n');
  });

  it('kill() leaves no process of the sandbox alive, setsid included', async () => {
    manager = new ProcessManager({
      tempDir: () => dir,
      cwd: dir,
      executor: new BubblewrapExecutor(),
      killGraceMs: 500,
    });
    const proc = manager.spawn('setsid sleep 300 > /dev/null 2>&1 & echo up; sleep 300', [], { shell: true });
    await waitFor(() => proc.stdout.totalBytes > 0, { what: 'sandbox up', timeoutMs: 10_000 });
    await proc.kill();
    await waitFor(() => survivors(proc.cookie).length === 0, { what: 'no survivors', timeoutMs: 10_000 });
  });
});

describe('findBwrap', () => {
  it('finds nothing on an empty PATH', () => {
    expect(findBwrap('')).toBeUndefined();
  });
});
