// Small timing helpers shared by the bench suites.
import { spawn } from 'node:child_process';

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Runs fn `runs` times (after `warmup` unmeasured runs) and returns each duration in ms. */
export async function time(fn, { runs = 100, warmup = 5 } = {}) {
  for (let i = 0; i < warmup; i++) await fn(i);
  const out = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn(i);
    out.push(performance.now() - t0);
  }
  return out;
}

/** The baseline every process suite compares against: a raw node:child_process spawn, drained. */
export function rawRun(file, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', () => {});
    child.stderr.on('data', () => {});
    child.on('error', reject);
    child.on('close', resolve);
  });
}

/**
 * Calls each contender makes before a steady-state row times it. A fresh process keeps compiling
 * the code a call runs on V8's helper threads for its first few thousand calls (measured on the
 * 2-core VM, one registry's cli `true` with per-thread CPU from /proc/self/task: 10.0 ms of
 * helper-thread CPU per call over calls 2-20, 2.9 ms over 101-320, 0.37 ms over 1,001-2,000, 0.08
 * ms from 3,001 on, while the main thread went from 3.2 to 0.78 ms), and on 2 cores that work
 * competes with the command being timed. Rows that judge what a call costs a running host time
 * after this many calls; what a fresh host's first few hundred calls cost is reported in rows of
 * its own.
 */
export const JIT_WARMUP_CALLS = 3000;

/** Runs every fn in turn, `calls` rounds (see JIT_WARMUP_CALLS). */
export async function warmUp(fns, calls = JIT_WARMUP_CALLS) {
  for (let i = 0; i < calls; i++) for (const fn of fns) await fn();
}

/**
 * Measures conch and its baseline alternately (after `warmup` unmeasured rounds of both), so
 * machine load hits both alike; returns the two medians in ms.
 */
export async function alternate(conchFn, baselineFn, { runs = 300, warmup = 20 } = {}) {
  for (let i = 0; i < warmup; i++) {
    await baselineFn();
    await conchFn();
  }
  const baseline = [];
  const conch = [];
  for (let i = 0; i < runs; i++) {
    let t0 = performance.now();
    await baselineFn();
    baseline.push(performance.now() - t0);
    t0 = performance.now();
    await conchFn();
    conch.push(performance.now() - t0);
  }
  return { conch: median(conch), baseline: median(baseline) };
}

/**
 * Like `alternate`, for more than two contenders and in blocks: each round runs every contender's
 * block of `block` calls in turn (`blocks` maps a name to `async (n) => times`, the n durations in
 * ms; `timedBlock(fn)` makes one from a single call), after one unmeasured round. A contender that
 * times itself (a helper process reporting its own per-call times) takes its turn the same way.
 * Returns each contender's times, `block * rounds` of them.
 */
export async function alternateBlocks(blocks, { block = 20, rounds = 15 } = {}) {
  const times = Object.fromEntries(Object.keys(blocks).map((name) => [name, []]));
  for (const run of Object.values(blocks)) await run(block);
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of Object.entries(blocks)) times[name].push(...(await run(block)));
  }
  return times;
}

/** A block runner for `alternateBlocks`: n sequential calls of fn, each timed. */
export function timedBlock(fn) {
  return async (n) => {
    const out = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await fn();
      out.push(performance.now() - t0);
    }
    return out;
  };
}
