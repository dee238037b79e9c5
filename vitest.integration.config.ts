import { defineConfig } from 'vitest/config';

/**
 * `npm run test:integration`: the database and rate-limit suites again, on a
 * real PostgreSQL server (TEST_PG_URL owner, TEST_PG_APP_URL runtime) and a
 * real Redis behind the Upstash-protocol test server (TEST_REDIS_URL), plus
 * the tests that only make sense there. `.ci/run` starts both servers.
 */
export default defineConfig({
  test: {
    include: ['tests/db/**/*.test.ts', 'tests/middleware/rate-limit*.test.ts', 'tests/integration/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    globalSetup: ['tests/support/global-setup.ts'],
    env: { NODE_ENV: 'test', GATEHOUSE_TEST_SERVERS: 'required' },
  },
});
