// Invariant: a terminal session runs behind the gate's kernel wall — the protected paths it names are read-only inside the session, whatever the gate allowed, and the rest of the workspace stays writable.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findBwrap } from '@conch/process';
import type { PermissionGate } from '@conch/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './test-support/harness.js';

const BWRAP = findBwrap();
if (process.env.CI && !BWRAP) throw new Error('the kernel wall tests need bubblewrap under CI');

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

describe.skipIf(!BWRAP)('terminal sessions behind the kernel wall', () => {
  it('a protected path cannot be written from a session, even by a command the gate allowed', async () => {
    let hooks = '';
    let secret = '';
    const gate: PermissionGate = {
      // Allows everything: only the kernel stands between the command and the file.
      check: async () => ({ outcome: 'allow', reason: 'test' }),
      kernelPolicy: () => ({
        mode: 'off',
        writableRoots: [],
        readOnlyPaths: [hooks, secret],
        pinnedPaths: [],
        env: {},
      }),
    };
    h = createHarness({}, { gate });
    hooks = join(h.root, '.git', 'hooks');
    secret = join(h.root, 'secret.env');
    mkdirSync(hooks, { recursive: true });
    writeFileSync(secret, 'original\n');
    const r = (await h.call({
      command: `cd ${h.root} && echo pwned >> secret.env; echo hook > .git/hooks/pre-commit; echo ok > notes.txt; cat notes.txt`,
    })) as { output: string };
    expect(readFileSync(secret, 'utf8')).toBe('original\n');
    expect(r.output).toMatch(/Read-only file system/);
    expect(r.output).toContain('ok');
    expect(readFileSync(join(h.root, 'notes.txt'), 'utf8')).toBe('ok\n');
  });
});
