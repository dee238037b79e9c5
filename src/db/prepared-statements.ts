import type postgres from 'postgres';

/**
 * Kysely sends every statement through postgres.js's `unsafe()`, which does
 * not prepare: each parameterised statement took two round trips (describe,
 * then execute) and was parsed and planned every time. Here statements are
 * prepared, as postgres.js prepares its own tagged queries: after a
 * connection's first run of one, one round trip and no planning
 * (docs/performance.md "Session 12 (prepared statements)").
 *
 * When a deploy's migration adds a column under a prepared `select *` or
 * `returning *`, PostgreSQL refuses it once ("cached plan must not change
 * result type"). Outside a transaction postgres.js prepares it again and
 * runs it; inside one the error would already have aborted the transaction.
 * So in a transaction a statement that selects or returns `*` stays
 * unnamed (the library's do; our hot write path names its columns).
 *
 * The texts prepared are bounded: a SCIM filter's structure, or the length
 * of a list, shapes the statement's text, and each text prepared is a plan
 * held by every server connection that ran it. The first `limit` distinct
 * texts a pool meets are prepared (the service's own statements come first
 * and stay few); later new ones run unnamed, as before.
 *
 * `?prepare=false` on DATABASE_URL turns it all off (postgres.js's own
 * option), as a pooler in transaction mode before PgBouncer 1.21 requires.
 */
export function statementPreparer(limit: number): (connection: postgres.ReservedSql) => postgres.ReservedSql {
  const budget = statementBudget(limit);
  return (connection) => {
    const unsafe = connection.unsafe.bind(connection);
    let transaction = false;
    connection.unsafe = ((
      query: string,
      parameters?: postgres.ParameterOrJSON<never>[],
      options?: postgres.UnsafeQueryOptions,
    ) => {
      // Kysely opens a transaction on its reservation with `begin` or `start transaction …`.
      transaction ||= TRANSACTION_START.test(query);
      // Without parameters postgres.js sends the one-round-trip simple query, never prepared.
      const prepare = (parameters?.length ?? 0) > 0 && !(transaction && EVERY_COLUMN.test(query)) && budget(query);
      return unsafe(query, parameters, prepare ? { prepare, ...options } : options);
    }) as typeof connection.unsafe;
    return connection;
  };
}
const TRANSACTION_START = /^(begin|start transaction)\b/i;
/** `select *`, `"t".*`, `returning *` (not `count(*)`, nor a `'*'` literal such as the webhooks' wildcard event). */
const EVERY_COLUMN = /(?:\bselect(?:\s+distinct)?|\breturning|,)\s*\*|\.\*/i;

/** True for the first `limit` distinct texts and for every later run of one of them. */
function statementBudget(limit: number): (query: string) => boolean {
  const known = new Set<string>();
  return (query) => {
    if (known.has(query)) return true;
    if (known.size >= limit) return false;
    known.add(query);
    return true;
  };
}
