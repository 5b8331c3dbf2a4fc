// Invariant: wait_for returns a start or a poll as soon as new output matches, reports a miss at the timeout, and a regex that does not compile is refused naming the field.
import { InvalidArgumentsError } from '@conch/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

/** A dev server: noise, then a readiness line after a pause, then it keeps running. */
const SERVER =
  "printf 'compiling...\\n'; sleep 1; printf '\\033[32m  ➜  Local:\\033[0m http://localhost:5173/  ready in 812 ms\\n'; sleep 300";

describe('wait_for', () => {
  it('starts a server in the background and returns on its readiness line', async () => {
    // backgroundCollectMs is short: only wait_for keeps the call until the line.
    h = createHarness({ backgroundCollectMs: 200 });
    const r = (await h.call({
      command: SERVER,
      background: true,
      wait_for: 'listening on|ready in',
    })) as Record<string, unknown>;
    expect(r).toMatchObject({
      state: 'background',
      wait_for_matched: true,
      matched_line: '➜  Local: http://localhost:5173/  ready in 812 ms',
    });
    expect(r.output).toContain('compiling...\n');
    expect(r.output).toContain('ready in 812 ms');
    // Polling for something it never prints: a miss at the timeout, the server still running.
    const miss = await h.call({ session_id: r.session_id, input: '', wait_for: 'error', timeout: 0.5 });
    expect(miss).toMatchObject({ session_id: r.session_id, state: 'background', wait_for_matched: false });
  });

  it('a poll returns on new output that matches, not on a quiet spell', async () => {
    // pollQuietMs would end a plain poll after 100 ms of quiet; wait_for waits through it.
    h = createHarness({ pollQuietMs: 100, backgroundCollectMs: 100 });
    const started = (await h.call({
      command: 'echo booting; sleep 1.5; echo "Server listening on :8080"; sleep 300',
      background: true,
    })) as Record<string, unknown>;
    expect(started).toMatchObject({ state: 'background' });
    const ready = await h.call({
      session_id: started.session_id,
      input: '',
      wait_for: 'listening on',
      timeout: 30,
    });
    expect(ready).toMatchObject({ wait_for_matched: true, matched_line: 'Server listening on :8080' });
  });

  it('reports a command that ends before it matched', async () => {
    h = createHarness();
    const r = await h.call({
      command: 'echo "Error: port in use"; exit 3',
      background: true,
      wait_for: 'ready',
    });
    expect(r).toMatchObject({ exit_code: 3, wait_for_matched: false, output: 'Error: port in use\n' });
  });

  it('refuses an invalid regex with an error naming wait_for', async () => {
    h = createHarness();
    const call = h.call({ command: 'true', wait_for: '(unclosed' });
    await expect(call).rejects.toThrow(InvalidArgumentsError);
    await expect(h.call({ session_id: 1, input: '', wait_for: '[z-a]' })).rejects.toThrow(
      /wait_for.*expected a JavaScript regular expression; "\[z-a\]" is not one/s,
    );
  });
});
