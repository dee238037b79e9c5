import { sql } from 'kysely';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentTransaction, runInTransaction } from '../../src/db/ambient.js';
import { openRequestScopedPostgres } from '../../src/db/request-scoped.js';
import { withTenant } from '../../src/db/tenant.js';
import { releaseDatabase } from '../e2e/support/pooler.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { createOrganization, createRole } from '../support/orgs.js';
import { testServers, withDatabaseName } from '../support/servers.js';
import { signedInUser } from '../support/users.js';

/**
 * The Workers database (src/db/request-scoped.ts) on a real server, through
 * PgBouncer when .ci/services.sh started it (TEST_POOLER_APP_URL), as the
 * Worker runs in CI: one Kysely for the isolate, one connection per request
 * scope, opened by the first query and ended by close().
 */
describe('request-scoped PostgreSQL (the Worker database)', { timeout: 120_000 }, () => {
  let t: TestApp;
  let url: string;
  let directAppUrl: string;

  beforeAll(async () => {
    const servers = testServers();
    if (!servers) throw new Error('runs only in the integration suite');
    t = await createTestApp();
    const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(t.db);
    directAppUrl = withDatabaseName(servers.pgAppUrl, rows[0]!.name);
    url = withDatabaseName(process.env.TEST_POOLER_APP_URL ?? servers.pgAppUrl, rows[0]!.name);
  });
  afterAll(async () => {
    // The pooler keeps server sessions to this database open; drop them before the database goes.
    if (process.env.TEST_POOLER_URL && t)
      await releaseDatabase(process.env.TEST_POOLER_URL, new URL(url).pathname.slice(1));
    await t?.close();
  });

  it('opens no connection for a request that runs no query, one for a request that runs several, and ends it on close', async () => {
    let connects = 0;
    const { database, scope } = openRequestScopedPostgres({ url, onConnect: () => connects++ });
    const idle = scope.run(async () => 'no query');
    expect(await idle.result).toBe('no query');
    await idle.close();
    expect(connects).toBe(0);

    const busy = scope.run(async () => {
      const a = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db);
      const b = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db);
      return [a.rows[0]!.pid, b.rows[0]!.pid];
    });
    const [first, second] = await busy.result;
    expect(first).toBe(second);
    expect(connects).toBe(1);
    let late: () => Promise<unknown> = async () => {};
    const ended = scope.run(async () => {
      await sql`select 1`.execute(database.db);
      late = () => sql`select 1`.execute(database.db);
    });
    await ended.result;
    await Promise.all([busy.close(), ended.close()]);
    // A query of a request whose scope has closed fails; it opens no connection.
    await expect(late()).rejects.toThrow(/request/);
    expect(connects).toBe(2);
  });

  it('never shares a connection, a transaction or a tenant between concurrent requests; a failed transaction poisons nothing', async () => {
    const owner = await signedInUser(t);
    const orgA = await createOrganization(t, owner);
    await createRole(t, owner, { name: 'Only In A', permissions: ['roles:read'] });
    const orgB = await createOrganization(t, owner);
    const { database, scope } = openRequestScopedPostgres({ url });
    const db = database.db;

    const request = (tenant: string, i: number) =>
      scope.run(async () => {
        // A request that fails inside its transaction, every fifth one.
        if (i % 5 === 0) {
          await expect(
            withTenant(db, tenant, async (trx) => {
              await sql`select 1`.execute(trx);
              await sql`select 1 / 0`.execute(trx);
            }),
          ).rejects.toThrow(/division by zero/);
        }
        const seen = await withTenant(db, tenant, async (trx) => {
          // Yield between statements so the other requests' statements interleave.
          await new Promise((r) => setTimeout(r, Math.random() * 5));
          const named = await sql<{
            named: string;
            pid: number;
            txid: string;
          }>`select current_setting('app.tenant_id', true) as named, pg_backend_pid() as pid, txid_current()::text as txid`.execute(
            trx,
          );
          const roles = await trx.selectFrom('roles').select('slug').execute();
          return { ...named.rows[0]!, slugs: roles.map((r) => r.slug).sort(), inAmbient: currentTransaction() === trx };
        });
        // Outside the transaction the tenant is gone (set_config(..., true)).
        const after = await sql<{
          tenant: string | null;
        }>`select nullif(current_setting('app.tenant_id', true), '') as tenant`.execute(db);
        const arrays = await sql<{
          p: string[];
        }>`select permissions as p from tenant_roles(${tenant}::uuid) order by slug limit 1`.execute(db);
        return { tenant, ...seen, after: after.rows[0]!.tenant, arrays: arrays.rows[0]?.p };
      });

    // Each request ends its connection when it is done, as the Worker does
    // (through a session-mode pooler, a held connection is a held server session).
    const results = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const run = request(i % 2 ? orgA.id : orgB.id, i);
        try {
          return await run.result;
        } finally {
          await run.close();
        }
      }),
    );

    for (const r of results) {
      // The database saw the tenant this request named, never the other's.
      expect(r.named).toBe(r.tenant);
      expect(r.inAmbient).toBe(true);
      expect(r.after).toBeNull();
      expect(r.slugs).toEqual(
        r.tenant === orgA.id
          ? ['admin', 'member', 'only-in-a', 'owner', 'viewer']
          : ['admin', 'member', 'owner', 'viewer'],
      );
      // text[] parsed as an array on every connection, including those opened with fetch_types: false.
      expect(Array.isArray(r.arrays)).toBe(true);
    }
    // No two requests in the same transaction; concurrent ones on different sessions.
    expect(new Set(results.map((r) => r.txid)).size).toBe(results.length);
  });

  it('joins the ambient transaction (better-auth handle) and rolls it back as one', async () => {
    const { database, scope } = openRequestScopedPostgres({ url });
    const name = `scoped-${crypto.randomUUID()}`;
    const run = scope.run(() =>
      runInTransaction(database.db, async (trx) => {
        await sql`create temporary table scoped_probe (name text) on commit drop`.execute(trx);
        await sql`insert into scoped_probe values (${name})`.execute(trx);
        throw new Error('roll back');
      }),
    );
    await expect(run.result).rejects.toThrow('roll back');
    await run.close();
    const again = scope.run(() => sql<{ n: number }>`select 1 as n`.execute(database.db));
    expect((await again.result).rows[0]!.n).toBe(1);
    await again.close();
  });

  it('leaves no connection of the Worker open on the server after close (direct, no pooler)', async () => {
    const { database, scope } = openRequestScopedPostgres({ url: directAppUrl });
    const runs = Array.from({ length: 5 }, () => scope.run(() => sql`select pg_sleep(0.05)`.execute(database.db)));
    await Promise.all(runs.map((r) => r.result));
    await Promise.all(runs.map((r) => r.close()));
    const admin = postgres(testServers()!.pgUrl, { max: 1, onnotice: () => {} });
    try {
      await expect
        .poll(
          async () =>
            Number(
              (
                await admin`select count(*)::int as n from pg_stat_activity where application_name = 'gatehouse-worker' and datname = current_database()`
              )[0]!.n,
            ),
          { timeout: 5_000 },
        )
        .toBe(0);
    } finally {
      await admin.end();
    }
  });
});
