import net from 'node:net';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testServers } from '../support/servers.js';

/**
 * The fixes patches/postgres+3.4.9.patch makes to postgres.js (applied by
 * `postinstall`), one test each, through the driver against the CI server:
 * each fails on the unpatched driver. They are about connections that close
 * under the driver, which happens only on a real server (PGlite is
 * in-process). A connection closes either on the server's side
 * (pg_terminate_backend from a second pool) or on ours (the socket the driver
 * was handed is destroyed), whichever gives the exact moment a case needs.
 */
describe('postgres.js when a connection closes (patches/postgres+3.4.9.patch)', { timeout: 30_000 }, () => {
  let url: string;
  let admin: postgres.Sql;
  const pools: postgres.Sql[] = [];

  beforeAll(() => {
    const servers = testServers();
    if (!servers) throw new Error('runs only in the integration suite');
    url = servers.pgUrl;
    admin = postgres(url, { max: 1, onnotice: () => {} });
  });
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((sql) => sql.end({ timeout: 1 })));
  });
  afterAll(async () => {
    await admin?.end({ timeout: 1 });
  });

  /** postgres.js's `socket` option (its README: a function returning the socket to use) is missing from its types. */
  type PoolOptions = postgres.Options<Record<string, never>> & { socket?: () => Promise<net.Socket> };

  /** A pool that reports each closed connection and connects within 2 s (a hung connect shows as CONNECT_TIMEOUT). */
  function pool(options: PoolOptions = {}) {
    let onClose = () => {};
    const sql = postgres(url, {
      max: 1,
      connect_timeout: 2,
      onnotice: () => {},
      onclose: () => onClose(),
      ...options,
    });
    pools.push(sql);
    const closed = () => new Promise<void>((resolve) => (onClose = resolve));
    return { sql, closed };
  }

  async function backend(sql: postgres.ReservedSql | postgres.TransactionSql): Promise<number> {
    const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
    return row!.pid;
  }
  async function terminate(pid: number) {
    await admin`select pg_terminate_backend(${pid})`;
  }

  /** What a query settles with: its rows, or the code of its error; 'pending' if it has not within `ms`. */
  function outcome(query: Promise<unknown>, ms = 3000): Promise<unknown> {
    return Promise.race([
      query.then(
        (rows) => rows,
        (error: { code?: string }) => error.code,
      ),
      new Promise((resolve) => setTimeout(() => resolve('pending'), ms).unref()),
    ]);
  }

  it('refuses a query sent on a connection that has closed, without throwing from a timer', async () => {
    // Unpatched, the write to the closed socket throws a TypeError from an
    // Immediate: nothing can catch it and the process exits.
    const { sql, closed } = pool();
    let late: Promise<unknown> | undefined;
    const transaction = sql.begin(async (tx) => {
      const isClosed = closed();
      await terminate(await backend(tx));
      await isClosed;
      late = outcome(tx`select 1`);
      await late;
      // sql.begin has already failed (below); ending the body would send
      // COMMIT on the dead connection, whose refusal nothing awaits.
      await new Promise(() => {});
    });
    await expect(transaction).rejects.toMatchObject({ code: 'CONNECTION_CLOSED' });
    await expect.poll(() => late, { timeout: 3000 }).toBeDefined();
    expect(await late).toBe('CONNECTION_CLOSED');
    expect(await sql`select 1 as one`).toEqual([{ one: 1 }]);
  });

  it('reconnects a connection that closed with a write pending', async () => {
    // Two connections close in one turn of the event loop, as when the server
    // stops; a query sent on the second as the first closes is still waiting
    // to be written when the second closes. Unpatched, the second connection
    // keeps that write and its cleared timer and never writes again: its next
    // connect waits out connect_timeout.
    const sockets: net.Socket[] = [];
    const { sql } = pool({
      max: 2,
      socket: () =>
        new Promise<net.Socket>((resolve, reject) => {
          const { hostname, port } = new URL(url);
          const socket = net.connect(Number(port), hostname);
          sockets.push(socket);
          socket.once('connect', () => resolve(socket)).once('error', reject);
        }),
    });
    const first = await sql.reserve();
    const second = await sql.reserve();
    await Promise.all([first`select 1`, second`select 1`]);
    const [a, b] = sockets as [net.Socket, net.Socket];
    const other = new Map([
      [a, second],
      [b, first],
    ]);
    let sent: Promise<unknown> | undefined;
    for (const socket of sockets) socket.once('close', () => (sent ??= outcome(other.get(socket)!`select 1`)));
    for (const socket of sockets) socket.destroy();
    await expect.poll(() => sent).toBeDefined();
    expect(await sent).toBe('CONNECTION_CLOSED');
    first.release();
    second.release();
    expect(await outcome(Promise.all([sql`select 1 as one`, sql`select 2 as two`]))).toEqual([
      [{ one: 1 }],
      [{ two: 2 }],
    ]);
  });

  it('keeps a reservation whose connection closed away from the next holder of that connection', async () => {
    // kysely-postgres-js reserves a connection per transaction and sends
    // ROLLBACK on it when a statement fails. Unpatched, once the pool has
    // reconnected that connection for someone else, the late statement runs
    // in the new holder's session and release() puts the new holder's
    // connection in the pool mid-transaction.
    const { sql, closed } = pool();
    const stale = await sql.reserve();
    const isClosed = closed();
    await terminate(await backend(stale));
    await isClosed;

    const holder = await sql.reserve();
    await holder`begin`;
    await holder`select set_config('test.holder', 'second', true)`;
    expect(await outcome(stale`select current_setting('test.holder', true) as holder`)).toBe('CONNECTION_CLOSED');
    stale.release();
    const pooled = outcome(sql`select current_setting('test.holder', true) as holder`);
    expect(await outcome(pooled, 300)).toBe('pending');
    await holder`commit`;
    holder.release();
    expect(await pooled).toEqual([{ holder: '' }]);
  });

  it('settles the queries a reservation queued when its connection closes', async () => {
    // A statement with parameters is described first, so the connection takes
    // no more until it answers: the next one waits in the reservation's queue.
    // Unpatched, that one never settles when the connection dies.
    const { sql } = pool();
    const reserved = await sql.reserve();
    const pid = await backend(reserved);
    const busy = outcome(reserved`select pg_sleep(${5})`);
    const queued = outcome(reserved`select 1 as one`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await terminate(pid);
    expect(await busy).toBe('CONNECTION_CLOSED');
    expect(await queued).toBe('CONNECTION_CLOSED');
    reserved.release();
  });

  it('hands a reconnected connection to the reservation that was waiting for it', async () => {
    // When a connection closes, the pool reconnects it for the first waiting
    // request. Unpatched, a reservation that was that request is dropped once
    // the connection is up (after the type fetch), and waits forever; with
    // the type fetch off, the first reservation of a pool already does.
    const { sql } = pool();
    const holder = await sql.reserve();
    const waiting = sql.reserve();
    await terminate(await backend(holder));
    const next = await outcome(waiting);
    expect(next).not.toBe('pending');
    const reserved = next as postgres.ReservedSql;
    expect(await reserved`select 1 as one`).toEqual([{ one: 1 }]);
    reserved.release();
    // Served once: the pool's one connection is free again.
    expect(await outcome(sql`select 2 as two`)).toEqual([{ two: 2 }]);

    const { sql: untyped } = pool({ fetch_types: false });
    const first = await outcome(untyped.reserve());
    expect(first).not.toBe('pending');
    (first as postgres.ReservedSql).release();
  });
});
