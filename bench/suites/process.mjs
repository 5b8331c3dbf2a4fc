// @conch/process against raw node:child_process: spawn-to-exit of `true`, and 1 GiB through the
// bounded capture (throughput vs draining the raw pipe, peak RSS growth).
import { ProcessManager } from '@conch/process';
import { rawRun } from '../lib.mjs';

const GiB = 1024 * 1024 * 1024;
const FLOOD = `yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c ${GiB}`;

export default async function ({ median }) {
  const manager = new ProcessManager();
  const rows = [];
  try {
    // Warm up both paths, then alternate so machine load hits both alike.
    for (let i = 0; i < 20; i++) {
      await rawRun('true', []);
      await manager.spawn('true').result;
    }
    const raw = [];
    const conch = [];
    for (let i = 0; i < 300; i++) {
      let t0 = performance.now();
      await rawRun('true', []);
      raw.push(performance.now() - t0);
      t0 = performance.now();
      await manager.spawn('true').result;
      conch.push(performance.now() - t0);
    }
    const c = median(conch);
    const b = median(raw);
    rows.push({
      name: 'process: spawn-to-exit `true` (median of 300)',
      conch: c,
      baseline: b,
      unit: 'ms',
      ratio: c / b,
      goal: 'ratio <= 1.15',
      pass: c / b <= 1.15,
    });

    globalThis.gc?.();
    let t0 = performance.now();
    await rawRun('/bin/sh', ['-c', FLOOD]);
    const rawSecs = (performance.now() - t0) / 1000;

    globalThis.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    t0 = performance.now();
    const result = await manager.spawn(FLOOD, [], { shell: true }).result;
    const conchSecs = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage().rss);
    if (result.stdout.totalBytes !== GiB)
      throw new Error(`captured ${result.stdout.totalBytes} bytes, expected ${GiB}`);
    const rawMBs = GiB / 1e6 / rawSecs;
    const conchMBs = GiB / 1e6 / conchSecs;
    rows.push({
      name: 'process: 1 GiB through capture + spill (throughput)',
      conch: conchMBs,
      baseline: rawMBs,
      unit: 'MB/s',
      ratio: conchMBs / rawMBs,
      goal: 'ratio >= 0.5',
      pass: conchMBs / rawMBs >= 0.5,
    });
    const growthMiB = (peak - before) / 1024 / 1024;
    rows.push({
      name: 'process: 1 GiB through capture (peak RSS growth)',
      conch: growthMiB,
      baseline: 64,
      unit: 'MiB',
      ratio: growthMiB / 64,
      goal: 'conch <= 64 MiB',
      pass: growthMiB <= 64,
    });
  } finally {
    await manager.dispose();
  }
  return rows;
}
