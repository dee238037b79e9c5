import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Every password hash and check is a scrypt derivation with a ~32 MiB work
 * buffer (src/auth/password.ts). glibc serves an allocation that large from
 * a fresh mmap and unmaps it on free, so each derivation faults its 32 MiB in
 * again: about 60% of its CPU, in the hundreds of sign-ins the suites make.
 * With the threshold above the buffer it stays in the heap between
 * derivations (same parameters, same code). The test workers inherit this
 * environment and glibc reads it as they start; elsewhere it is ignored. (This
 * file is evaluated more than once: the value is added once.)
 */
if (!process.env.GLIBC_TUNABLES?.includes('glibc.malloc.mmap_threshold')) {
  process.env.GLIBC_TUNABLES = [process.env.GLIBC_TUNABLES, 'glibc.malloc.mmap_threshold=67108864']
    .filter(Boolean)
    .join(':');
}

/**
 * The test suites, one project each (README "Tests and CI"):
 *
 * - `unit` (`npm test`): everything that needs nothing but Node: the embedded
 *   database (each file loads a migrated snapshot built once per run by
 *   tests/support/global-setup.ts) and the in-memory rate-limit store.
 * - `integration` (`npm run test:integration`): the database and rate-limit
 *   suites (tests/db, tests/webhooks, tests/integration and every
 *   `*.pg.test.ts`) again on a real PostgreSQL server (TEST_PG_URL owner,
 *   TEST_PG_APP_URL runtime) and a real Redis behind the Upstash-protocol
 *   test server (TEST_REDIS_URL), plus the tests that only make sense there.
 * - `faults` (`npm run test:faults`): the fault suite, which starts its own
 *   throwaway PostgreSQL and Redis (tests/faults/support) to stop, freeze and
 *   restart them, and the security concurrency suite again on the CI server.
 *   One file at a time: the faults are timed.
 * - `e2e` (`npm run test:e2e`, `.ci/e2e.sh`): Debian's chromium via
 *   playwright-core against the Node API, and the worker in workerd via
 *   `wrangler dev` (which needs the servers of .ci/services.sh). With
 *   TEST_PG_URL set the browser suite's API also uses PostgreSQL and Redis.
 *
 * `vitest run` without `--project` would run all four; the npm scripts name one.
 * The global setup reads GATEHOUSE_TEST_SERVERS from the project's `env`
 * below (not from process.env, where vitest does not put it).
 */
const servers = { GATEHOUSE_TEST_SERVERS: 'required' } as const;

export default defineConfig({
  test: {
    pool: 'forks',
    // vitest's default in `run` is one worker fewer than the cores: one worker
    // on a 2-core machine, with the main process idle. The files wait on
    // scrypt and PGlite, both in the worker: use every core.
    maxWorkers: availableParallelism(),
    globalSetup: ['tests/support/global-setup.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['tests/**/*.test.ts'],
          exclude: ['tests/integration/**', 'tests/e2e/**', 'tests/faults/**', 'node_modules/**'],
          // One process per worker for all its files, not one per file: each new
          // process loaded the whole service (better-auth, zod, hono, PGlite) again,
          // about a quarter of the suite's CPU. The files share the module cache and
          // nothing else: no test file mocks modules or writes process.env; the one
          // that stubs a global (fetch, tests/auth/second-factor-oauth) restores it;
          // every file closes the databases and servers it opens; and the helpers'
          // counters (tests/support) only ever hand out fresh values.
          isolate: false,
          // global.gc() for tests/webhooks/timeouts.test.ts (vitest sets execArgv per project, not per file).
          execArgv: ['--expose-gc'],
          testTimeout: 30_000,
          hookTimeout: 60_000,
          env: { NODE_ENV: 'test' },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          // Chosen by place and name, not listed one by one: a suite that belongs
          // here lives in tests/db, tests/webhooks or tests/integration, or is
          // named *.pg.test.ts (README "Tests and CI").
          include: [
            'tests/db/**/*.test.ts',
            'tests/webhooks/**/*.test.ts',
            'tests/integration/**/*.test.ts',
            'tests/**/*.pg.test.ts',
            // Still selected by name until they are renamed *.pg.test.ts (other work is in them):
            // multi-factor on a server (sessions.mfa, session_state's new columns, the replay guard's UPDATE),
            'tests/auth/second-factor*.test.ts',
            // an organization's access and its webhooks on a server,
            'tests/routes/organization-security.test.ts',
            'tests/routes/webhooks.test.ts',
            // and the rate limits in the shared store (Redis through the Upstash protocol).
            'tests/middleware/rate-limit*.test.ts',
          ],
          execArgv: ['--expose-gc'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          env: { NODE_ENV: 'test', ...servers },
        },
      },
      {
        extends: true,
        test: {
          name: 'faults',
          include: ['tests/faults/**/*.test.ts', 'tests/security/concurrency.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 300_000,
          fileParallelism: false,
          env: { NODE_ENV: 'test', ...servers },
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['tests/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // One browser or one workerd at a time: they compete for CPU and fixed ports (3000, 3001).
          fileParallelism: false,
          env: { NODE_ENV: 'test', ...(process.env.TEST_PG_URL ? servers : {}) },
        },
      },
    ],
  },
});
