// Invariant: under load nothing is lost. Through the real conch-mcp (the MCP SDK client over stdio)
// and through the host API (registry.execute), 400 concurrent quick calls each come back with their
// own output byte for byte, or with an error_code; under a mixed load (1 MB outputs, sleeps, 30
// terminal sessions, 50 background tasks) so do 120 quick calls. An empty success is never an answer.
import { readFileSync, statSync } from 'node:fs';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { BACKGROUND_SERVICE, PluginRegistry } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { terminalPlugin } from '@conch/terminal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { tempDir } from '@conch/test-support';
import { type Harness, startServer } from './test-support/harness.js';

type Answer = Record<string, any>;
/** One way to call a tool: through conch-mcp or the host API. */
type Call = (name: string, args: Record<string, unknown>) => Promise<Answer>;

// 30 terminal sessions at once: the pool's default (8) raised, as a host running many agents would.
const TERMINAL = { maxSessions: 32 };
const CONFIG = { plugins: { permission: {}, cli: {}, background: {}, terminal: TERMINAL } };
const MB = 1_000_000;

/** What a quick call must answer: its own line, or an error_code. Returns the failure, if any. */
function judgeQuick(answer: Answer, expected: string): string | undefined {
  if (typeof answer.error_code === 'string') return undefined; // said, not lost
  if (answer.background_task_id) return undefined; // a task still running after 300 s: said, not lost
  if (answer.stdout === expected) return undefined;
  return `expected ${JSON.stringify(expected)}, got ${JSON.stringify(answer).slice(0, 300)}`;
}

async function quickBurst(
  call: Call,
  n: number,
  tag: string,
): Promise<{ failures: string[]; errors: Record<string, number>; exact: number }> {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      call('cli_based_tool', { command: `echo ${tag}-${i}` }).then(async (a) =>
        // On a loaded machine a call can outlast cli's wait (a wall-clock 10 s) and go on as a
        // task, said in its answer: its output is then the task's result, judged the same way.
        a.background_task_id
          ? ((await call('check_background_task', { task_id: a.background_task_id, wait_seconds: 300 }))
              .result ?? a)
          : a,
      ),
    ),
  );
  const failures: string[] = [];
  const errors: Record<string, number> = {};
  let exact = 0;
  answers.forEach((a, i) => {
    const failure = judgeQuick(a, `${tag}-${i}\n`);
    if (failure) failures.push(`#${i}: ${failure}`);
    if (a.error_code) errors[a.error_code] = (errors[a.error_code] ?? 0) + 1;
    if (!a.error_code && a.stdout === `${tag}-${i}\n`) exact++;
  });
  // Errors are honest, but a burst answered mostly with errors is not a working tool.
  if (exact < n * 0.95) failures.push(`only ${exact} of ${n} exact; errors: ${JSON.stringify(errors)}`);
  return { failures, errors, exact };
}

/**
 * The 1 MB answers: every byte in the output file. On a busy machine a command may outlast cli's
 * wait and go on as a task (said in its answer): its output is then the task's log, read when the
 * task is done. Returns the failures and how many were read from a task.
 */
async function checkBig(call: Call, answers: Answer[]): Promise<{ failures: string[]; asTasks: number }> {
  const failures: string[] = [];
  let asTasks = 0;
  for (const [i, answer] of answers.entries()) {
    let b = answer;
    let file = b.output_file as string | undefined;
    if (b.background_task_id) {
      asTasks++;
      const done = await call('check_background_task', { task_id: b.background_task_id, wait_seconds: 300 });
      b = done.result ?? done;
      const log = await call('read_background_output', { task_id: answer.background_task_id, limit: 16 });
      file = (log.output_file as string | undefined) ?? (b.output_file as string | undefined);
      if (done.status !== 'completed')
        failures.push(`1 MB #${i} as a task: ${JSON.stringify(done).slice(0, 300)}`);
    }
    if (typeof b.error_code === 'string') continue;
    // the result shows a part; the file holds every byte
    if (!file || statSync(file).size !== MB || readFileSync(file, 'latin1') !== 'a'.repeat(MB))
      failures.push(`1 MB #${i}: ${JSON.stringify({ ...b, stdout: String(b.stdout).length }).slice(0, 300)}`);
  }
  return { failures, asTasks };
}

async function mixedLoad(call: Call, tag: string): Promise<string[]> {
  const failures: string[] = [];
  // 50 background tasks that sleep and then print; 30 terminal sessions; 4 commands of 1 MB each.
  const tasks = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      call('cli_based_tool', { command: `sleep 2; echo ${tag}-task-${i}`, background: true }),
    ),
  );
  const terminals = Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      call('terminal', {
        command: `echo ${tag}-term-${i}; sleep 1; echo ${tag}-term-end-${i}`,
        timeout: 120,
      }),
    ),
  );
  const big = Promise.all(
    Array.from({ length: 4 }, () =>
      call('cli_based_tool', { command: `head -c ${MB} /dev/zero | tr '\\0' a` }),
    ),
  );
  const sleeps = Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      call('cli_based_tool', { command: `sleep 1; echo ${tag}-sleep-${i}` }),
    ),
  );
  const quick = await quickBurst(call, 120, `${tag}-q`);
  failures.push(...quick.failures);

  let terminalsRan = 0;
  for (const [i, t] of (await terminals).entries()) {
    if (typeof t.error_code === 'string') continue;
    terminalsRan++;
    const want = `${tag}-term-${i}\n${tag}-term-end-${i}\n`;
    if (t.output !== want) failures.push(`terminal #${i}: ${JSON.stringify(t).slice(0, 300)}`);
  }
  if (terminalsRan < 28) failures.push(`only ${terminalsRan} of 30 terminal calls ran`);
  failures.push(...(await checkBig(call, await big)).failures);
  for (const [i, s] of (await sleeps).entries()) {
    const failure = judgeQuick(s, `${tag}-sleep-${i}\n`);
    if (failure) failures.push(`sleep #${i}: ${failure}`);
  }
  for (const [i, t] of tasks.entries()) {
    if (typeof t.error_code === 'string') continue;
    const done = await call('check_background_task', { task_id: t.background_task_id, wait_seconds: 120 });
    const out = done.result?.stdout;
    if (
      done.status !== 'completed' ||
      (out !== `${tag}-task-${i}\n` && typeof done.result?.error_code !== 'string')
    )
      failures.push(`task #${i}: ${JSON.stringify(done).slice(0, 300)}`);
  }
  return failures;
}

