// Invariant: wait_for returns on the first line that matches (output printed before the call included), then only on later output; it reports a miss at the timeout or when the task ends, and a bad regex is refused naming the field.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BACKGROUND_SERVICE, InvalidArgumentsError, PluginRegistry } from '@conch/core';
import { ProcessManager } from '@conch/process';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { shellRun } from './test-support/runs.js';
import { BackgroundTasks } from './background-tasks.js';
import { backgroundPlugin } from './plugin.js';

let dir: string;
let manager: ProcessManager;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-bg-wait-'));
  manager = new ProcessManager({ tempDir: () => dir, cwd: dir, killGraceMs: 300, drainMs: 200 });
});
afterEach(async () => {
  await manager.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const sh = (script: string) => shellRun(() => manager, script);

describe('BackgroundTasks.waitForOutput', () => {
  it('returns on the first match while the task keeps running, then waits for later output', async () => {
    const service = new BackgroundTasks();
    try {
      // A dev server: noise, a coloured readiness line, then a second one a little later.
      const info = service.submit({
        command: 'server',
        tool: 'test',
        start: sh(
          "printf 'compiling\\n'; printf '\\033[32m  Local: http://localhost:5173\\033[0m  ready in 12 ms\\n'; sleep 1; echo 'ready in 99 ms'; sleep 300",
        ),
      });
      const first = await service.waitForOutput(info.id, /listening on|ready in/im, 30_000);
      expect(first).toMatchObject({ matched: true, line: 'Local: http://localhost:5173  ready in 12 ms' });
      expect(first.info.status).toBe('running');
      const second = await service.waitForOutput(info.id, /ready in/im, 30_000);
      expect(second).toMatchObject({ matched: true, line: 'ready in 99 ms' });
      const none = await service.waitForOutput(info.id, /ready in/im, 300);
      expect(none.matched).toBe(false);
      expect(none.info.status).toBe('running');
    } finally {
      await service.dispose();
    }
  });

  it('reports no match when the task ends first', async () => {
    const service = new BackgroundTasks();
    try {
      const info = service.submit({
        command: 'crash',
        tool: 'test',
        start: sh('echo "Error: port in use"; exit 3'),
      });
      const r = await service.waitForOutput(info.id, /listening on/i, 30_000);
      expect(r.matched).toBe(false);
      expect(r.info.status).toBe('failed');
    } finally {
      await service.dispose();
    }
  });
});

describe('check_background_task wait_for', () => {
  let registry: PluginRegistry;
  beforeEach(async () => {
    registry = new PluginRegistry({ cwd: dir, tempRoot: dir, logger: pino({ level: 'silent' }) });
    registry.register(backgroundPlugin);
    await registry.expose('background', {});
  });
  afterEach(async () => {
    await registry.dispose();
  });

  it('returns wait_for_matched true on a match and false at the timeout', async () => {
    const service = registry.resolve(BACKGROUND_SERVICE) as BackgroundTasks;
    const info = service.submit({
      command: 'dev',
      tool: 'test',
      start: sh('sleep 0.3; echo "listening on :3000"; sleep 300'),
    });
    const hit = await registry.execute('check_background_task', {
      task_id: info.id,
      wait_seconds: 30,
      wait_for: 'listening on|ready in',
    });
    expect(hit).toMatchObject({
      status: 'running',
      wait_for_matched: true,
      matched_line: 'listening on :3000',
      display: '✓ matched: listening on :3000',
    });
    const miss = await registry.execute('check_background_task', {
      task_id: info.id,
      wait_seconds: 0.3,
      wait_for: 'compiled successfully',
    });
    expect(miss).toMatchObject({
      status: 'running',
      wait_for_matched: false,
      message: expect.stringMatching(/No output matched/),
    });
  });

  it('refuses an invalid regex with an error naming wait_for, and an unknown task with UNKNOWN_TASK', async () => {
    const call = registry.execute('check_background_task', { task_id: 'x', wait_for: '(unclosed' });
    await expect(call).rejects.toThrow(InvalidArgumentsError);
    await expect(
      registry.execute('check_background_task', { task_id: 'x', wait_for: '(unclosed' }),
    ).rejects.toThrow(/wait_for.*expected a JavaScript regular expression; "\(unclosed" is not one/s);
    expect(await registry.execute('check_background_task', { task_id: 'nope', wait_for: 'x' })).toMatchObject(
      {
        error_code: 'UNKNOWN_TASK',
      },
    );
  });
});

/** A registry with the background plugin exposed (with `config`) in the test's dir, and its service. */
async function exposedBackground(config: Record<string, unknown> = {}) {
  const registry = new PluginRegistry({
    cwd: dir,
    tempRoot: dir,
    plugins: [backgroundPlugin],
    logger: pino({ level: 'silent' }),
  });
  await registry.expose('background', config);
  return { registry, service: registry.resolve(BACKGROUND_SERVICE) as BackgroundTasks };
}

describe('a result dropped from the history', () => {
  it('check, read and cancel answer TASK_EVICTED with its status, exit code and output file', async () => {
    const { registry, service } = await exposedBackground({ unreadLimit: 1 });
    try {
      // 200,000 lines: more than memory keeps, so the output is in a file.
      const first = service.submit({
        command: 'seq 200000; exit 4',
        tool: 'test',
        start: sh('seq 200000; exit 4'),
      });
      await service.whenFinished(first.id);
      const file = service.get(first.id)!.outputFile;
      const second = service.submit({ command: 'true', tool: 'test', start: sh('true') });
      await service.whenFinished(second.id);
      for (const tool of ['check_background_task', 'read_background_output', 'cancel_background_task']) {
        const answer = await registry.execute(tool, { task_id: first.id });
        expect(answer).toMatchObject({
          task_id: first.id,
          status: 'failed',
          returncode: 4,
          error_code: 'TASK_EVICTED',
          error: expect.stringMatching(/before its result was read.*unreadLimit/),
          display: expect.stringMatching(/^✗ TASK_EVICTED: /),
        });
        if (file) expect(answer.output_file).toBe(file);
      }
      expect(file).toBeDefined();
      expect(readFileSync(file!, 'utf8').split('\n')).toHaveLength(200_001);
      // The one kept is still there, and reading it is a delivery like any other.
      expect(await registry.execute('check_background_task', { task_id: second.id })).toMatchObject({
        status: 'completed',
      });
    } finally {
      await registry.dispose();
    }
  });
});

describe('every background tool result carries a one-line display', () => {
  it('check (running, finished), list, read and cancel', async () => {
    const { registry, service } = await exposedBackground();
    try {
      const ok = service.submit({
        command: 'ok',
        tool: 'test',
        start: () => {
          const run = sh('echo done')();
          return {
            ...run,
            done: run.done.then((o) => ({ ...o, result: { ...o.result, display: '✓ exit=0' } })),
          };
        },
      });
      const long = service.submit({ command: 'long', tool: 'test', start: sh('sleep 300') });
      const finished = await registry.execute('check_background_task', { task_id: ok.id, wait_seconds: 30 });
      expect(finished).toMatchObject({ status: 'completed', display: `✓ ${ok.id} completed: ✓ exit=0` });
      const running = await registry.execute('check_background_task', { task_id: long.id });
      expect(running.display).toMatch(new RegExp(`^${long.id} running \\d+(\\.\\d)?s$`));
      expect(await registry.execute('list_background_tasks', {})).toMatchObject({
        display: '2 tasks, 1 running',
      });
      expect(await registry.execute('read_background_output', { task_id: ok.id })).toMatchObject({
        display: `${ok.id} completed: bytes 0–5 of 5`,
      });
      expect(await registry.execute('cancel_background_task', { task_id: long.id })).toMatchObject({
        display: `${long.id} cancelled (was running)`,
      });
      expect(await registry.execute('cancel_background_task', { task_id: long.id })).toMatchObject({
        display: `${long.id} already cancelled`,
      });
      expect(await registry.execute('check_background_task', { task_id: 'bg_nope' })).toMatchObject({
        error_code: 'UNKNOWN_TASK',
        display: expect.stringMatching(/^✗ UNKNOWN_TASK: /),
      });
    } finally {
      await registry.dispose();
    }
  });
});
