// Invariant: the terminal tool refuses an exec that would replace the session's shell, before it runs and without asking the gate, and the session it would have run in keeps working (bash and zsh).
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { PermissionGate, PermissionRequest } from '@conch/core';
import { createHarness, type Harness } from './test-support/harness.js';

const ZSH = '/usr/bin/zsh';
const SHELLS = [
  { name: 'bash', shell: '/bin/bash' },
  ...(existsSync(ZSH) || process.env.CI ? [{ name: 'zsh', shell: ZSH }] : []),
];

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

describe.each(SHELLS)('exec in a $name session', ({ shell }) => {
  it('refuses exec bash with EXEC_REPLACES_SHELL; the same shell runs the next command', async () => {
    const judged: PermissionRequest[] = [];
    const gate: PermissionGate = {
      check: async (request) => {
        judged.push(request);
        return { outcome: 'allow', reason: 'test' };
      },
    };
    h = createHarness({ shell }, { gate });
    const before = (await h.call({ command: 'echo $$' })) as { output: string };
    for (const command of ['exec bash', 'cd /tmp && exec -a x zsh -f', 'eval "exec sh"']) {
      const refused = await h.call({ command });
      expect(refused, command).toMatchObject({
        error_code: 'EXEC_REPLACES_SHELL',
        error: expect.stringContaining("would replace the session's shell"),
        display: expect.stringMatching(/^✗ EXEC_REPLACES_SHELL: /),
      });
    }
    // Nothing was asked about the refused commands, and the shell is the one from before.
    expect(judged.map((r) => (r.kind === 'command' ? r.command : ''))).toEqual(['echo $$']);
    const after = await h.call({ command: 'echo $$; exec 3>/dev/null; echo still here' });
    expect(after).toMatchObject({ exit_code: 0, output: `${before.output}still here\n` });
  });
});
