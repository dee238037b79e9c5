import { mkdir } from 'node:fs/promises';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { APP_ROLE, openPostgres, type Database, type OpenOptions } from './client.js';
import type { DB } from './database.js';

/** Opens `postgres://…` on a server, or `pglite://<dir>` / `pglite://memory` embedded (Node only). */
export interface PgliteDatabase extends Database {
  /** A tarball of the whole data directory (tests load it instead of running initdb and migrations again). */
  dumpDataDir(): Promise<Blob>;
}

export async function openDatabase(options: OpenOptions): Promise<Database> {
  return options.url.startsWith('pglite://') ? openPglite(options) : openPostgres(options);
}

/**
 * The embedded engine. PGlite is one session, so the node-postgres bridge
 * gives it a pool of exactly one connection: each transaction holds that
 * connection until it ends, so two transactions never interleave (the
 * kysely-pglite dialect sends raw BEGIN/COMMIT on the shared session and
 * lets them interleave, seen leaking rows across tenants).
 *
 * There is no second login here: the session enters the runtime role with
 * SET ROLE, and owner work (migrations) holds the one connection, leaves the
 * role, and enters it again when done.
 */
export async function openPglite(options: OpenOptions & { loadDataDir?: Blob }): Promise<PgliteDatabase> {
  const [{ PGlite }, { createPgConfig }, pg] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@electric-sql/pglite/node-postgres'),
    import('pg'),
  ]);
  const location = options.url.slice('pglite://'.length);
  if (location !== 'memory') await mkdir(location, { recursive: true });
  const pglite = location === 'memory' ? new PGlite({ loadDataDir: options.loadDataDir }) : new PGlite(location);
  await pglite.waitReady;

  const pool = new pg.default.Pool({ ...createPgConfig(pglite), max: 1, idleTimeoutMillis: 0 });
  // PGlite is one backend session: a LISTEN on it hears the NOTIFYs of its own
  // transactions, which arrive with the COMMIT's answer, before the commit
  // resolves. The bridge's client hands them out as 'notification' events.
  const listeners = new Map<string, Set<() => void>>();
  pool.on('connect', (client) => {
    client.on('notification', (message) => listeners.get(message.channel)?.forEach((listener) => listener()));
    for (const channelListeners of listeners.values()) channelListeners.forEach((listener) => listener());
  });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), log: options.log });

  const enterRuntimeRole = async (conn: Kysely<any>) => {
    const { rows } = await sql<{ exists: boolean }>`select exists (select 1 from pg_roles where rolname = ${APP_ROLE}) as exists`.execute(conn);
    if (rows[0]?.exists) await sql`set role ${sql.id(APP_ROLE)}`.execute(conn);
  };
  await db.connection().execute(enterRuntimeRole);

  return {
    kind: 'pglite',
    db,
    withOwner: (fn) =>
      db.connection().execute(async (conn) => {
        await sql`reset role`.execute(conn);
        try {
          return await fn(conn as Kysely<any>);
        } finally {
          await enterRuntimeRole(conn);
        }
      }),
    async listen(channel, onNotify) {
      const known = listeners.get(channel);
      if (known) known.add(onNotify);
      else {
        listeners.set(channel, new Set([onNotify]));
        await sql`listen ${sql.id(channel)}`.execute(db);
      }
      onNotify();
    },
    async close() {
      await db.destroy();
      await pglite.close();
    },
    dumpDataDir: () => pglite.dumpDataDir('none'),
  };
}
