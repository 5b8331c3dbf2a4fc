#!/usr/bin/env node
// `pnpm test`: every package's tests, one package at a time, through turbo (`--continue`, so every
// package reports even when one fails). Output streams as turbo prints it. When something failed,
// the failures are printed again at the end: each failed package's vitest failure report (its
// "Failed Tests" / "Unhandled Errors" sections, or its last lines for a runner without them). A log
// shown from its tail (CI's) then still names the test that failed and why, however long the run.
// Arguments are passed on to `turbo run test` (`pnpm test --filter @conch/process`).
import { spawn } from 'node:child_process';
import { toolchainEnv, turboBin } from './toolchain.mjs';

const MAX_LINES_PER_PACKAGE = 250;
// The section markers of vitest's default reporter, and the line of a package whose task failed.
const REPORT_START = /⎯{2,} (Failed Tests \d+|Unhandled Errors?|Failed Suites \d+) ⎯{2,}/;
const FAILED_TASKS = /^\s*Failed:\s+(.+)$/;
// eslint-disable-next-line no-control-regex -- ANSI escape sequences are what this strips.
const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/g;

const child = spawn(turboBin(), ['run', 'test', '--concurrency=1', '--continue', ...process.argv.slice(2)], {
  stdio: ['inherit', 'pipe', 'inherit'],
  // The compiler found is part of the build's cache key (scripts/toolchain.mjs).
  env: toolchainEnv(),
});

/** task name ("@conch/process:test") -> its lines, prefix removed, ANSI stripped */
const byTask = new Map();
const failed = new Set();
let partial = '';
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  const text = partial + chunk.toString('utf8');
  const lines = text.split('\n');
  partial = lines.pop() ?? '';
  for (const line of lines) collect(line);
});

function collect(raw) {
  const line = raw.replace(ANSI, '');
  const failedLine = FAILED_TASKS.exec(line);
  if (failedLine) {
    for (const task of failedLine[1].split(',')) failed.add(task.trim().replace('#', ':'));
    return;
  }
  const match = /^(\S+:[\w-]+): ?(.*)$/.exec(line);
  if (!match) return;
  const [, task, rest] = match;
  let lines = byTask.get(task);
  if (!lines) byTask.set(task, (lines = []));
  lines.push(rest);
}

child.on('close', (code, signal) => {
  if (partial) collect(partial);
  if (failed.size > 0) {
    const out = ['', '== failures, again (each failed package, from its failure report)'];
    for (const task of failed) {
      const lines = byTask.get(task) ?? [];
      const start = lines.findIndex((l) => REPORT_START.test(l));
      const report = start >= 0 ? lines.slice(start) : lines.slice(-60);
      const shown = report.length > MAX_LINES_PER_PACKAGE ? report.slice(0, MAX_LINES_PER_PACKAGE) : report;
      out.push('', `-- ${task}`, ...shown);
      if (shown.length < report.length)
        out.push(`(${report.length - shown.length} more lines above, in the run's output)`);
    }
    process.stdout.write(out.join('\n') + '\n');
  }
  process.exitCode = code ?? (signal ? 1 : 0);
});

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
