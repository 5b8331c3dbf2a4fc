// Runs one 1 GiB flood in a fresh node process, so its peak RSS is its own: `raw` drains the pipe
// of a plain node:child_process spawn, `conch` captures it through a ProcessManager (bounded
// head + tail in memory, every byte to a spill file). Prints { secs, growthMiB, bytes }.
import { ProcessManager } from '@conch/process';
import { rawRun } from '../../lib.mjs';

const [mode, flood] = process.argv.slice(2);
globalThis.gc?.();
const before = process.memoryUsage().rss;
let peak = before;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 5);
const t0 = performance.now();
let bytes = -1;
if (mode === 'raw') {
  await rawRun('/bin/sh', ['-c', flood]);
} else {
  const manager = new ProcessManager();
  const result = await manager.spawn(flood, [], { shell: true }).result;
  bytes = result.stdout.totalBytes;
  await manager.dispose();
}
const secs = (performance.now() - t0) / 1000;
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage().rss, process.resourceUsage().maxRSS * 1024);
process.stdout.write(JSON.stringify({ secs, growthMiB: (peak - before) / 1024 / 1024, bytes }));
