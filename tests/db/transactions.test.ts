import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ambientAware, currentTransaction, runInTransaction } from '../../src/db/ambient.js';
import type { Database } from '../../src/db/database.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Transactions on the runtime handle, on both engines. PGlite is one session
 * behind a pool of one connection, so transactions queue; PostgreSQL runs
 * them side by side. Either way nobody sees another's uncommitted writes.
 */

function signal() {
  let fire!: () => void;
  const fired = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { fire, fired };
}

describe('transactions', () => {
  let database: TestDatabase;
  let db: Kysely<Database>;

  beforeAll(async () => {
    database = await openTestDatabase();
    db = database.db;
  });
  afterAll(() => database?.close());

  const marker = () => `tx-${crypto.randomUUID()}`;
  const insertUser = (handle: Kysely<Database> | Transaction<Database>, name: string) =>
    handle
      .insertInto('users')
      .values({ name, email: `${crypto.randomUUID()}@example.test` })
      .execute();
  const countByName = async (handle: Kysely<Database> | Transaction<Database>, name: string) =>
    (await handle.selectFrom('users').select('id').where('name', '=', name).execute()).length;
  const txid = async (handle: Kysely<Database> | Transaction<Database>) =>
    (await sql<{ id: string }>`select txid_current()::text as id`.execute(handle)).rows[0]!.id;
  const backend = async (handle: Kysely<Database> | Transaction<Database>) =>
    (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(handle)).rows[0]!.pid;
  const currentUser = async (handle: Kysely<Database>) =>
    (await sql<{ name: string }>`select current_user as name`.execute(handle)).rows[0]!.name;

  it("do not see each other's uncommitted writes, and neither ends the other", async () => {
    const first = marker();
    const second = marker();
    const order: string[] = [];
    const inserted = signal();
    const read = signal();
    const pids: number[] = [];

    const t1 = db.transaction().execute(async (trx) => {
      pids.push(await backend(trx));
      // Two rows: a reader in between must see none or both, never one.
      await insertUser(trx, first);
      await insertUser(trx, first);
      order.push('t1:inserted');
      inserted.fire();
      // On PostgreSQL T2 reads now, while T1 is open. On PGlite T2 cannot
      // begin until T1 ends, so T1 only waits a moment (no deadlock).
      await Promise.race([read.fired, sleep(database.engine === 'pglite' ? 200 : 15_000)]);
      order.push('t1:commit');
    });

    const t2 = (async () => {
      await inserted.fired;
      return db.transaction().execute(async (trx) => {
        order.push('t2:begin');
        pids.push(await backend(trx));
        const seen = await countByName(trx, first);
        order.push('t2:read');
        read.fire();
        await insertUser(trx, second);
        return seen;
      });
    })();

    const [, seen] = await Promise.all([t1, t2]);
    expect([0, 2]).toContain(seen);
    if (database.engine === 'postgres') {
      // Side by side: T2 read while T1 was still open, on another connection, and saw nothing.
      expect(order.indexOf('t2:read')).toBeLessThan(order.indexOf('t1:commit'));
      expect(pids[0]).not.toBe(pids[1]);
      expect(seen).toBe(0);
    } else {
      // One session: T2 began only after T1 had finished, and saw all of it.
      expect(order).toEqual(['t1:inserted', 't1:commit', 't2:begin', 't2:read']);
      expect(seen).toBe(2);
    }
    // Both committed, each row once.
    expect(await countByName(db, first)).toBe(2);
    expect(await countByName(db, second)).toBe(1);
  });

  it('rolls a failing transaction back entirely, and the handle keeps working as the runtime role', async () => {
    const role = await currentUser(db);
    const name = marker();
    await expect(
      db.transaction().execute(async (trx) => {
        await insertUser(trx, name);
        await insertUser(trx, name);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(await countByName(db, name)).toBe(0);

    // A statement the database refuses (unique email) rolls back what came before it.
    const email = `${crypto.randomUUID()}@example.test`;
    const error = await db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto('users').values({ name, email }).execute();
        await trx.insertInto('users').values({ name, email }).execute();
      })
      .then(
        () => null,
        (caught: unknown) => caught as { code?: string },
      );
    expect(error?.code).toBe('23505');
    expect(await countByName(db, name)).toBe(0);
    expect(await currentUser(db)).toBe(role);

    await insertUser(db, name);
    expect(await countByName(db, name)).toBe(1);
  });

  describe('runInTransaction (ambient)', () => {
    it('joins an inner call to the outer transaction', async () => {
      const name = marker();
      await runInTransaction(db, async (outer) => {
        expect(currentTransaction()).toBe(outer);
        const outerId = await txid(outer);
        await insertUser(outer, name);
        await runInTransaction(db, async (inner) => {
          expect(inner).toBe(outer);
          expect(await txid(inner)).toBe(outerId);
          expect(await countByName(inner, name)).toBe(1);
          await insertUser(inner, name);
        });
        // The library's handle joins too: its queries and its own transactions.
        const library = ambientAware(db);
        expect(await countByName(library, name)).toBe(2);
        await library.transaction().execute(async (joined) => {
          expect(await txid(joined)).toBe(outerId);
        });
      });
      expect(currentTransaction()).toBeUndefined();
      expect(await countByName(db, name)).toBe(2);
    });

    it('rolls back both when the inner one fails', async () => {
      const name = marker();
      await expect(
        runInTransaction(db, async (outer) => {
          await insertUser(outer, name);
          await runInTransaction(db, async (inner) => {
            await insertUser(inner, name);
            await insertUser(ambientAware(db), name);
            throw new Error('inner failed');
          });
        }),
      ).rejects.toThrow('inner failed');
      expect(await countByName(db, name)).toBe(0);
      expect(currentTransaction()).toBeUndefined();
    });

    it('gives concurrent top-level calls their own transactions', async () => {
      const [a, b] = await Promise.all([
        runInTransaction(db, async (trx) => {
          await sleep(5);
          return txid(trx);
        }),
        runInTransaction(db, async (trx) => {
          await sleep(5);
          return txid(trx);
        }),
      ]);
      expect(a).not.toBe(b);
    });
  });
});
