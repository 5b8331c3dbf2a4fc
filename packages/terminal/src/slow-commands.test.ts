// Invariant: a command from the shared slow table waits the slow timeout with no idle return unless the call sets timeout or idle_ms; idle_ms 0 turns idle return off for any command.
import { afterEach, describe, expect, it } from 'vitest';
import { terminalConfigSchema } from './config.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

// A quiet step longer than the idle time and the default timeout of these sessions.
const STEP = 'sleep 2; echo done';
// Defining the function must not itself time out (on a loaded machine a defaultTimeout of 1 s
// returned the definition as 'background', and the next call ran in a new shell without it).
const DEFINE = { timeout: 120 };

describe('slow commands', () => {
  it('defaults to 180 s', () => {
    expect(terminalConfigSchema.parse({}).slowCommandTimeout).toBe(180);
  });

  it('a slow command is not returned on silence or at the default timeout', async () => {
    // `pytest` is in the table: a function of that name stands for it here.
    h = createHarness({ defaultIdleMs: 300, defaultTimeout: 1 });
    expect(await h.call({ command: `pytest() { ${STEP}; }`, ...DEFINE })).toMatchObject({ exit_code: 0 });
    expect(await h.call({ command: 'pytest -x' })).toMatchObject({ exit_code: 0, output: 'done\n' });
    // The same step under another name returns on silence, and keeps running.
    expect(await h.call({ command: `quiet() { ${STEP}; }`, ...DEFINE })).toMatchObject({ exit_code: 0 });
    expect(await h.call({ command: 'quiet' })).toMatchObject({ state: 'waiting' });
  });

  it('the table is extendable by config, and the call can still set idle_ms or timeout', async () => {
    h = createHarness({ defaultIdleMs: 300, defaultTimeout: 1, slowPatterns: ['make-it'] });
    expect(await h.call({ command: `make-it() { ${STEP}; }`, ...DEFINE })).toMatchObject({ exit_code: 0 });
    expect(await h.call({ command: 'make-it all' })).toMatchObject({ exit_code: 0, output: 'done\n' });
    expect(await h.call({ command: 'make-it all', idle_ms: 300 })).toMatchObject({ state: 'waiting' });
  });

  it('the slow timeout is config slowCommandTimeout', async () => {
    h = createHarness({ defaultIdleMs: 300, slowCommandTimeout: 0.5 });
    expect(await h.call({ command: `pytest() { ${STEP}; }`, ...DEFINE })).toMatchObject({ exit_code: 0 });
    // Not 'waiting' (no idle return): the timeout ended the wait.
    expect(await h.call({ command: 'pytest' })).toMatchObject({ state: 'background' });
  });

  it('idle_ms: 0 disables the idle return of any command', async () => {
    h = createHarness({ defaultIdleMs: 300 });
    expect(await h.call({ command: STEP, idle_ms: 0 })).toMatchObject({ exit_code: 0, output: 'done\n' });
  });
});
