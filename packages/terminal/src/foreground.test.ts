// The kernel's view of a session's terminal: a program reading it is seen, the shell waiting in its gate between commands is not.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { foregroundOf, foregroundReadsTty, ttyOf } from './foreground.js';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

let zdotdir: string;
const savedZdotdir = process.env.ZDOTDIR;
beforeAll(() => {
  zdotdir = mkdtempSync(join(tmpdir(), 'conch-fg-zdotdir-'));
  writeFileSync(join(zdotdir, '.zshrc'), '');
  process.env.ZDOTDIR = zdotdir;
});
afterAll(() => {
  if (savedZdotdir === undefined) delete process.env.ZDOTDIR;
  else process.env.ZDOTDIR = savedZdotdir;
  rmSync(zdotdir, { recursive: true, force: true });
});

// zsh is required under CI (.ci/run installs it); elsewhere its case is skipped when missing.
const SHELLS = ['/bin/bash', ...(existsSync('/usr/bin/zsh') || process.env.CI ? ['/usr/bin/zsh'] : [])];

describe.each(SHELLS)('foreground reads (%s)', (shell) => {
  it('sees a program blocked reading the terminal, never the gate', async () => {
    h = createHarness({ shell });
    expect(await h.call({ command: 'echo ready' })).toMatchObject({ output: 'ready\n' });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const pid = service.list()[0]!.pid;
    const tty = ttyOf(pid);
    expect(tty).toMatch(/^\/dev\/pts\/\d+$/);
    // Idle: the shell waits in its gate for the next command. A prompt check made the instant the
    // shell got there (before this process read the end marker) must not take it for a prompt.
    expect(foregroundOf(pid, tty)).toMatchObject({ pgid: pid, readers: [] });
    expect(foregroundReadsTty(pid, tty)).toBe(false);
    const waiting = await h.call({ command: 'cat', idle_ms: 600_000 });
    expect(waiting).toMatchObject({ state: 'waiting' });
    expect(foregroundReadsTty(pid, tty)).toBe(true);
    await h.call({ session_id: waiting.session_id, input: '\u0004' });
    await waitFor(() => service.list()[0]?.state === 'idle');
    expect(foregroundReadsTty(pid, tty)).toBe(false);
  });
});
