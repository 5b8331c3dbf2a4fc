// Measures how long real build/test/install steps stay silent under a PTY, to choose the
// terminal's default idle_ms (the silence after which a running command is reported as waiting).
// Usage: node scripts/measure-idle-gaps.mjs '<command>' ['<command>' ...]   (run from the repo root)
import pty from '@lydell/node-pty';

function measure(command) {
  return new Promise((resolve) => {
    const started = performance.now();
    let last = started;
    let firstOutput;
    let maxGap = 0;
    const gaps = [];
    const term = pty.spawn('bash', ['-c', command], {
      cols: 160,
      rows: 40,
      cwd: process.cwd(),
      env: process.env,
    });
    term.onData(() => {
      const now = performance.now();
      firstOutput ??= now - started;
      const gap = now - last;
      if (gap > 50) gaps.push(gap);
      maxGap = Math.max(maxGap, gap);
      last = now;
    });
    term.onExit(({ exitCode }) => {
      const end = performance.now();
      const tailGap = end - last;
      gaps.sort((a, b) => b - a);
      resolve({
        command,
        exitCode,
        totalMs: Math.round(end - started),
        firstOutputMs: Math.round(firstOutput ?? end - started),
        maxGapMs: Math.round(Math.max(maxGap, tailGap)),
        topGapsMs: gaps.slice(0, 5).map(Math.round),
      });
    });
  });
}

for (const command of process.argv.slice(2)) console.log(JSON.stringify(await measure(command)));
