import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/open.js';
import { createMemoryLogger } from '../../src/shared/logger.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';
import { testServers } from '../support/servers.js';

/** Where people wait (a new database, its migrations), the service says what it is doing. */
describe('progress while the database is prepared', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase({ migrate: false });
  });
  afterAll(() => database?.close());

  it('names the pending migrations, each one as it starts, then the summary; later: up to date', async () => {
    const names = Object.keys(migrations);
    const logger = createMemoryLogger();
    expect(await migrateToLatest(database, logger)).toEqual(names);

    const events = logger.lines.map((line) => line.event);
    expect(logger.lines[0]).toMatchObject({ event: 'db.migrations_pending', count: names.length, migrations: names });
    const applying = logger.lines.filter((line) => line.event === 'db.migration_applying').map((l) => l.migration);
    expect(applying).toEqual(names);
    // Each is announced before any result line (results come when all are done).
    expect(events.lastIndexOf('db.migration_applying')).toBeLessThan(events.indexOf('db.migration'));
    expect(logger.lines.at(-1)).toMatchObject({ event: 'db.migrations_applied', count: names.length });

    const again = createMemoryLogger();
    expect(await migrateToLatest(database, again)).toEqual([]);
    expect(again.lines.map((line) => line.event)).toEqual(['db.migrations_up_to_date']);
  });

  // On the embedded engine only (the integration run covers the server; this path is PGlite's).
  it.runIf(testServers() === null)(
    'says it is creating a new embedded database, and not when the directory holds one',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'gatehouse-progress-'));
      try {
        const first = createMemoryLogger();
        await (await openPglite({ url: `pglite://${dir}`, logger: first })).close();
        expect(first.lines.map((line) => line.event)).toEqual(['db.creating', 'db.created']);
        expect(first.lines[0]).toMatchObject({ engine: 'pglite', dir });
        expect(first.lines[1]?.ms).toEqual(expect.any(Number));

        const second = createMemoryLogger();
        await (await openPglite({ url: `pglite://${dir}`, logger: second })).close();
        expect(second.lines).toEqual([]);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
