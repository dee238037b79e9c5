import { mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { APP_ROLE, type DatabaseHandle, type OpenOptions, openPostgres, type SchemalessDb } from './client.js';
import type { Database } from './database.js';

/** Opens `postgres://…` on a server, or `pglite://<dir>` / `pglite://memory` embedded (Node only). */
export interface PgliteDatabase extends DatabaseHandle {
  /** A tarball of the whole data directory (tests load it instead of running initdb and migrations again). */
  dumpDataDir(): Promise<Blob>;
}

/**
 * The embedded engine's start-up settings: PGlite's own, with a 16 MB buffer
 * cache (its default is 128 MB, sized for a server) and the shared memory of
 * 10 connections rather than 100 (it serves one session). The idle service
 * on an existing database drops from about 368 MiB resident to 229 MiB
 * (docs/performance.md "Memory"); a laptop's data fits in either cache.
 */
const PGLITE_SETTINGS = ['-c', 'shared_buffers=16MB', '-c', 'max_connections=10'];

export async function openDatabase(options: OpenOptions): Promise<DatabaseHandle> {
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
  let releaseLock = async () => {};
  let creating = false;
  if (location !== 'memory') {
    await mkdir(location, { recursive: true });
    releaseLock = await lockDataDir(location);
    creating = !(await stat(join(location, 'PG_VERSION')).catch(() => null));
  }
  const startedAt = Date.now();
  if (creating)
    options.logger?.info('db.creating', {
      engine: 'pglite',
      dir: location,
      message: 'First start: creating the embedded database (takes a few seconds)',
    });
  let pglite: InstanceType<typeof PGlite>;
  const startParams = [...PGlite.defaultStartParams, ...PGLITE_SETTINGS];
  try {
    pglite =
      location === 'memory'
        ? new PGlite({ loadDataDir: options.loadDataDir, startParams })
        : new PGlite(location, { startParams });
    await pglite.waitReady;
    if (creating) options.logger?.info('db.created', { engine: 'pglite', dir: location, ms: Date.now() - startedAt });
  } catch (error) {
    await releaseLock();
    throw error;
  }

  const pool = new pg.default.Pool({ ...createPgConfig(pglite), max: 1, idleTimeoutMillis: 0 });
  // PGlite is one backend session: a LISTEN on it hears the NOTIFYs of its own
  // transactions, which arrive with the COMMIT's answer, before the commit
  // resolves. The bridge's client hands them out as 'notification' events.
  const listeners = new Map<string, Set<(payload?: string) => void>>();
  pool.on('connect', (client) => {
    client.on('notification', (message) => {
      for (const listener of listeners.get(message.channel) ?? []) listener(message.payload);
    });
    for (const channelListeners of listeners.values()) for (const listener of channelListeners) listener();
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: options.log });

  const enterRuntimeRole = async (conn: SchemalessDb) => {
    const { rows } = await sql<{
      exists: boolean;
    }>`select exists (select 1 from pg_roles where rolname = ${APP_ROLE}) as exists`.execute(conn);
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
          return await fn(conn as SchemalessDb);
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
      try {
        await db.destroy();
        await pglite.close();
      } finally {
        await releaseLock();
      }
    },
    dumpDataDir: () => pglite.dumpDataDir('none'),
  };
}

/** The data directory is open in another process (or twice in this one). */
export class DatabaseInUseError extends Error {
  constructor(
    readonly location: string,
    readonly pid: number,
  ) {
    super(
      `The embedded database at ${location} is in use by a running process (pid ${pid}), such as the server: stop it first, or run the command against PostgreSQL`,
    );
    this.name = 'DatabaseInUseError';
  }
}

export const LOCK_FILE = '.gatehouse.lock';

/** Lock files this process holds: a lock with our own pid that is not here is a dead predecessor's (a container's pid 1 again). */
const heldLocks = new Set<string>();

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * PGlite has no locking across processes: two of them on one data directory
 * (the server and `npm run user:role`, say) each see their own copy, and one
 * silently loses the other's writes. Whoever opens the directory holds
 * `<dir>/.gatehouse.lock` (created exclusively, holding the pid) until it
 * closes; a lock whose process is gone is taken over. Returns the release.
 */
export async function lockDataDir(location: string): Promise<() => Promise<void>> {
  const path = join(location, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(path, 'wx');
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      heldLocks.add(path);
      let released = false;
      return async () => {
        if (released) return;
        released = true;
        heldLocks.delete(path);
        await unlink(path).catch(() => {});
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const pid = Number.parseInt(await readFile(path, 'utf8').catch(() => ''), 10);
    const held = Number.isInteger(pid) && pid > 0 && (pid === process.pid ? heldLocks.has(path) : isAlive(pid));
    if (held) throw new DatabaseInUseError(location, pid);
    // Stale (its process is gone, or it was never written out): take it over.
    await unlink(path).catch(() => {});
  }
  throw new Error(`Could not take the lock ${path}`);
}
