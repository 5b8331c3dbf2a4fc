// A third-party plugin that throws from its own timer (or leaves a rejection nobody awaits) does not end conch-mcp: the error is logged naming the plugin, and the server keeps serving every tool.
import { join } from 'node:path';
import { isAlive, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, test } from 'vitest';
import { type Harness, startServer } from './test-support/harness.js';

const MISBEHAVING = join(import.meta.dirname, 'test-support', 'misbehaving-plugins');

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('conch-mcp with a misbehaving plugin', () => {
  test('an exception from a plugin timer is logged with the plugin name and the server keeps serving', async () => {
    harness = await startServer({ config: { pluginDirs: [MISBEHAVING], plugins: { 'timer-bomb': {} } } });
    const h = harness;
    const armed = await h.client.callTool({ name: 'arm_timer', arguments: { ms: 10 } });
    expect(armed.isError).toBeFalsy();
    await waitFor(
      () =>
        h.stderr().includes('boom from a plugin timer') && h.stderr().includes('a rejection nobody awaits'),
      { what: 'both errors in the log', timeoutMs: 20_000 },
    );
    expect(isAlive(h.serverPid)).toBe(true);
    const lines = h
      .stderr()
      .split('\n')
      .filter((l) => l.includes('keeps serving'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.msg)).toEqual(
      expect.arrayContaining([
        "conch-mcp: uncaught exception from plugin 'timer-bomb'; logged, the server keeps serving",
        "conch-mcp: unhandled promise rejection from plugin 'timer-bomb'; logged, the server keeps serving",
      ]),
    );
    expect(lines.every((l) => l.plugin === 'timer-bomb')).toBe(true);
    // Still serving, and a result JSON cannot carry as it is (a BigInt) arrives converted.
    const big = await h.client.callTool({ name: 'big_number', arguments: {} });
    expect(big.isError).toBeFalsy();
    expect(JSON.stringify(big.content)).toContain('12345678901234567890');
    const again = await h.client.callTool({ name: 'arm_timer', arguments: { ms: 0 } });
    expect(again.isError).toBeFalsy();
    expect(isAlive(h.serverPid)).toBe(true);
  });
});
