import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    // Each block runs in its own node process (a registry, sandboxes, at times a browser).
    testTimeout: 300_000,
    hookTimeout: 120_000,
  },
});
