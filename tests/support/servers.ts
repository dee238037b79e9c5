/**
 * The real servers of the integration suite. `.ci/run` starts PostgreSQL and
 * Redis and exports their addresses; `npm test` runs without them.
 */
export interface TestServers {
  /** Owner of the schema: migrations, and creating a fresh database per test file. */
  pgUrl: string;
  /** The runtime login role (a member of gatehouse_app; neither superuser nor owner). */
  pgAppUrl: string;
  redisUrl: string;
}

export function testServers(): TestServers | null {
  if (process.env.GATEHOUSE_TEST_SERVERS !== 'required') return null;
  const { TEST_PG_URL, TEST_PG_APP_URL, TEST_REDIS_URL } = process.env;
  if (!TEST_PG_URL || !TEST_PG_APP_URL || !TEST_REDIS_URL) {
    throw new Error(
      'The integration suite needs TEST_PG_URL, TEST_PG_APP_URL and TEST_REDIS_URL (see .ci/services.sh)',
    );
  }
  return { pgUrl: TEST_PG_URL, pgAppUrl: TEST_PG_APP_URL, redisUrl: TEST_REDIS_URL };
}

export function withDatabaseName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}
