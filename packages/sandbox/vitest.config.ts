import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// Tests never write into the user's real XDG directories.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const xdg = scratchDir('conch-sandbox-xdg-');

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['src/test-support/global-setup.ts'],
    testTimeout: 30_000,
    env: {
      XDG_CACHE_HOME: join(xdg, 'cache'),
      XDG_CONFIG_HOME: join(xdg, 'config'),
      XDG_STATE_HOME: join(xdg, 'state'),
    },
  },
});
