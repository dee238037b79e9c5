import { AsyncLocalStorage } from 'node:async_hooks';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  Kysely,
  type KyselyConfig,
  PostgresAdapter,
  PostgresDriver,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryResult,
} from 'kysely';
import postgres from 'postgres';
import { ACQUIRE_TIMEOUT_MS, type DatabaseHandle, PoolTimeoutError } from './client.js';
import type { Database } from './database.js';

/**
 * The Workers database: one Kysely built once per isolate whose connections
 * belong to the request being served. Workers forbid an I/O object (a socket)
 * shared across requests, so each request scope (`run`) owns at most one
 * postgres.js connection, opened by its first query and ended by `close`
 * (the entry passes it to `ctx.waitUntil`). A request that runs no query
 * opens nothing. Everything above the driver (routes, better-auth, the
 * ambient transaction of ambient.ts, withTenant) holds only the Kysely
 * handle, never a connection, so nothing crosses requests.
 *
 * One connection per request, handed out one Kysely connection at a time
 * (a pool of one): a transaction and a query outside it never interleave on
 * the same socket. A request waiting on its own connection past
 * ACQUIRE_TIMEOUT_MS gets PoolTimeoutError (503), as on Node.
 */
export interface ConnectionScope {
  /** Runs `fn` with its own connection scope; `close` ends that connection once everything the request started is done. */
  run<T>(fn: () => Promise<T>): { result: Promise<T>; close: () => Promise<void> };
  /** Keeps `task` inside the current request's lifetime: `close` waits for it (mail sent after the answer, lastUsedAt writes). */
  keep(task: Promise<unknown>): void;
}

export interface RequestDatabaseOptions {
  /** postgres:// URL (Hyperdrive's connectionString, or DATABASE_URL). */
  url: string;
  log?: KyselyConfig['log'];
  /** Per request, when the connection it opened is ended (tests and the bench count sessions with it). */
  onConnect?: () => void;
}

interface Scope {
  sql: postgres.Sql | null;
  /** The Kysely connection currently out, and who waits for it. */
  busy: boolean;
  waiters: (() => void)[];
  tasks: Promise<unknown>[];
  closed: boolean;
}

const storage = new AsyncLocalStorage<Scope>();

/**
 * postgres.js's array types (text[] and the rest), which it otherwise
 * fetches on every new connection (one more round trip, one more statement).
 * The first connection of the isolate fetches them as usual; later
 * connections start with `fetch_types: false` and a copy of what it learnt
 * (plain functions and numbers: no I/O object crosses requests). The
 * database's array types do not change under a running service.
 */
interface LearntTypes {
  typeArrayMap: Record<number, number>;
  parsers: Record<number, unknown>;
  serializers: Record<number, unknown>;
}

type SqlOptions = postgres.Sql['options'] & {
  shared: { typeArrayMap: Record<number, number> };
  parsers: Record<number, unknown>;
  serializers: Record<number, unknown>;
};

function connect(url: string, learnt: LearntTypes | null): postgres.Sql {
  const sql = postgres(url, {
    max: 1,
    // A request's connection is ended by close(); nothing idles past it.
    idle_timeout: 0,
    connect_timeout: 5,
    // Named prepared statements (Hyperdrive supports them; PgBouncer does in session mode).
    prepare: true,
    fetch_types: learnt === null,
    onnotice: () => {},
    // Only what a pooler passes through at start-up (PgBouncer refuses other
    // startup parameters): lock_timeout and statement_timeout are the runtime
    // role's own settings on Workers (docs/workers.md: ALTER ROLE … SET).
    connection: { application_name: 'gatehouse-worker' },
  });
  if (learnt) {
    const options = sql.options as SqlOptions;
    Object.assign(options.shared.typeArrayMap, learnt.typeArrayMap);
    Object.assign(options.parsers, learnt.parsers);
    Object.assign(options.serializers, learnt.serializers);
  }
  return sql;
}

