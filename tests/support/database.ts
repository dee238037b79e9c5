import { readFile } from 'node:fs/promises';
import postgres from 'postgres';
import { inject } from 'vitest';
import { type DatabaseHandle, openPostgres } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/open.js';
import { testServers, withDatabaseName } from './servers.js';

export interface TestDatabase extends DatabaseHandle {
  /** Which engine this run uses: the suites run on both. */
  engine: 'pglite' | 'postgres';
}

/**
 * A fresh, migrated database: in-memory PGlite for `npm test`, a new
 * database on the PostgreSQL server for the integration suite (dropped on close).
 */
export async function openTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const servers = testServers();
  let database: DatabaseHandle;
  if (servers) {
    const name = `gatehouse_test_${crypto.randomUUID().replaceAll('-', '')}`;
    const admin = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${name}"`);
    await admin.end();
    const opened = await openPostgres({
      url: withDatabaseName(servers.pgAppUrl, name),
      migrationUrl: withDatabaseName(servers.pgUrl, name),
      poolMax: 10,
    });
    database = {
      ...opened,
      async close() {
        await opened.close();
        const dropper = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
        await dropper.end();
      },
    };
  } else {
    const snapshot = options.migrate === false ? null : inject('pgliteSnapshot');
    const loadDataDir = snapshot ? new Blob([await readFile(snapshot)]) : undefined;
    database = await openPglite({ url: 'pglite://memory', loadDataDir });
  }
  if (options.migrate !== false) await migrateToLatest(database);
  return { ...database, engine: servers ? 'postgres' : 'pglite' };
}
