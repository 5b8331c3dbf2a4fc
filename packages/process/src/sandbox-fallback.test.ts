// Invariant: where bwrap is refused (a fake bwrap on PATH that fails like one without user namespaces), a command that asked for a profile runs unsandboxed, the result says so, the manager warns once and status() tells why.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import { memoryLogger, WARN } from './test-support/log.js';

let dir: string;
let savedPath: string | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-fakebwrap-'));
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'bwrap'),
    '#!/bin/sh\nif [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n' +
      'echo "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n',
  );
  chmodSync(join(bin, 'bwrap'), 0o755);
  savedPath = process.env.PATH;
  process.env.PATH = `${bin}:${process.env.PATH ?? ''}`;
});
afterEach(() => {
  process.env.PATH = savedPath;
  rmSync(dir, { recursive: true, force: true });
});

describe.each([
  ['through the supervisor', {}],
  ['without a supervisor', { supervisor: false }],
] as [string, ProcessManagerOptions][])('a refused bwrap, %s', (_name, mode) => {
  it('runs the command unsandboxed, says so in the result, warns once, and status() explains', async () => {
    const { logger, entries } = memoryLogger();
    const m = new ProcessManager({ ...mode, cwd: dir, tempDir: () => dir, logger });
    try {
      const first = await m.spawn('echo w > written; echo done', [], {
        shell: true,
        sandbox: { kind: 'read-only' },
      }).result;
      expect(first.stdout.head).toBe('done\n');
      expect(first.sandbox).toBe('none');
      expect(existsSync(join(dir, 'written'))).toBe(true);
      const second = await m.spawn('echo again', [], { shell: true, sandbox: { kind: 'read-only' } }).result;
      expect(second).toMatchObject({ sandbox: 'none', exitCode: 0 });
      const warnings = entries().filter((e) => e.level === WARN);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toMatch(/sandbox unavailable/);
      const status = await m.status();
      expect(status.sandbox).toMatchObject({ available: false, bwrap: join(dir, 'bin', 'bwrap') });
      expect(status.sandbox.reason).toMatch(/No permissions to create new namespace/);
    } finally {
      await m.dispose();
    }
  });
});
