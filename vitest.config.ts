import { defineConfig } from 'vitest/config';

/** `npm test`: everything that needs nothing but Node (embedded database, in-memory rate-limit store). */
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    exclude: ['tests/integration/**', 'tests/e2e/**', 'tests/faults/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    globalSetup: ['tests/support/global-setup.ts'],
    env: { NODE_ENV: 'test' },
  },
});
