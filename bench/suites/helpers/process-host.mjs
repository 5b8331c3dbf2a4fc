// A long-lived host for the process suite's big-host rows: allocates (and touches) `allocMiB` of
// memory, then answers { mode: 'conch' | 'cli' | 'raw' | 'idle' | 'settle', runs } requests over IPC
// by running `runs` spawn-to-exit of `true` through a ProcessManager, through cli_based_tool
// (permission gate included), or with a raw node:child_process spawn (or, for 'idle', waiting as
// long; for 'settle', until the registry's warm-up at expose has run), while a timer samples the
// event loop. The suite interleaves requests to
// several hosts so machine load hits all of them alike. Replies { times, maxStallMs, rssMiB }.
import 'reflect-metadata';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { ProcessManager } from '@conch/process';
import { rawRun } from '../../lib.mjs';
import { warmedUp } from './warmed-up.mjs';

const allocMiB = Number(process.argv[2]);
// Buffer.alloc(size, 1) writes every page: resident memory, as a long-lived agent host has.
const ballast = allocMiB > 0 ? Buffer.alloc(allocMiB * 1024 * 1024, 1) : undefined;
const manager = new ProcessManager();
// cli_based_tool as a host runs it: the real permission gate (whose read-only verdict puts `true`
// in the read-only sandbox where bwrap works), the cli plugin and background tasks.
const registry = new PluginRegistry({ plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
await registry.expose('permission', {});
await registry.expose('cli', {});
const spawnOnce = {
  conch: () => manager.spawn('true').result,
  cli: async () => {
    const r = await registry.execute('cli_based_tool', { command: 'true' });
    if (r.returncode !== 0 || r.mode !== 'direct') throw new Error(`unexpected result ${JSON.stringify(r)}`);
  },
  raw: () => rawRun('true', []),
};

process.on('message', async ({ mode, runs, idleMs }) => {
  // The histogram records how late its 1 ms timer fired: the longest stall, less the 1 ms period.
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const times = [];
  if (mode === 'settle') {
    await warmedUp(registry);
  } else if (mode === 'idle') {
    await new Promise((resolve) => setTimeout(resolve, idleMs));
  } else {
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      await spawnOnce[mode]();
      times.push(performance.now() - t0);
    }
  }
  histogram.disable();
  process.send({
    times,
    maxStallMs: Math.max(0, histogram.max / 1e6 - 1),
    rssMiB: process.memoryUsage().rss / 1024 / 1024,
    ballast: ballast?.length ?? 0,
  });
});
process.on('disconnect', () => {
  void Promise.all([manager.dispose(), registry.dispose()]).then(() => process.exit(0));
});
process.send({ ready: true });
