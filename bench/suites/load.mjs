// A quick call under load against the same call idle (issue 33): cli_based_tool `echo` through the
// host API, one at a time with the registry otherwise idle, then while the same registry carries the
// mixed load of the load test (packages/mcp/src/load.test.ts) — 30 terminal sessions printing,
// 50 background tasks, 1 MB outputs in a loop and a burst of 40 concurrent quick calls each round.
// p50 and p99 of the measured call, ratio to idle; the host's RSS beside them. Every answer is
// checked: a lost output fails the row.
import 'reflect-metadata';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { permissionPlugin } from '@conch/permission';
import { terminalPlugin } from '@conch/terminal';
import { median, percentile } from '../lib.mjs';

const mib = (bytes) => `${Math.round(bytes / 2 ** 20)} MiB`;
const SAMPLES = 60;

export default async function () {
  const ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-bench-load-')));
  const registry = new PluginRegistry({
    cwd: ws,
    plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin],
  });
  for (const p of ['permission', 'background', 'cli']) await registry.expose(p, {});
  await registry.expose('terminal', { maxSessions: 32 });
  let lost = 0;
  const quick = async (i) => {
    const t0 = performance.now();
    const r = await registry.execute('cli_based_tool', { command: `echo q${i}` });
    const ms = performance.now() - t0;
    if (!r.error_code && !r.background_task_id && r.stdout !== `q${i}\n`) lost++;
    return ms;
  };
  try {
    for (let i = 0; i < 10; i++) await quick(i); // warm-up
    const idle = [];
    for (let i = 0; i < SAMPLES; i++) idle.push(await quick(i));

    let stop = false;
    const loops = [];
    // 30 terminal sessions, each printing in a loop
    for (let t = 0; t < 30; t++)
      loops.push(
        (async () => {
          while (!stop)
            await registry.execute('terminal', {
              command: `for i in $(seq 1 200); do echo t${t}-$i; done`,
              timeout: 120,
            });
        })(),
      );
    // 50 background tasks that sleep and print
    const tasks = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        registry.execute('cli_based_tool', {
          command: `for i in $(seq 1 600); do echo task${i}-$i; sleep 0.1; done`,
          background: true,
        }),
      ),
    );
    // 1 MB outputs, two at a time
    for (let b = 0; b < 2; b++)
      loops.push(
        (async () => {
          while (!stop)
            await registry.execute('cli_based_tool', { command: "head -c 1000000 /dev/zero | tr '\\0' a" });
        })(),
      );
    // a burst of 40 concurrent quick calls, again and again
    loops.push(
      (async () => {
        let round = 0;
        while (!stop) {
          await Promise.all(Array.from({ length: 40 }, (_, i) => quick(100_000 + round * 100 + i)));
          round++;
        }
      })(),
    );
    const loaded = [];
    let peakRss = process.memoryUsage().rss;
    for (let i = 0; i < SAMPLES; i++) {
      loaded.push(await quick(10_000 + i));
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }
    stop = true;
    await Promise.all(loops);
    await Promise.all(
      tasks.map(
        (t) =>
          t.background_task_id &&
          registry.execute('cancel_background_task', { task_id: t.background_task_id }),
      ),
    );
    const rows = [];
    for (const p of [50, 99]) {
      const conch = p === 50 ? median(loaded) : percentile(loaded, p);
      const baseline = p === 50 ? median(idle) : percentile(idle, p);
      rows.push({
        name: `load: cli \`echo\` p${p} under the mixed load (30 terminals, 50 tasks, 1 MB outputs, bursts of 40) vs idle, ${SAMPLES} calls; host RSS peak ${mib(peakRss)}; ${lost} lost`,
        conch,
        baseline,
        unit: 'ms',
        ratio: conch / baseline,
        goal: 'info; 0 lost',
        pass: lost === 0,
      });
    }
    return rows;
  } finally {
    await registry.dispose();
    rmSync(ws, { recursive: true, force: true });
  }
}
