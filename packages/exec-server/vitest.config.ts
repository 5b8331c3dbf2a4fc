import { join } from 'node:path';
import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// Local targets (a pipe, a fake kubectl "pod" that is not isolated) inherit this environment: the
// bundle cache, output files and the trash go to throwaway XDG directories, never the real
// ~/.cache or ~/.local/share (which an earlier run, or a real use of conch, may already hold).
// HOME stays: sshd logs the test user in with the passwd home, and the isolated targets mount
// their own ~/.cache over it.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const xdg = scratchDir('conch-exec-xdg-');

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['src/test-support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file starts real sshd / containers / servers; two cores: one file at a time.
    fileParallelism: false,
    env: {
      XDG_STATE_HOME: join(xdg, 'state'),
      XDG_CACHE_HOME: join(xdg, 'cache'),
      XDG_DATA_HOME: join(xdg, 'data'),
    },
  },
});
