import { defineConfig } from 'vitest/config';

/**
 * `npm run test:faults` (README "Security"): the fault suite, which starts
 * its own throwaway PostgreSQL and Redis servers (tests/faults/support) so it
 * can stop, freeze and restart them without touching the servers other
 * suites share; and the security concurrency suite again on the CI
 * PostgreSQL server (TEST_PG_URL, TEST_PG_APP_URL, TEST_REDIS_URL), where
 * its races truly overlap. One file at a time: the faults are timed.
 */
export default defineConfig({
  test: {
    include: ['tests/faults/**/*.test.ts', 'tests/security/concurrency.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 300_000,
    pool: 'forks',
    fileParallelism: false,
    globalSetup: ['tests/support/global-setup.ts'],
    env: { NODE_ENV: 'test', GATEHOUSE_TEST_SERVERS: 'required' },
  },
});
