import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// Output files and the trash default to the user's XDG directories: tests get their own.
const xdg = mkdtempSync(join(tmpdir(), 'conch-cli-xdg-'));

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
