// Invariant: a session's shell runs under conch's process supervisor; when that supervisor stops
// answering (SIGSTOP, a hang) or goes away (killed, crashed), the terminal says so, in the words of
// the result and of the error a later call gets, never as the shell's fault (SHELL_PROTOCOL_BROKEN,
// SHELL_NOT_READY) or as the command's own exit; and the next command runs in a new shell.
import 'reflect-metadata';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { findBwrap, PROCESS_MANAGER, type ProcessManager } from '@conch/process';
import { trashPlugin } from '@conch/trash';
import { waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { TerminalCommandError } from './errors/terminal-command-error.js';
import { terminalPlugin } from './plugin.js';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness } from './test-support/harness.js';
import type { TerminalConfigInput } from './config.js';

type Result = ToolResult & Record<string, any>;

interface Setup {
  registry: PluginRegistry;
  ws: string;
  call(args: Record<string, unknown>): Promise<Result>;
}

const cleanups: (() => Promise<void>)[] = [];
const stopped: number[] = [];
afterEach(async () => {
  // A stopped supervisor left by a failed test must not hang the next one's cleanup.
  for (const pid of stopped.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A registry with an allow-all gate: sessions run through the supervisor, outside any sandbox. */
function unsandboxed(config: TerminalConfigInput): Setup {
  const h = createHarness({ shell: '/bin/bash', ...config });
  cleanups.push(() => h.dispose());
  const ws = join(h.root, 'ws');
  mkdirSync(ws);
  return { registry: h.registry, ws, call: async (args) => (await h.call({ cwd: ws, ...args })) as Result };
}

/** The permission plugin's default: every session in the workspace-write sandbox. */
async function sandboxed(config: TerminalConfigInput): Promise<Setup> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-terminal-supervisor-')));
  const ws = join(root, 'ws');
  const home = join(root, 'home');
  mkdirSync(ws);
  mkdirSync(home);
  const realHome = process.env.HOME;
  process.env.HOME = home;
  const registry = new PluginRegistry({
    cwd: ws,
    tempRoot: root,
    logger: pino({ level: 'silent' }),
    plugins: [permissionPlugin, terminalPlugin, trashPlugin],
  });
  cleanups.push(async () => {
    await registry.dispose();
    process.env.HOME = realHome;
    rmSync(root, { recursive: true, force: true });
  });
  await registry.expose('permission', {});
  await registry.expose('trash', { dir: join(root, 'trash') });
  await registry.expose('terminal', { shell: '/bin/bash', ...config });
  return { registry, ws, call: async (args) => (await registry.execute('terminal', args)) as Result };
}

const variants: [string, (config: TerminalConfigInput) => Setup | Promise<Setup>][] = [
  ['unsandboxed', unsandboxed],
  ...(findBwrap() || process.env.CI
    ? ([['in the workspace sandbox', sandboxed]] as [string, typeof sandboxed][])
    : []),
];

/** Stops every supervisor the registry runs now (and its bwrap), as a SIGSTOP from outside would. */
function stopSupervisors(registry: PluginRegistry): number[] {
  const pids = (registry.resolve(PROCESS_MANAGER) as ProcessManager).supervisorPids();
  expect(pids.length).toBeGreaterThan(0);
  for (const pid of pids) {
    process.kill(pid, 'SIGSTOP');
    stopped.push(pid);
  }
  return pids;
}

const gone = (pid: number) => {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
};

describe.each(variants)('a session whose supervisor misbehaves (%s)', (_name, make) => {
  // commandStartTimeoutMs well under the health check's own 10 s: only the terminal asking the
  // supervisor's health check (it has seen two unanswered pings by then) tells the two apart.
  it.each([
    ['the default limits', {}],
    ['a short command-start limit', { commandStartTimeoutMs: 2000 }],
  ])(
    'stopped (SIGSTOP) before a command is typed: SUPERVISOR_UNRESPONSIVE, not a broken shell (%s)',
    async (_limits, config) => {
      const { registry, call, ws } = await make(config);
      const warm = await call({ command: 'echo warm' });
      expect(warm.output).toContain('warm');
      const pids = stopSupervisors(registry);
      const r = await call({ command: `touch ${join(ws, 'never')}` });
      expect(r.error_code, JSON.stringify(r)).toBe('SUPERVISOR_UNRESPONSIVE');
      expect(r.error).toMatch(
        /before the command started.*stopped answering.*SIGSTOP.*not the command's failure.*run it again/s,
      );
      expect(r.exit_code).toBe(-1);
      expect(existsSync(join(ws, 'never'))).toBe(false);
      for (const pid of pids)
        await waitFor(() => gone(pid), { what: `supervisor ${pid} gone`, timeoutMs: 30_000 });
      const again = await call({ command: `touch ${join(ws, 'again')} && echo again` });
      expect(again.output).toContain('again');
      expect(again.exit_code).toBe(0);
      expect(existsSync(join(ws, 'again'))).toBe(true);
    },
    120_000,
  );

  it('a background session whose supervisor stops: a later poll learns why it ended', async () => {
    const { registry, call, ws } = await make({});
    const started = await call({
      command: `touch ${join(ws, 'server-up')}; echo listening; sleep 300`,
      background: true,
    });
    expect(started.session_id, JSON.stringify(started)).toBeTypeOf('number');
    await waitFor(() => existsSync(join(ws, 'server-up')), { what: 'the server started', timeoutMs: 30_000 });
    const exited = new Promise<{ sessionId: number }>((resolve) =>
      registry.events.on('terminal.session.exited', (e) => resolve(e)),
    );
    stopSupervisors(registry);
    // Nobody reads the session: the health check alone replaces the supervisor (10 s of stalled ticks).
    expect((await exited).sessionId).toBe(started.session_id);
    const poll = await call({ session_id: started.session_id, input: '' });
    expect(poll.error_code, JSON.stringify(poll)).toBe('UNKNOWN_SESSION');
    expect(poll.error).toMatch(
      new RegExp(
        `session_id ${started.session_id} has ended: .*process supervisor went away.*stopped answering.*not the command's failure`,
        's',
      ),
    );
    const again = await call({ command: 'echo again' });
    expect(again.output).toContain('again');
  }, 120_000);

  it('a new session started while the supervisor is stopped runs at once in a new one; the old session learns why it ended', async () => {
    const { registry, call, ws } = await make({});
    const server = await call({ command: `echo up; sleep 300`, background: true });
    expect(server.session_id, JSON.stringify(server)).toBeTypeOf('number');
    const pids = stopSupervisors(registry);
    // The server's shell is busy: this command needs a new shell, started through a supervisor.
    const r = await call({ command: `touch ${join(ws, 'fresh')} && echo fresh` });
    expect(r.exit_code, JSON.stringify(r)).toBe(0);
    expect(r.output).toContain('fresh');
    expect(existsSync(join(ws, 'fresh'))).toBe(true);
    for (const pid of pids)
      await waitFor(() => gone(pid), { what: `supervisor ${pid} gone`, timeoutMs: 30_000 });
    const poll = await call({ session_id: server.session_id, input: '' });
    expect(poll.error_code, JSON.stringify(poll)).toBe('UNKNOWN_SESSION');
    expect(poll.error).toMatch(/has ended: .*process supervisor went away.*stopped \(SIGSTOP\)/s);
  }, 120_000);

  it.each([
    ['SIGKILL', 'SIGKILL'],
    ['a crash (SIGSEGV)', 'SIGSEGV'],
  ] as const)(
    'killed by %s while a command runs: SUPERVISOR_LOST, and the command may have done its work',
    async (_what, signal) => {
      const { registry, call, ws } = await make({});
      expect((await call({ command: 'echo warm' })).output).toContain('warm');
      const pids = (registry.resolve(PROCESS_MANAGER) as ProcessManager).supervisorPids();
      const off = registry.events.on('terminal.command.started', () => {
        off();
        // The node supervisor (the first): the sandbox's bwrap then goes with it.
        void waitFor(() => existsSync(join(ws, 'did-its-work')), {
          what: 'the command ran',
          timeoutMs: 30_000,
        }).then(() => process.kill(pids[0]!, signal));
      });
      const r = await call({
        command: `touch ${join(ws, 'did-its-work')}; sleep 120`,
        timeout: 100,
        idle_ms: 0,
      });
      expect(r.error_code, JSON.stringify(r)).toBe('SUPERVISOR_LOST');
      expect(r.error).toMatch(
        /while the command ran.*went away.*not the command's failure.*check its effects/s,
      );
      expect(r.exit_code).toBe(-1);
      const again = await call({ command: 'echo again' });
      expect(again.output).toContain('again');
    },
    120_000,
  );

  it('runSync with a stopped supervisor throws SUPERVISOR_UNRESPONSIVE', async () => {
    const { registry } = await make({ commandStartTimeoutMs: 2000 });
    const terminal = registry.resolve<TerminalService>(TERMINAL_SERVICE);
    expect((await terminal.runSync('echo warm')).output).toContain('warm');
    stopSupervisors(registry);
    const error = await terminal.runSync('echo never').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TerminalCommandError);
    expect((error as TerminalCommandError).code).toBe('SUPERVISOR_UNRESPONSIVE');
    expect((error as Error).message).toMatch(/stopped answering/);
    expect((await terminal.runSync('echo again')).output).toContain('again');
  }, 120_000);
});
