import { scratchDir } from '@conch/test-support';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
// Removed, with everything the tests left in it, when vitest exits (scratchDir).
const state = scratchDir('conch-ai-sdk-state-');

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
