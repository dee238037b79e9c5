import { sql } from 'kysely';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseHandle, openPostgres } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { statementPreparer } from '../../src/db/prepared-statements.js';
import { testServers, withDatabaseName } from '../support/servers.js';

/**
 * The runtime pool prepares its statements (src/db/client.ts `preparing`):
 * one round trip and no planning after a connection's first run of a
 * statement; `?prepare=false` on the URL turns it off for poolers that keep
 * no named statements. A pool of one connection, so every statement of a
 * test meets the same session's `pg_prepared_statements`.
 */
describe('prepared statements on the runtime pool', { timeout: 30_000 }, () => {
  let name: string;
  let owner: postgres.Sql;
  const handles: DatabaseHandle[] = [];

  beforeAll(async () => {
    const servers = testServers();
    if (!servers) throw new Error('runs only in the integration suite');
    name = `gatehouse_test_${crypto.randomUUID().replaceAll('-', '')}`;
    const admin = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${name}"`);
    await admin.end();
    owner = postgres(withDatabaseName(servers.pgUrl, name), { max: 1, onnotice: () => {} });
    const migrating = await open();
    await migrateToLatest(migrating);
  });
  afterAll(async () => {
    await Promise.all(handles.map((handle) => handle.close()));
    await owner?.end({ timeout: 1 });
    const servers = testServers()!;
    const dropper = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
    await dropper.unsafe(`drop database if exists "${name}" with (force)`);
    await dropper.end();
  });

  async function open(query = ''): Promise<DatabaseHandle> {
    const servers = testServers()!;
    const handle = await openPostgres({
      url: withDatabaseName(servers.pgAppUrl, name) + query,
      migrationUrl: withDatabaseName(servers.pgUrl, name),
      poolMax: 1,
    });
    handles.push(handle);
    return handle;
  }

  const byEmail = (handle: DatabaseHandle, email: string) =>
    handle.db.selectFrom('users').select(['id', 'email']).where('email', '=', email).execute();

  async function prepared(handle: DatabaseHandle): Promise<string[]> {
    const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(handle.db);
    return rows.map((row) => row.statement);
  }

  it('prepares a statement once per connection and runs it again by name', async () => {
    const handle = await open();
    expect(await byEmail(handle, 'nobody@example.com')).toEqual([]);
    expect(await byEmail(handle, 'someone@example.com')).toEqual([]);
    const statements = (await prepared(handle)).filter((text) => text.includes('from "users"'));
    expect(statements).toHaveLength(1);
    expect(statements[0]).toContain('where "email" = $1');
  });

  it('prepares nothing with ?prepare=false on the URL', async () => {
    const handle = await open('?prepare=false');
    expect(await byEmail(handle, 'nobody@example.com')).toEqual([]);
    expect(await prepared(handle)).toEqual([]);
  });

  it('a table changed under a prepared statement (a deploy migrating) is prepared again', async () => {
    const handle = await open();
    const everyColumn = () => handle.db.selectFrom('permissions').selectAll().limit(1).execute();
    await everyColumn();
    await everyColumn();
    await owner.unsafe('alter table permissions add column added_by_deploy text');
    const [row] = await everyColumn();
    expect(row).toHaveProperty('added_by_deploy', null);
    await owner.unsafe('alter table permissions drop column added_by_deploy');
  });

  it('in a transaction, prepares statements that name their columns and not a `*`: a column added between two transactions aborts neither', async () => {
    const handle = await open();
    const bothKinds = () =>
      handle.db.transaction().execute(async (trx) => ({
        named: await trx.selectFrom('roles').select(['id', 'slug']).limit(1).execute(),
        every: await trx.selectFrom('roles').selectAll().limit(1).execute(),
      }));
    await bothKinds();
    await bothKinds();
    const statements = (await prepared(handle)).filter((text) => text.includes('from "roles"'));
    expect(statements).toEqual([expect.stringContaining('select "id", "slug" from "roles"')]);
    await owner.unsafe('alter table roles add column added_by_deploy text');
    try {
      await expect(bothKinds()).resolves.toBeDefined();
    } finally {
      await owner.unsafe('alter table roles drop column added_by_deploy');
    }
  });

  it('prepares at most `limit` distinct texts per pool; later new ones run unnamed, known ones stay prepared', async () => {
    const servers = testServers()!;
    const pool = postgres(withDatabaseName(servers.pgAppUrl, name), { max: 1, onnotice: () => {} });
    const preparing = statementPreparer(2);
    const texts = ['select $1::int + 1 as n', 'select $1::int + 2 as n', 'select $1::int + 3 as n'];
    try {
      for (const round of [1, 2])
        for (const text of [...texts, texts[0]!]) {
          const connection = preparing(await pool.reserve());
          try {
            expect((await connection.unsafe(text, [round]))[0]).toEqual({ n: round + Number(text.at(-6)) });
          } finally {
            connection.release();
          }
        }
      const connection = await pool.reserve();
      try {
        const rows = await connection.unsafe('select statement from pg_prepared_statements order by statement');
        // postgres.js prepares its own type fetch on connecting.
        expect(rows.map((row) => row.statement).filter((text) => texts.includes(text))).toEqual(texts.slice(0, 2));
      } finally {
        connection.release();
      }
    } finally {
      await pool.end({ timeout: 1 });
    }
  });
});
