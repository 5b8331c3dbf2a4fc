// The per-call suite's node floor, beside the C one (spawn-true.c, same protocol): a small node
// process, about the size of conch's supervisor, that reads a count per line on stdin, spawns the
// program (argv[2], default /bin/true) that many times with node:child_process, one after another,
// and answers one line: each spawn-to-exit time in ms, space-separated. stdio is piped, as a
// command's output is.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const file = process.argv[2] ?? '/bin/true';

function once() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(file, [], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${file} exited ${code}`)),
    );
  });
}

for await (const line of createInterface({ input: process.stdin })) {
  const n = Number.parseInt(line, 10);
  const times = [];
  try {
    for (let i = 0; i < n; i++) times.push((await once()).toFixed(4));
    process.stdout.write(`${times.join(' ')}\n`);
  } catch (error) {
    process.stdout.write(`error ${error.message}\n`);
    process.exit(1);
  }
}
