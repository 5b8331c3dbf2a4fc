import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// conch-mcp keeps what it last loaded in each workspace in $XDG_STATE_HOME/conch/trust.json: the
// servers these tests start (they inherit this environment) use a throwaway one, never the user's.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const xdg = scratchDir('conch-mcp-xdg-');

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['src/test-support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    env: { XDG_STATE_HOME: join(xdg, 'state') },
  },
});
