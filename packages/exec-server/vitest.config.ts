import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['src/test-support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Each file starts real sshd / containers / servers; two cores: one file at a time.
    fileParallelism: false,
  },
});
