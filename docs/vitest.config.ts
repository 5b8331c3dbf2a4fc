import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
const state = mkdtempSync(join(tmpdir(), 'conch-docs-state-'));
// Removed when vitest's main process ends (workers only receive the path in their env).
process.once('exit', () => rmSync(state, { recursive: true, force: true }));

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    env: { XDG_STATE_HOME: state },
    // Each block runs in its own node process (a registry, sandboxes, at times a browser).
    testTimeout: 300_000,
    hookTimeout: 120_000,
  },
});