function learn(sql: postgres.Sql): LearntTypes | null {
  const options = sql.options as SqlOptions;
  const typeArrayMap = { ...options.shared.typeArrayMap };
  const arrays = Object.values(typeArrayMap);
  if (arrays.length === 0) return null;
  const parsers: Record<number, unknown> = {};
  const serializers: Record<number, unknown> = {};
  for (const oid of arrays) {
    parsers[oid] = options.parsers[oid];
    serializers[oid] = options.serializers[oid];
  }
  return { typeArrayMap, parsers, serializers };
}

class ScopedConnection implements DatabaseConnection {
  constructor(private readonly sql: postgres.Sql) {}

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.sql.unsafe(compiled.sql, compiled.parameters as postgres.ParameterOrJSON<never>[]);
    const { command, count } = result;
    return {
      numAffectedRows:
        command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE'
          ? BigInt(count)
          : undefined,
      rows: Array.from(result.values()) as R[],
    };
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming is not used on Workers');
  }
}

export function openRequestScopedPostgres(options: RequestDatabaseOptions): {
  database: DatabaseHandle;
  scope: ConnectionScope;
} {
  let learnt: LearntTypes | null = null;

  const take = (scope: Scope) =>
    new Promise<void>((resolve, reject) => {
      if (!scope.busy) {
        scope.busy = true;
        return resolve();
      }
      const timer = setTimeout(() => {
        scope.waiters = scope.waiters.filter((w) => w !== grant);
        reject(new PoolTimeoutError(ACQUIRE_TIMEOUT_MS));
      }, ACQUIRE_TIMEOUT_MS);
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      scope.waiters.push(grant);
    });

  const give = (scope: Scope) => {
    const next = scope.waiters.shift();
    if (next) next();
    else scope.busy = false;
  };

  class ScopedDriver extends PostgresDriver {
    constructor() {
      super({} as never);
    }
    override async init(): Promise<void> {}
    override async acquireConnection(): Promise<DatabaseConnection> {
      const scope = storage.getStore();
      if (!scope) throw new Error('database used outside a request scope (ConnectionScope.run)');
      if (scope.closed) throw new Error('database used after its request ended');
      await take(scope);
      if (!scope.sql) {
        scope.sql = connect(options.url, learnt);
        options.onConnect?.();
      }
      return Object.assign(new ScopedConnection(scope.sql), { scope });
    }
    override async releaseConnection(connection: DatabaseConnection): Promise<void> {
      const { scope } = connection as ScopedConnection & { scope: Scope };
      if (!learnt && scope.sql) learnt = learn(scope.sql);
      give(scope);
    }
    override async destroy(): Promise<void> {}
  }

  const dialect: Dialect = {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new ScopedDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  };
  const db = new Kysely<Database>({ dialect, log: options.log });

  const scope: ConnectionScope = {
    run(fn) {
      const state: Scope = { sql: null, busy: false, waiters: [], tasks: [], closed: false };
      const result = storage.run(state, fn);
      const close = async () => {
        await result.catch(() => {});
        // Tasks may add tasks (a mail after a write): wait until none is left.
        for (let seen = 0; seen < state.tasks.length; ) {
          const batch = state.tasks.slice(seen);
          seen = state.tasks.length;
          await Promise.allSettled(batch);
        }
        state.closed = true;
        const sql = state.sql;
        state.sql = null;
        if (sql) await sql.end({ timeout: 5 }).catch(() => {});
      };
      return { result, close };
    },
    keep(task) {
      storage.getStore()?.tasks.push(task);
    },
  };

  const database: DatabaseHandle = {
    kind: 'postgres',
    db,
    withOwner: () => Promise.reject(new Error('migrations do not run on Workers: npm run db:migrate')),
    listen: () => Promise.reject(new Error('LISTEN needs a connection that outlives a request: Node only')),
    close: async () => {},
  };
  return { database, scope };
}
