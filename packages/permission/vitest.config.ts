import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const state = scratchDir('conch-permission-state-');

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    env: { XDG_STATE_HOME: state },
    testTimeout: 30_000,
    setupFiles: ['./src/test-support/parser-loaded.ts'],
  },
});
