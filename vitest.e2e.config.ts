import { defineConfig } from 'vitest/config';

/**
 * The end-to-end suites (issue 7), run by `.ci/e2e.sh`, not by `npm test`:
 * tests/e2e/browser.test.ts (Debian's chromium via playwright-core, the Node
 * API on a real listener) and tests/e2e/worker.test.ts (the worker in workerd
 * via `wrangler dev`, which needs the integration servers of .ci/services.sh).
 * With TEST_PG_URL set (services started) the browser suite's API also uses
 * the real PostgreSQL and Redis; without, PGlite and the in-memory store.
 */
export default defineConfig({
  test: {
    include: ['tests/e2e/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // One browser or one workerd at a time: they compete for CPU and fixed ports (3000, 3001).
    fileParallelism: false,
    globalSetup: ['tests/support/global-setup.ts'],
    env: { NODE_ENV: 'test', ...(process.env.TEST_PG_URL ? { GATEHOUSE_TEST_SERVERS: 'required' } : {}) },
  },
});