describe('through conch-mcp', () => {
  let h: Harness;
  let call: Call;
  beforeAll(async () => {
    h = await startServer({ config: CONFIG });
    call = async (name, args) => {
      const result = (await h.client.callTool({ name, arguments: args }, undefined, {
        timeout: 600_000,
      })) as CallToolResult;
      return (result.structuredContent ?? {}) as Answer;
    };
  });
  afterAll(async () => h?.close());

  it('400 concurrent quick calls (two rounds of 200 and one of 400): every output exact, or an error_code', async () => {
    for (const [round, n] of [200, 200, 400].entries()) {
      const { failures } = await quickBurst(call, n, `mcp${round}`);
      expect(failures).toEqual([]);
    }
  }, 600_000);

  it('the mixed load: 120 quick calls beside 1 MB outputs, sleeps, 30 terminals and 50 tasks lose nothing', async () => {
    expect(await mixedLoad(call, 'mcpmix')).toEqual([]);
  }, 600_000);
});

/**
 * A registry whose cli stops waiting after 1 ms, so every call goes on as a background task: what
 * a loaded machine does to commands that take seconds.
 */
async function everyCallATask(prefix: string): Promise<{ registry: PluginRegistry; call: Call }> {
  const registry = new PluginRegistry({
    cwd: tempDir(prefix),
    logger: pino({ level: 'silent' }),
    plugins: [permissionPlugin, cliPlugin, backgroundPlugin],
  });
  for (const p of ['permission', 'background']) await registry.exposeTool(p, {});
  await registry.exposeTool('cli', { autoBackgroundThreshold: 0.001 });
  return { registry, call: (name, args) => registry.execute(name, args) as Promise<Answer> };
}

describe('through the host API', () => {
  let registry: PluginRegistry;
  let call: Call;
  beforeAll(async () => {
    const cwd = tempDir('conch-load-');
    registry = new PluginRegistry({
      cwd,
      logger: pino({ level: 'silent' }),
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin],
    });
    for (const p of ['permission', 'background', 'cli']) await registry.exposeTool(p, {});
    await registry.exposeTool('terminal', TERMINAL);
    call = (name, args) => registry.execute(name, args) as Promise<Answer>;
  });
  afterAll(async () => registry?.dispose());

  it('400 concurrent quick calls, twice: every output exact, or an error_code', async () => {
    for (const round of [0, 1]) {
      const { failures } = await quickBurst(call, 400, `api${round}`);
      expect(failures).toEqual([]);
    }
  }, 600_000);

  it('the mixed load loses nothing', async () => {
    expect(await mixedLoad(call, 'apimix')).toEqual([]);
  }, 600_000);

  it('150 quick calls that all go on as tasks: every result is there when the model comes back for it', async () => {
    // What a loaded machine does to a burst (cli stops waiting on each; a 1 ms threshold does it
    // here without the load): more finished tasks than the history's 100 before the first check.
    const { registry: allTasks, call: viaTask } = await everyCallATask('conch-load-burst-');
    try {
      const answers = await Promise.all(
        Array.from({ length: 150 }, (_, i) =>
          viaTask('cli_based_tool', { command: `sleep 0.05; echo burst-${i}` }),
        ),
      );
      const service = allTasks.resolve(BACKGROUND_SERVICE);
      const ids = answers.map((a) => a.background_task_id as string | undefined);
      expect(ids.filter(Boolean).length).toBeGreaterThan(100);
      // Every one has finished (the host waiting is not the model reading) before any is checked.
      for (const id of ids) if (id) await service.whenFinished(id);
      const failures: string[] = [];
      for (const [i, id] of ids.entries()) {
        const done = id ? await viaTask('check_background_task', { task_id: id }) : answers[i]!;
        const out = (id ? done.result : done)?.stdout;
        if (out !== `burst-${i}\n`) failures.push(`#${i}: ${JSON.stringify(done).slice(0, 300)}`);
      }
      expect(failures).toEqual([]);
    } finally {
      await allTasks.dispose();
    }
  }, 600_000);

  it('a 1 MB command that goes on as a task (cli stopped waiting) still gives every byte', async () => {
    const { registry: quickToTask, call: viaTask } = await everyCallATask('conch-load-task-');
    try {
      const answers = await Promise.all(
        Array.from({ length: 2 }, () =>
          viaTask('cli_based_tool', { command: `sleep 0.2; head -c ${MB} /dev/zero | tr '\\0' a` }),
        ),
      );
      const { failures, asTasks } = await checkBig(viaTask, answers);
      expect(failures).toEqual([]);
      expect(asTasks).toBe(2);
    } finally {
      await quickToTask.dispose();
    }
  }, 600_000);
});
