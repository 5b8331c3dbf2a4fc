import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// discover() keeps its pins in $XDG_STATE_HOME/conch/trust.json: tests get their own, never the user's.
const xdg = mkdtempSync(join(tmpdir(), 'conch-core-xdg-'));

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
    env: { XDG_STATE_HOME: join(xdg, 'state') },
  },
});
