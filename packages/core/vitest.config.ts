import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// discover() keeps its pins in $XDG_STATE_HOME/conch/trust.json: tests get their own, never the user's.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const xdg = scratchDir('conch-core-xdg-');

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
    env: { XDG_STATE_HOME: join(xdg, 'state') },
  },
});
