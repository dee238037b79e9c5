/**
 * 0005: tell every running instance when what `session_state` reads has
 * changed, so an instance may keep session states in memory between requests
 * (src/auth/session-state-cache.ts) and still see a role change, a revoked
 * session, an organization switch or a scheduled deletion on the next request.
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * One statement-level trigger per table that `session_state` reads (sessions,
 * users, members, roles, role_permissions; permissions is seeded and never
 * written at runtime) sends NOTIFY gatehouse_session_state with an empty
 * payload: listeners drop everything they hold. PostgreSQL delivers it when
 * the writing transaction commits, never for one that rolls back, and folds
 * repeats within a transaction into one. A new session (INSERT INTO sessions)
 * is not cached anywhere yet, so only its updates and deletions notify.
 */
import { sql, type Kysely } from 'kysely';

const TRIGGERS: { table: string; events: string }[] = [
  { table: 'sessions', events: 'UPDATE OR DELETE' },
  { table: 'users', events: 'UPDATE OR DELETE' },
  { table: 'members', events: 'INSERT OR UPDATE OR DELETE' },
  { table: 'roles', events: 'UPDATE OR DELETE' },
  { table: 'role_permissions', events: 'INSERT OR UPDATE OR DELETE' },
];

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE FUNCTION notify_session_state() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
    BEGIN
      PERFORM pg_notify('gatehouse_session_state', '');
      RETURN NULL;
    END
    $$
  `.execute(db);
  for (const { table, events } of TRIGGERS) {
    await sql`
      CREATE TRIGGER ${sql.id(`${table}_notify_session_state`)}
      AFTER ${sql.raw(events)} ON ${sql.id(table)}
      FOR EACH STATEMENT EXECUTE FUNCTION notify_session_state()
    `.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const { table } of TRIGGERS) await sql`DROP TRIGGER IF EXISTS ${sql.id(`${table}_notify_session_state`)} ON ${sql.id(table)}`.execute(db);
  await sql`DROP FUNCTION IF EXISTS notify_session_state()`.execute(db);
}
