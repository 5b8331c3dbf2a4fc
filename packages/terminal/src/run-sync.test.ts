// Invariant: runSync runs a command to its end through the sessions, login shell and permission gate the tool uses, returns its exit code, and kills the session (exit_code null) only when the hard deadline passes.
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processesMentioning, waitFor } from '@conch/test-support';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  PermissionGateMissingError,
  PluginRegistry,
  type PermissionGate,
  type PermissionRequest,
} from '@conch/core';
import { TerminalCommandError } from './errors/terminal-command-error.js';
import { terminalPlugin } from './plugin.js';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

function recording(deny: (command: string) => boolean = () => false) {
  const requests: PermissionRequest[] = [];
  const gate: PermissionGate = {
    check: async (request) => {
      requests.push(request);
      const command = request.kind === 'command' ? request.command : '';
      return deny(command)
        ? { outcome: 'deny', reason: 'not this one', rule: 'test:deny' }
        : { outcome: 'allow', reason: 'test' };
    },
  };
  return { gate, requests };
}

describe('runSync', () => {
  it('returns the whole output and the exit code, through the gate, in the persistent login shell', async () => {
    const { gate, requests } = recording();
    h = createHarness({ maxOutputChars: 200 }, { gate });
    const terminal = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const r = await terminal.runSync('seq 1 2000; echo "$GREETING"; (exit 3)', {
      env: { GREETING: 'hi' },
      cwd: '/tmp',
    });
    expect(r.exit_code).toBe(3);
    // Not cut to the tool's maxOutputChars: a host wants all of it.
    expect(r.output.startsWith('1\n2\n3\n')).toBe(true);
    expect(r.output.endsWith('1999\n2000\nhi\n')).toBe(true);
    expect(requests).toEqual([
      expect.objectContaining({
        kind: 'command',
        tool: 'terminal',
        // the per-call env rides beside the command: the gate reads them as `export …` + command
        command: 'seq 1 2000; echo "$GREETING"; (exit 3)',
        env: { GREETING: 'hi' },
        cwd: '/tmp',
      }),
    ]);
    // The session persists: cwd carried over, per-call env restored.
    expect(await terminal.runSync('pwd; echo "[$GREETING]"')).toEqual({ output: '/tmp\n[]\n', exit_code: 0 });
  });

  it('does not return on a prompt or silence: it waits for the end', async () => {
    h = createHarness({ defaultIdleMs: 100, promptQuietMs: 50 });
    const terminal = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    expect(await terminal.runSync("printf 'Continue? [y/N] '; sleep 1; echo done")).toEqual({
      output: 'Continue? [y/N] done\n',
      exit_code: 0,
    });
  });

  it('kills the session and everything it started at the deadline, with exit_code null', async () => {
    h = createHarness();
    const terminal = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const tag = `conch-runsync-${randomBytes(4).toString('hex')}`;
    const r = await terminal.runSync(`echo started; (exec -a ${tag} sleep 300)`, {
      timeout: 0.5,
      graceSeconds: 0.5,
    });
    expect(r).toEqual({ output: 'started\n', exit_code: null });
    await waitFor(() => processesMentioning(tag).length === 0, {
      what: 'the command to be killed',
      timeoutMs: 10_000,
    });
    expect(terminal.list()).toEqual([]);
    // A new command gets a new session.
    expect(await terminal.runSync('echo again')).toEqual({ output: 'again\n', exit_code: 0 });
  });

  it('is refused by the gate, for exec over the shell, and without a gate at all', async () => {
    h = createHarness({}, { gate: recording((c) => c.includes('forbidden')).gate });
    const terminal = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    await expect(terminal.runSync('echo forbidden')).rejects.toMatchObject({
      code: 'PERMISSION_DENIED',
      rule: 'test:deny',
      message: 'Permission denied: not this one',
    });
    await expect(terminal.runSync('exec bash')).rejects.toThrow(TerminalCommandError);
    await expect(terminal.runSync('exec bash')).rejects.toMatchObject({ code: 'EXEC_REPLACES_SHELL' });
    await expect(terminal.runSync('true', { timeout: -1 })).rejects.toThrow(
      /runSync timeout: expected a positive number of seconds; given -1/,
    );

    const root = mkdtempSync(join(tmpdir(), 'conch-runsync-nogate-'));
    const bare = new PluginRegistry({ cwd: root, tempRoot: root, logger: pino({ level: 'silent' }) });
    try {
      bare.register(terminalPlugin);
      await bare.expose('terminal', { safeRm: false });
      const t = bare.resolve<TerminalService>(TERMINAL_SERVICE);
      await expect(t.runSync('echo hi')).rejects.toThrow(PermissionGateMissingError);
      expect(t.list()).toEqual([]);
    } finally {
      await bare.dispose();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
