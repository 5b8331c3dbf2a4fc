// Runs one 1 GiB flood in a fresh node process, so its peak RSS is its own: `raw` drains the pipe of
// a plain node:child_process spawn into a file (with backpressure: the least keeping every byte can
// cost), `conch` captures it through a ProcessManager (bounded head + tail in memory, every byte to
// a spill file). Prints { secs, growthMiB, rssMiB, bytes, fileBytes }.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ProcessManager } from '@conch/process';

const [mode, flood] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), 'conch-bench-flood-'));
globalThis.gc?.();
const before = process.memoryUsage().rss;
let peak = before;
const sampler = setInterval(() => {
  peak = Math.max(peak, process.memoryUsage().rss);
}, 5);
const t0 = performance.now();
let bytes = -1;
let fileBytes = -1;
if (mode === 'raw') {
  const file = join(dir, 'raw.out');
  const child = spawn('/bin/sh', ['-c', flood], { stdio: ['ignore', 'pipe', 'ignore'] });
  await pipeline(child.stdout, createWriteStream(file, { highWaterMark: 1024 * 1024 }));
  bytes = fileBytes = statSync(file).size;
} else {
  const manager = new ProcessManager({ tempDir: () => dir });
  const result = await manager.spawn(flood, [], { shell: true }).result;
  bytes = result.stdout.totalBytes;
  fileBytes = result.stdout.spillPath ? statSync(result.stdout.spillPath).size : 0;
  await manager.dispose();
}
const secs = (performance.now() - t0) / 1000;
clearInterval(sampler);
peak = Math.max(peak, process.memoryUsage().rss, process.resourceUsage().maxRSS * 1024);
rmSync(dir, { recursive: true, force: true });
process.stdout.write(
  JSON.stringify({
    secs,
    growthMiB: (peak - before) / 1024 / 1024,
    rssMiB: peak / 1024 / 1024,
    bytes,
    fileBytes,
  }),
);
