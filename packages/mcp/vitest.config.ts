import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// conch-mcp keeps what it last loaded in each workspace in $XDG_STATE_HOME/conch/trust.json: the
// servers these tests start (they inherit this environment) use a throwaway one, never the user's.
const xdg = mkdtempSync(join(tmpdir(), 'conch-mcp-xdg-'));
// Removed when vitest exits, with everything the tests left in it (what cannot be removed, such as
// a read-only module cache a toolchain test made, stays; the run's outcome does not change).
process.once('exit', () => {
  try {
    rmSync(xdg, { recursive: true, force: true });
  } catch {
    // left in the temp dir
  }
});

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['src/test-support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    env: { XDG_STATE_HOME: join(xdg, 'state') },
  },
});
