// Invariant: cancel_background_task of a running task leaves no process of its tree alive by the time it returns, with no SIGTERM grace waited for (a task that ignores SIGTERM included).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BACKGROUND_SERVICE, PluginRegistry } from '@conch/core';
import { findCookiePids, pidAlive, ProcessManager } from '@conch/process';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BackgroundTasks } from './background-tasks.js';
import { backgroundPlugin } from './plugin.js';
import { shellRun } from './test-support/runs.js';

let dir: string;
let manager: ProcessManager;
let registry: PluginRegistry;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'conch-bg-cancel-'));
  // A grace no test waits out: the cancel must not depend on it.
  manager = new ProcessManager({ tempDir: () => dir, cwd: dir, killGraceMs: 60_000 });
  registry = new PluginRegistry({
    cwd: dir,
    tempRoot: dir,
    plugins: [backgroundPlugin],
    logger: pino({ level: 'silent' }),
  });
  await registry.expose('background');
});
afterEach(async () => {
  await registry.dispose();
  await manager.dispose();
  expect(findCookiePids({ prefix: manager.cookiePrefix }).filter(pidAlive)).toEqual([]);
  rmSync(dir, { recursive: true, force: true });
});

describe('cancel_background_task', () => {
  it('a running task: its whole tree is gone when the call returns', async () => {
    const service = registry.resolve(BACKGROUND_SERVICE) as BackgroundTasks;
    const file = join(dir, 'pids');
    const task = service.submit({
      command: 'deaf',
      tool: 'test',
      start: shellRun(() => manager, `sh -c 'trap "" TERM; sleep 300 & echo $$ $! > ${file}; wait'`),
    });
    while (!(existsSync(file) && readFileSync(file, 'utf8').includes('\n'))) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const pids = readFileSync(file, 'utf8').trim().split(/\s+/).map(Number);
    expect(pids.filter((pid) => pidAlive(pid))).toHaveLength(2);
    expect(await registry.execute('cancel_background_task', { task_id: task.id })).toMatchObject({
      status: 'cancelled',
      display: `${task.id} cancelled (was running)`,
    });
    expect(pids.filter((pid) => pidAlive(pid))).toEqual([]);
    expect(service.get(task.id)!.status).toBe('cancelled');
  });
});
