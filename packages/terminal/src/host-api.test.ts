// Hosts see every session (list, logs, events), commands pass the gate while input does not, and
// sessions end on exit, abort, kill and idle reaping.
import { Writable } from 'node:stream';
import { isAlive, processesMentioning, waitFor } from '@conch/test-support';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { PermissionGate, PermissionRequest } from '@conch/core';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

describe('terminal host API and lifecycle', () => {
  it('asks the gate for each new command only, and logs input by length', async () => {
    const requests: PermissionRequest[] = [];
    const gate: PermissionGate = {
      check: async (request) => {
        requests.push(request);
        return request.kind === 'command' && request.command.includes('forbidden')
          ? { outcome: 'deny', reason: 'not allowed in this test' }
          : { outcome: 'allow', reason: 'test' };
      },
    };
    const lines: string[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    h = createHarness({}, { gate, logger });
    const waiting = await h.call({ command: `python3 -c "input('secret: ')"`, cwd: '/tmp' });
    expect(waiting).toMatchObject({ state: 'waiting' });
    expect(requests).toEqual([
      {
        kind: 'command',
        tool: 'terminal',
        command: `python3 -c "input('secret: ')"`,
        cwd: '/tmp',
        dialect: 'bash',
      },
    ]);
    const done = await h.call({ session_id: waiting.session_id, input: 'hunter2-very-secret\n' });
    expect(done).toMatchObject({ exit_code: 0 });
    await h.call({ session_id: 999, input: '' });
    expect(requests).toHaveLength(1);
    const inputLog = lines.find((l) => l.includes('terminal input'));
    expect(inputLog).toBeDefined();
    expect(JSON.parse(inputLog!)).toMatchObject({
      plugin: 'terminal',
      sessionId: waiting.session_id,
      inputLength: 20,
    });
    expect(lines.join('')).not.toContain('hunter2');

    const denied = await h.call({ command: 'echo forbidden' });
    expect(denied).toMatchObject({ permission_denied: true });
  });

  it('lists sessions, reads full logs and emits session events', async () => {
    h = createHarness();
    const events: string[] = [];
    const texts: string[] = [];
    h.registry.events.on('terminal.session.started', (e) => events.push(`started ${e.sessionId}`));
    h.registry.events.on('terminal.command.started', (e) => events.push(`command ${e.command}`));
    h.registry.events.on('terminal.command.finished', (e) => events.push(`finished ${e.exitCode}`));
    h.registry.events.on('terminal.session.output', (e) => texts.push(e.text));
    h.registry.events.on('terminal.session.exited', (e) => events.push(`exited ${e.reason}`));

    await h.call({ command: 'printf "\\033[32mgreen\\033[0m\\n"; echo second' });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const [info] = service.list();
    expect(info).toMatchObject({
      id: 1,
      state: 'idle',
      command: 'printf "\\033[32mgreen\\033[0m\\n"; echo second',
      lastLine: 'second',
    });
    expect(info!.pid).toBeGreaterThan(0);
    expect(info!.ageMs).toBeGreaterThanOrEqual(0);
    const raw = await waitFor(async () => {
      const log = await service.readLog(1);
      return log.includes('[exit 0]') ? log : undefined;
    });
    expect(raw).toContain('$ printf');
    expect(raw).toContain('\u001b[32mgreen');
    const clean = await service.readLog(1, { clean: true });
    expect(clean).toContain('green\nsecond\n');
    expect(clean).not.toContain('\u001b');
    expect(texts.join('')).toContain('second');
    await expect(service.readLog(77)).rejects.toThrow(
      /no log for terminal session 77 \(live sessions: 1 \(idle\)\)/,
    );

    expect(await service.kill(1)).toBe(true);
    expect(await service.kill(1)).toBe(false);
    expect(events).toEqual([
      'started 1',
      'command printf "\\033[32mgreen\\033[0m\\n"; echo second',
      'finished 0',
      'exited killed',
    ]);
  });

  it('ends the session when the command exits the shell', async () => {
    h = createHarness();
    const result = await h.call({ command: 'echo bye; exit 3' });
    expect(result).toMatchObject({ exit_code: 3, output: 'bye\n' });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    expect(service.list()).toEqual([]);
    expect(await h.call({ command: 'echo fresh' })).toMatchObject({ exit_code: 0, output: 'fresh\n' });
  });

  it('kills the session of a command whose call is aborted', async () => {
    h = createHarness();
    const controller = new AbortController();
    const tag = `conch-abort-${process.pid}`;
    const pending = h.call({ command: `(exec -a ${tag} sleep 300)` }, { signal: controller.signal });
    await waitFor(() => processesMentioning(tag).length > 0);
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const shell = service.list()[0]!.pid;
    controller.abort();
    await expect(pending).rejects.toThrow(/aborted/);
    await waitFor(() => processesMentioning(tag).length === 0 && !isAlive(shell), {
      what: 'the aborted session to die',
      timeoutMs: 20_000,
    });
    await waitFor(() => service.list().length === 0);
  });

  it('reaps idle shells but not running ones', async () => {
    h = createHarness({ idleSessionTtlMs: 1000 });
    const running = await h.call({ command: 'sleep 300', idle_ms: 200 });
    expect(running).toMatchObject({ state: 'waiting' });
    await h.call({ command: 'echo idle' });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    expect(
      service
        .list()
        .map((s) => s.state)
        .sort(),
    ).toEqual(['idle', 'waiting']);
    await waitFor(() => service.list().length === 1, {
      what: 'the idle shell to be reaped',
      timeoutMs: 20_000,
    });
    expect(service.list()[0]).toMatchObject({ id: running.session_id, state: 'waiting' });
  });

  it('starts new shells where the last command left off', async () => {
    h = createHarness();
    await h.call({ command: 'cd /usr' });
    const busy = await h.call({ command: 'sleep 300', idle_ms: 200 });
    expect(busy).toMatchObject({ state: 'waiting' });
    expect(await h.call({ command: 'pwd' })).toMatchObject({ output: '/usr\n', cwd: '/usr' });
  });

  it('reports a shell that fails or hangs at startup, and kills it', async () => {
    h = createHarness({ shell: '/bin/bash', shellArgs: ['-c', 'echo rc is broken; exit 5'] });
    const failed = await h.call({ command: 'echo hi' });
    expect(failed.error).toMatch(
      /could not start the shell \/bin\/bash: the shell exited \(code 5\) before it was ready/,
    );
    expect(failed.error).toMatch(/rc is broken/);
    await h.dispose();

    const tag = `conch-hang-${process.pid}`;
    h = createHarness({
      shell: '/bin/bash',
      shellArgs: ['-c', `exec -a ${tag} sleep 300`],
      startupTimeoutMs: 500,
    });
    const hung = await h.call({ command: 'echo hi' });
    expect(hung.error).toMatch(/did not become ready: it made no progress for 500 ms while starting/);
    expect(processesMentioning(tag)).toEqual([]);
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    expect(service.list()).toEqual([]);
  });

  it('gives concurrent commands their own shells', async () => {
    h = createHarness();
    const results = await Promise.all([1, 2, 3].map((n) => h!.call({ command: `sleep 0.2; echo job${n}` })));
    expect(results.map((r) => r.output)).toEqual(['job1\n', 'job2\n', 'job3\n']);
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    expect(
      service
        .list()
        .map((s) => s.id)
        .sort(),
    ).toEqual([1, 2, 3]);
    expect(service.list().every((s) => s.state === 'idle')).toBe(true);
  });

  it('returns a command still printing at its timeout as background, and polls it', async () => {
    h = createHarness();
    const running = await h.call({ command: 'while true; do echo tick; sleep 0.1; done', timeout: 1 });
    expect(running).toMatchObject({ state: 'background' });
    expect(running.output).toContain('tick');
    const polled = await h.call({ session_id: running.session_id, input: '', timeout: 1 });
    expect(polled).toMatchObject({ session_id: running.session_id, state: 'background' });
    expect(polled.output).toContain('tick');
    expect(await h.call({ session_id: running.session_id, kill: true })).toMatchObject({ killed: true });
  });

  it('keeps output of jobs left running after their command in the session log', async () => {
    h = createHarness();
    const done = await h.call({ command: '(sleep 0.3; echo late-job-output) &' });
    expect(done).toMatchObject({ exit_code: 0 });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    await waitFor(async () => (await service.readLog(1)).includes('late-job-output'));
    expect(await h.call({ command: 'echo next' })).toMatchObject({ output: 'next\n' });
  });
});
