// Invariant: probeSandbox and probeSandboxSync answer alike whether bubblewrap can sandbox here: a refused, failing, killed or missing bwrap is unavailable with its version and the reason, a working one available, and each bwrap binary is probed once (cached).
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { probeSandbox, probeSandboxSync } from './probe.js';

let dir: string;
let savedPath: string | undefined;

/** An executable script at `<dir>/<name>`. Each fake is a fresh path: the probes cache by binary. */
function fake(name: string, script: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
  return path;
}

beforeEach(() => {
  savedPath = process.env.PATH;
  dir = mkdtempSync(join(tmpdir(), 'conch-fakebwrap-'));
  mkdirSync(join(dir, 'bin'));
  // On PATH: a bwrap that fails like one without user namespaces (and knows its version).
  fake(
    'bin/bwrap',
    'if [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n' +
      'echo "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1',
  );
  process.env.PATH = `${join(dir, 'bin')}:${savedPath ?? ''}`;
});
afterEach(() => {
  process.env.PATH = savedPath;
  rmSync(dir, { recursive: true, force: true });
});

describe('probeSandbox', () => {
  it('reports the fake bwrap as unavailable with its version and reason, once (cached)', async () => {
    const first = probeSandbox();
    expect(probeSandbox()).toBe(first);
    expect(await first).toMatchObject({ available: false, version: '0.8.0' });
  });

  it.each([
    ['fails without a word', 'exit 3', { reason: 'exited with code 3' }],
    ['is killed by a signal', 'kill -9 $$', { reason: 'was killed (SIGKILL)' }],
    [
      'refuses the sandbox silently but knows its version',
      'if [ "$1" = --version ]; then echo "bubblewrap 0.9.1"; exit 0; fi; exit 1',
      { reason: 'exited with code 1', version: '0.9.1' },
    ],
    [
      'works',
      'if [ "$1" = --version ]; then echo "bubblewrap 0.9.2"; exit 0; fi; shift 10; exec "$@"',
      { available: true, version: '0.9.2' },
    ],
  ])('a bwrap that %s: both probes say the same', async (name, script, expected) => {
    const slug = name.replace(/\W+/g, '-');
    const [async, sync] = [fake(`a-${slug}`, script), fake(`s-${slug}`, script)];
    const fromAsync = await probeSandbox({ bwrap: async });
    const fromSync = probeSandboxSync({ bwrap: sync });
    const { reason, ...rest } = expected as { reason?: string; available?: boolean; version?: string };
    for (const [status, path] of [
      [fromAsync, async],
      [fromSync, sync],
    ] as const) {
      expect(status).toMatchObject({ available: false, bwrap: path, ...rest });
      if (reason) {
        expect(status.reason!.startsWith(`${path} ${reason}`), status.reason).toBe(true);
        // A bwrap that works (it knows its version) but made no sandbox: as root the probe tried a
        // user namespace of its own too, and says so, with what would fix it. A broken one: neither.
        if (status.version) {
          if (process.geteuid?.() === 0)
            expect(status.reason).toContain(`; in a user namespace of its own: ${path} ${reason}`);
          expect(status.fix).toMatch(/unmask=ALL|user namespaces/);
        } else expect(status.fix).toBeUndefined();
      } else expect(status.reason).toBeUndefined();
    }
  });

  it('reports a missing bwrap', async () => {
    process.env.PATH = join(dir, 'empty');
    expect(await probeSandbox()).toMatchObject({
      available: false,
      reason: expect.stringMatching(/not found/),
    });
  });
});
