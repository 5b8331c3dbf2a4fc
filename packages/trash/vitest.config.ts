import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// Tests never write into the user's real XDG directories.
const xdg = mkdtempSync(join(tmpdir(), 'conch-trash-xdg-'));

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
