// @conch/process against raw node:child_process: spawn-to-exit of `true`, and 1 GiB through the
// bounded capture (throughput vs draining the raw pipe, peak RSS growth).
import { ProcessManager } from '@conch/process';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { alternate, rawRun } from '../lib.mjs';

const GiB = 1024 * 1024 * 1024;
const FLOOD = `yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c ${GiB}`;

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'helpers', 'flood-child.mjs');

function floodIn(mode) {
  const out = execFileSync(process.execPath, ['--expose-gc', CHILD, mode, FLOOD], { maxBuffer: 1 << 20 });
  return JSON.parse(out.toString());
}

export default async function () {
  const manager = new ProcessManager();
  const rows = [];
  try {
    // Alternate the two so machine load hits both alike.
    const { conch: c, baseline: b } = await alternate(
      () => manager.spawn('true').result,
      () => rawRun('true', []),
    );
    rows.push({
      name: 'process: spawn-to-exit `true` (median of 300)',
      conch: c,
      baseline: b,
      unit: 'ms',
      ratio: c / b,
      goal: 'ratio <= 1.15',
      pass: c / b <= 1.15,
    });

    // Each flood runs in its own node process, so peak RSS growth is that run's alone.
    const rawFlood = floodIn('raw');
    const conchFlood = floodIn('conch');
    if (conchFlood.bytes !== GiB) throw new Error(`captured ${conchFlood.bytes} bytes, expected ${GiB}`);
    const rawMBs = GiB / 1e6 / rawFlood.secs;
    const conchMBs = GiB / 1e6 / conchFlood.secs;
    rows.push({
      name: 'process: 1 GiB through capture + spill (throughput)',
      conch: conchMBs,
      baseline: rawMBs,
      unit: 'MB/s',
      ratio: conchMBs / rawMBs,
      goal: 'ratio >= 0.5',
      pass: conchMBs / rawMBs >= 0.5,
    });
    rows.push({
      name: 'process: 1 GiB through capture (peak RSS growth; baseline: raw pipe drain)',
      conch: conchFlood.growthMiB,
      baseline: rawFlood.growthMiB,
      unit: 'MiB',
      ratio: conchFlood.growthMiB / rawFlood.growthMiB,
      goal: 'conch <= 64 MiB',
      pass: conchFlood.growthMiB <= 64,
    });
  } finally {
    await manager.dispose();
  }
  return rows;
}
