// Invariant: setLabel changes what list() shows for a process after spawn (a browser's CDP address once known), and refuses an empty or NUL-carrying label by naming the field.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidSpawnOptionError } from './errors.js';
import { ProcessManager } from './process-manager.js';

describe('ManagedProcess.setLabel', () => {
  let dir: string;
  let manager: ProcessManager;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'conch-label-'));
    manager = new ProcessManager({ tempDir: () => dir, cwd: dir, killGraceMs: 500 });
  });
  afterEach(async () => {
    await manager.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('shows the new label in list() and on the process, running or not', async () => {
    const proc = manager.spawn('sleep', ['30'], { label: 'starting' });
    expect(manager.list().find((p) => p.id === proc.id)?.command).toBe('starting');
    proc.setLabel('[browser] Chrome Headless  CDP Ready ws://127.0.0.1:1/x');
    expect(proc.label).toBe('[browser] Chrome Headless  CDP Ready ws://127.0.0.1:1/x');
    expect(manager.list().find((p) => p.id === proc.id)?.command).toBe(
      '[browser] Chrome Headless  CDP Ready ws://127.0.0.1:1/x',
    );
    await proc.kill();
    proc.setLabel('stopped');
    expect(manager.list().find((p) => p.id === proc.id)?.command).toBe('stopped');
  });

  it('refuses an empty label or one with a NUL byte, naming the field', async () => {
    const proc = manager.spawn('true');
    expect(() => proc.setLabel('')).toThrow(InvalidSpawnOptionError);
    expect(() => proc.setLabel('a\0b')).toThrow(/spawn option 'label': expected a non-empty string/);
    expect(proc.label).toBe('true');
    await proc.result;
  });
});
