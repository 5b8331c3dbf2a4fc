// Invariant: an overflow file handed to the model lives in the per-user output directory and stays readable after the registry that wrote it is disposed — from a new registry too.
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { defaultOutputDir } from '@conch/process';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

describe('output_file', () => {
  it('outlives the registry', async () => {
    const first = createHarness({ maxOutputChars: 500 });
    const r = (await first.call({ command: 'seq 1 20000' })) as { output: string; output_file: string };
    // One directory per workspace under the per-user output directory.
    expect(dirname(dirname(r.output_file))).toBe(defaultOutputDir());
    expect(dirname(r.output_file)).toMatch(/\/ws-[0-9a-f]{16}$/);
    expect(r.output).toContain(r.output_file);
    await first.dispose();
    const text = readFileSync(r.output_file, 'utf8');
    expect(text.split('\n')[19_999]).toBe('20000');
    h = createHarness();
    expect(await h.call({ command: `tail -n 1 '${r.output_file}'` })).toMatchObject({
      exit_code: 0,
      output: '20000\n',
    });
  });
});
