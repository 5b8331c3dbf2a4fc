import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// Output files and the trash default to the user's XDG directories: tests get their own.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const xdg = scratchDir('conch-cli-xdg-');

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
    env: {
      XDG_STATE_HOME: join(xdg, 'state'),
      XDG_DATA_HOME: join(xdg, 'data'),
      XDG_CACHE_HOME: join(xdg, 'cache'),
    },
  },
});
