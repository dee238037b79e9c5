import { type Dialect, Kysely, type KyselyConfig } from 'kysely';
import { PostgresJSDialect } from 'kysely-postgres-js';
import postgres from 'postgres';
import type { Logger } from '../shared/logger.js';
import type { Database } from './database.js';
import { statementPreparer } from './prepared-statements.js';

/**
 * A handle with no table types: migrations (frozen history, typed by no
 * version of the app), the schema owner's connection, and the auth library,
 * which builds its own queries. Kysely documents `Kysely<any>` for these.
 */
// biome-ignore lint/suspicious/noExplicitAny: the one schema-less handle type (see above)
export type SchemalessDb = Kysely<any>;

/** The role every runtime query runs as: neither superuser nor owner, so row-level security applies. */
export const APP_ROLE = 'gatehouse_app';

export type EngineKind = 'postgres' | 'pglite';

/** One open database: the runtime handle, and how to run migrations and close it. */
export interface DatabaseHandle {
  kind: EngineKind;
  /** Runtime queries, as the application role. */
  db: Kysely<Database>;
  /** Runs `fn` with a handle that connects as the schema owner (migrations, the user:role command). */
  withOwner<T>(fn: (owner: SchemalessDb) => Promise<T>): Promise<T>;
  /**
   * LISTEN on `channel`: `onNotify` runs for every notification, and also
   * whenever the listening connection is (re)established, since whatever was
   * sent while it was away is lost (a listener then treats it as "anything
   * may have changed", and gets no payload). Resolves once listening.
   */
  listen(channel: string, onNotify: (payload?: string) => void): Promise<void>;
  close(): Promise<void>;
}

export interface OpenOptions {
  url: string;
  migrationUrl?: string;
  poolMax?: number;
  /** Kysely's log hook: the benchmark counts statements through it. */
  log?: KyselyConfig['log'];
  /** Hears what takes a while: creating a new embedded database. */
  logger?: Logger;
}

/**
 * Bounds on how long a request can wait on the database (docs/design.md "A patched driver"):
 * for a free connection of the pool, for a row lock, and for one statement.
 * Past them the query fails and the request answers 503 SERVICE_UNAVAILABLE
 * instead of hanging (an exhausted pool, a lock held elsewhere). Runtime
 * connections only: migrations may take their time.
 */
export const ACQUIRE_TIMEOUT_MS = 5_000;
export const LOCK_TIMEOUT_MS = 5_000;
export const STATEMENT_TIMEOUT_MS = 15_000;
/** Distinct statement texts a runtime pool prepares, so as many at most per server connection (prepared-statements.ts). */
const MAX_PREPARED_STATEMENTS = 500;

/** Thrown when no connection of the pool comes free within ACQUIRE_TIMEOUT_MS (errors.ts: 503). */
export class PoolTimeoutError extends Error {
  readonly code = 'POOL_TIMEOUT';
  constructor(ms: number) {
    super(`no database connection came free within ${ms} ms`);
    this.name = 'PoolTimeoutError';
  }
}

/**
 * kysely-postgres-js reserves a connection for every query and transaction;
 * postgres.js queues a reservation without limit. This one gives up after
 * `ms` (a connection reserved too late is handed straight back), and hands
 * out reservations that prepare their statements (prepared-statements.ts).
 */
function withAcquireTimeout(sql: postgres.Sql, ms: number): postgres.Sql {
  const reserve = sql.reserve.bind(sql);
  const preparing = statementPreparer(MAX_PREPARED_STATEMENTS);
  const timed = () =>
    new Promise<postgres.ReservedSql>((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        reject(new PoolTimeoutError(ms));
      }, ms);
      reserve().then(
        (connection) => {
          clearTimeout(timer);
          if (late) connection.release();
          else resolve(preparing(connection));
        },
        (error: unknown) => {
          clearTimeout(timer);
          if (!late) reject(error);
        },
      );
    });
  return new Proxy(sql, {
    get: (target, property, receiver) => (property === 'reserve' ? timed : Reflect.get(target, property, receiver)),
  });
}

function postgresDialect(
  url: string,
  max: number,
  { runtime }: { runtime: boolean },
): { dialect: Dialect; sql: postgres.Sql; end: () => Promise<void> } {
  // kysely-postgres-js reserves a connection for every query and transaction
  // (sql.reserve()). Unpatched, postgres.js 3.4.9 handed a reservation the
  // connection opened for it only through the ReadyForQuery after the type
  // fetch, and dropped it when a reconnect had taken it up (requests waited
  // out the acquire timeout after an outage); patches/postgres+3.4.9.patch
  // hands the connection to its reservation. A long-lived pool pays
  // the type fetch once per connection, so Node keeps the default; the
  // Worker's driver (request-scoped.ts) does not reserve and fetches the
  // types once per isolate.
  const sql = postgres(url, {
    max,
    idle_timeout: 30,
    connect_timeout: 5,
    // While the server is down each reconnect waits this long first, and so
    // does the request behind it: at most 1 s (the default grows to 20 s).
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    onnotice: () => {},
    connection: {
      application_name: 'gatehouse',
      ...(runtime ? { lock_timeout: LOCK_TIMEOUT_MS, statement_timeout: STATEMENT_TIMEOUT_MS } : {}),
    },
  });
  return {
    dialect: new PostgresJSDialect({ postgres: runtime ? withAcquireTimeout(sql, ACQUIRE_TIMEOUT_MS) : sql }),
    sql,
    end: () => sql.end({ timeout: 5 }),
  };
}

/** A PostgreSQL server through postgres.js: production, Workers and the integration suite. */
export async function openPostgres(options: OpenOptions): Promise<DatabaseHandle> {
  const runtime = postgresDialect(options.url, options.poolMax ?? 10, { runtime: true });
  const db = new Kysely<Database>({ dialect: runtime.dialect, log: options.log });
  return {
    kind: 'postgres',
    db,
    async withOwner(fn) {
      const owner = postgresDialect(options.migrationUrl ?? options.url, 1, { runtime: false });
      const ownerDb: SchemalessDb = new Kysely({ dialect: owner.dialect });
      try {
        return await fn(ownerDb);
      } finally {
        await ownerDb.destroy();
      }
    },
    async listen(channel, onNotify) {
      // postgres.js keeps one extra connection for LISTEN, reconnects it on
      // its own, and calls the third argument on every (re)connection.
      await runtime.sql.listen(
        channel,
        (payload) => onNotify(payload),
        () => onNotify(),
      );
    },
    // Ends the pool and the LISTEN connection alike, within 5 s: postgres.js's
    // end() without a timeout waits for good on a connection handed back after
    // it began (a write still running when the process is told to stop).
    close: async () => {
      await runtime.end();
      await db.destroy();
    },
  };
}
