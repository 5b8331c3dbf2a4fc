import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// Output files and the trash default to the user's XDG directories, and every session reads the
// rc files of $HOME (and bash wrote its history there): tests get their own, empty ones, so no
// run depends on the machine's rc files (a pyenv init took seconds per shell) or on what an
// earlier run left in them. Tests about rc files write their own HOME.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const scratch = scratchDir('conch-terminal-xdg-');
const home = join(scratch, 'home');
mkdirSync(home, { mode: 0o700 });

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    // A bound for a hang, not a speed goal: real shells on a loaded machine take their time.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    env: {
      HOME: home,
      XDG_DATA_HOME: join(scratch, 'data'),
      XDG_CACHE_HOME: join(scratch, 'cache'),
      XDG_CONFIG_HOME: join(scratch, 'config'),
      XDG_STATE_HOME: join(scratch, 'state'),
    },
  },
});
