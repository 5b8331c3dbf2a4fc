import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
const state = mkdtempSync(join(tmpdir(), 'conch-process-state-'));

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    env: { XDG_STATE_HOME: state },
    globalSetup: ['src/test-support/global-setup.ts'],
    testTimeout: 30_000,
  },
});
