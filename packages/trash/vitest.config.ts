import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// Tests never write into the user's real XDG directories.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const xdg = scratchDir('conch-trash-xdg-');

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
