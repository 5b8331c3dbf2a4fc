// Invariant: every terminal default the reference terminal (Clacky) also has is either its value or a deviation the README measures, and a host can set the reference's value: idle (10 s, here a small value to stay fast), the DISABLED_IDLE_MS sentinel, the head-only overflow preview, the exact slow-command list.
import { existsSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SLOW_PATTERNS } from '@conch/process';
import {
  DISABLED_IDLE_MS,
  SEED_SLOW_PATTERNS,
  SEED_TERMINAL_CONFIG,
  terminalConfigSchema,
} from './config.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

describe('terminal defaults against the reference terminal', () => {
  it('the defaults are the reference values except the measured idle; the reference values all parse', () => {
    const d = terminalConfigSchema.parse({});
    expect(d).toMatchObject({
      defaultIdleMs: 20_000, // measured deviation (README): the reference's is 10 000
      defaultTimeout: 60,
      backgroundCollectMs: 2000,
      maxOutputChars: 4000,
      maxLineChars: 500,
      slowCommandTimeout: 180,
      defaultSlowPatterns: true,
    });
    expect(d.overflowPreviewChars).toBeUndefined();
    const seed = terminalConfigSchema.parse(SEED_TERMINAL_CONFIG);
    expect(seed).toMatchObject({
      defaultIdleMs: 10_000,
      overflowPreviewChars: 3800,
      pollQuietMs: 10_000,
      defaultSlowPatterns: false,
    });
    expect(DISABLED_IDLE_MS).toBe(10_000_000);
    // Every slow command of the reference's list is in the shared table conch uses by default.
    const shared = new Set(DEFAULT_SLOW_PATTERNS.map((p) => p.pattern));
    expect(SEED_SLOW_PATTERNS.filter((p) => !shared.has(p))).toEqual([]);
  });

  it('a host-configured idle takes effect: a silent command returns waiting after it', async () => {
    h = createHarness({ defaultIdleMs: 400 });
    const started = Date.now();
    const r = await h.call({ command: 'sleep 4; echo late' });
    const took = Date.now() - started;
    expect(r).toMatchObject({ state: 'waiting' });
    expect(took).toBeLessThan(3000);
    await h.call({ session_id: r.session_id, kill: true });
  });

  it('idle_ms: DISABLED_IDLE_MS (the reference sentinel) disables the idle return like 0', async () => {
    h = createHarness({ defaultIdleMs: 200 });
    for (const idle_ms of [DISABLED_IDLE_MS, 0]) {
      const r = await h.call({ command: 'sleep 1; echo finished', idle_ms });
      expect(r, String(idle_ms)).toMatchObject({ exit_code: 0, output: 'finished\n' });
    }
  });

  it('overflowPreviewChars: the first N characters and a notice, within maxOutputChars; the file has all', async () => {
    h = createHarness({ overflowPreviewChars: 3800 });
    const r = (await h.call({ command: 'seq 1 5000' })) as { output: string; output_file: string };
    expect(r.output.startsWith('1\n2\n3\n')).toBe(true);
    expect(r.output.length).toBeLessThanOrEqual(4000);
    expect(r.output.length).toBeGreaterThan(3800);
    expect(r.output).toMatch(/output truncated: \d+ chars; full output: /);
    expect(r.output).not.toMatch(/\n5000\n/);
    expect(existsSync(r.output_file)).toBe(true);
    expect(readFileSync(r.output_file, 'utf8')).toMatch(/\n5000\n/);
    // The default keeps the head and the tail (the end of a failing build is where its error is).
    await h.dispose();
    h = createHarness({});
    const d = (await h.call({ command: 'seq 1 5000' })) as { output: string };
    expect(d.output).toMatch(/\n5000\n$/);
    expect(d.output.length).toBeLessThanOrEqual(4000);
  });

  it('defaultSlowPatterns: false with the host list: only its entries are slow (no idle return)', async () => {
    h = createHarness({ defaultIdleMs: 200, defaultSlowPatterns: false, slowPatterns: ['sleep'] });
    expect(await h.call({ command: 'sleep 1; echo slow-done' })).toMatchObject({
      exit_code: 0,
      output: 'slow-done\n',
    });
  });
});
