// 200 background `true` tasks through cli_based_tool with 8 workers, until all have finished,
// against 200 raw node:child_process spawns under p-limit(8).
import 'reflect-metadata';
import { PluginRegistry } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import pLimit from 'p-limit';
import { rawRun } from '../lib.mjs';
import { allowAll } from './helpers/provide.mjs';

const TASKS = 200;

async function conchRound() {
  const registry = new PluginRegistry({ plugins: [allowAll, cliPlugin, backgroundPlugin] });
  await registry.expose('bench-allow-all');
  await registry.expose('cli', { backgroundMaxWorkers: 8 });
  try {
    let finished = 0;
    let failed = 0;
    let resolveAll;
    const all = new Promise((resolve) => (resolveAll = resolve));
    registry.events.on('background.task.finished', (e) => {
      finished++;
      if (e.task.status !== 'completed') failed++;
      if (finished === TASKS) resolveAll();
    });
    const t0 = performance.now();
    for (let i = 0; i < TASKS; i++) {
      const r = await registry.execute('cli_based_tool', { command: 'true', background: true });
      if (!r.background_task_id) throw new Error(`no task id: ${JSON.stringify(r)}`);
    }
    await all;
    const ms = performance.now() - t0;
    if (failed) throw new Error(`${failed} tasks did not complete`);
    return ms;
  } finally {
    await registry.dispose();
  }
}

async function rawRound() {
  const limit = pLimit(8);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: TASKS }, () => limit(() => rawRun('true', []))));
  return performance.now() - t0;
}

export default async function ({ median }) {
  await rawRound();
  await conchRound();
  const raw = [];
  const conch = [];
  for (let i = 0; i < 5; i++) {
    raw.push(await rawRound());
    conch.push(await conchRound());
  }
  const c = median(conch);
  const b = median(raw);
  return [
    {
      name: `background: ${TASKS} \`true\` tasks, 8 workers (median of 5)`,
      conch: c,
      baseline: b,
      unit: 'ms',
      ratio: c / b,
      goal: 'ratio <= 1.5',
      pass: c / b <= 1.5,
    },
  ];
}
