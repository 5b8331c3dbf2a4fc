import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
const state = mkdtempSync(join(tmpdir(), 'conch-environment-state-'));
// Removed when vitest exits, with everything the tests left in it (what cannot be removed, such as
// a read-only module cache a toolchain test made, stays; the run's outcome does not change).
process.once('exit', () => {
  try {
    rmSync(state, { recursive: true, force: true });
  } catch {
    // left in the temp dir
  }
});

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    env: { XDG_STATE_HOME: state },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
