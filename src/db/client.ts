import { Kysely, type Dialect, type KyselyConfig } from 'kysely';
import { PostgresJSDialect } from 'kysely-postgres-js';
import postgres from 'postgres';
import type { DB } from './database.js';

/** The role every runtime query runs as: neither superuser nor owner, so row-level security applies. */
export const APP_ROLE = 'gatehouse_app';

export type EngineKind = 'postgres' | 'pglite';

/** One open database: the runtime handle, and how to run migrations and close it. */
export interface Database {
  kind: EngineKind;
  /** Runtime queries, as the application role. */
  db: Kysely<DB>;
  /** Runs `fn` with a handle that connects as the schema owner (migrations, the user:role command). */
  withOwner<T>(fn: (owner: Kysely<any>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface OpenOptions {
  url: string;
  migrationUrl?: string;
  poolMax?: number;
  /** Kysely's log hook: the benchmark counts statements through it. */
  log?: KyselyConfig['log'];
}

function postgresDialect(url: string, max: number): { dialect: Dialect; end: () => Promise<void> } {
  // Note: `fetch_types: false` hangs under kysely-postgres-js (seen while scouting); leave the default.
  const sql = postgres(url, {
    max,
    idle_timeout: 30,
    connect_timeout: 5,
    onnotice: () => {},
    connection: { application_name: 'gatehouse' },
  });
  return { dialect: new PostgresJSDialect({ postgres: sql }), end: () => sql.end({ timeout: 5 }) };
}

/** A PostgreSQL server through postgres.js: production, Workers and the integration suite. */
export async function openPostgres(options: OpenOptions): Promise<Database> {
  const runtime = postgresDialect(options.url, options.poolMax ?? 10);
  const db = new Kysely<DB>({ dialect: runtime.dialect, log: options.log });
  return {
    kind: 'postgres',
    db,
    async withOwner(fn) {
      const owner = postgresDialect(options.migrationUrl ?? options.url, 1);
      const ownerDb = new Kysely<any>({ dialect: owner.dialect });
      try {
        return await fn(ownerDb);
      } finally {
        await ownerDb.destroy();
      }
    },
    close: () => db.destroy(),
  };
}

