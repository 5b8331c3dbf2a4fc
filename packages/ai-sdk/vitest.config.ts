import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
const state = mkdtempSync(join(tmpdir(), 'conch-ai-sdk-state-'));
// Removed when vitest exits, with everything the tests left in it (what cannot be removed, such as
// a read-only module cache a toolchain test made, stays; the run's outcome does not change).
process.once('exit', () => {
  try {
    rmSync(state, { recursive: true, force: true });
  } catch {
    // left in the temp dir
  }
});

/**
 * The same tests against each supported `ai` major: `ai` is ai 7 (the devDependency), `ai-v6` and
 * `ai-v5` are npm aliases. The alias applies to the adapter's own `import … from 'ai'` too, so each
 * project runs the adapter with the AI SDK a user of that major has.
 */
function project(major: 5 | 6 | 7) {
  const pkg = major === 7 ? 'ai' : `ai-v${major}`;
  return {
    extends: true as const,
    resolve: {
      alias: [
        { find: /^ai$/, replacement: pkg },
        { find: /^ai\/test$/, replacement: `${pkg}/test` },
      ],
    },
    test: { name: `ai${major}`, env: { AI_SDK_MAJOR: String(major) } },
  };
}

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    env: { XDG_STATE_HOME: state },
    testTimeout: 30_000,
    projects: [project(7), project(6), project(5)],
  },
});
