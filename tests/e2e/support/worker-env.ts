import postgres from 'postgres';
import { expect } from 'vitest';
import { openPostgres } from '../../../src/db/client.js';
import { migrateToLatest } from '../../../src/db/migrate.js';
import { withDatabaseName } from '../../support/servers.js';
import { startUpstashServer, type UpstashServer } from '../../support/upstash-server.js';
import { releaseDatabase } from './pooler.js';
import { randomSecret } from './wrangler.js';

/**
 * What the Worker suites (tests/e2e/worker*.test.ts) run on: the servers of
 * `.ci/services.sh`, a database of their own migrated through the pooler,
 * and the Upstash-protocol server over a Redis database of their own.
 */
export interface E2eServers {
  pgUrl: string;
  pgAppUrl: string;
  poolerUrl: string;
  poolerAppUrl: string;
  redisUrl: string;
}

export function requiredServers(): E2eServers {
  const { TEST_PG_URL, TEST_PG_APP_URL, TEST_POOLER_URL, TEST_POOLER_APP_URL, TEST_REDIS_URL } = process.env;
  if (!TEST_PG_URL || !TEST_PG_APP_URL || !TEST_POOLER_URL || !TEST_POOLER_APP_URL || !TEST_REDIS_URL) {
    throw new Error(
      'The Workers suite needs TEST_PG_URL, TEST_PG_APP_URL, TEST_POOLER_URL, TEST_POOLER_APP_URL and TEST_REDIS_URL: run it through `bash .ci/e2e.sh` after `source .ci/services.sh && services_start`',
    );
  }
  return {
    pgUrl: TEST_PG_URL,
    pgAppUrl: TEST_PG_APP_URL,
    poolerUrl: TEST_POOLER_URL,
    poolerAppUrl: TEST_POOLER_APP_URL,
    redisUrl: TEST_REDIS_URL,
  };
}

/**
 * Creates `databaseName` and migrates it as the owner, as `npm run
 * db:migrate` does with DATABASE_MIGRATION_URL, through the pooler.
 */
export async function createMigratedDatabase(servers: E2eServers, databaseName: string): Promise<void> {
  const owner = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
  await owner.unsafe(`create database "${databaseName}"`);
  await owner.end();
  const database = await openPostgres({
    url: withDatabaseName(servers.pgAppUrl, databaseName),
    migrationUrl: withDatabaseName(servers.poolerUrl, databaseName),
    poolMax: 1,
  });
  await migrateToLatest(database);
  await database.close();
}

/** Lets the pooler go of the database, then drops it (FORCE: a backend may outlive the pooler's KILL). */
export async function dropDatabase(servers: E2eServers, databaseName: string): Promise<void> {
  await releaseDatabase(servers.poolerUrl, databaseName).catch(() => {});
  const owner = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
  await owner.unsafe(`drop database if exists "${databaseName}" with (force)`);
  await owner.end();
}

export interface RateLimitStoreServer extends UpstashServer {
  /** Empties the suite's Redis database (one run's 5-minute auth block stays out of the next). */
  flush(): Promise<void>;
}

/** The Upstash-protocol test server over Redis database `redisDb`, emptied as it starts. */
export async function startRateLimitStore(servers: E2eServers, redisDb: number): Promise<RateLimitStoreServer> {
  const redisUrl = new URL(servers.redisUrl);
  redisUrl.pathname = `/${redisDb}`;
  const upstash = await startUpstashServer({ redisUrl: redisUrl.toString(), token: randomSecret(32) });
  const flush = async () => {
    const res = await fetch(upstash.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${upstash.token}` },
      body: JSON.stringify(['FLUSHDB']),
    });
    expect(await res.json()).toEqual({ result: 'OK' });
  };
  await flush();
  return Object.assign(upstash, { flush });
}
