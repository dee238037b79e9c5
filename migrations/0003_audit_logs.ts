/**
 * 0003: the append-only audit log (docs/api.md "Audit actions").
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * Append-only by grants, not only by code: the runtime role may INSERT and
 * SELECT, never UPDATE or DELETE. Tenant rows are under row-level security
 * like the role tables; platform-level entries (a platform role change) have
 * no tenant and can be written only by a transaction that names none; they
 * are read back only through their actor (app.actor_id: a data export).
 */
import { sql, type Kysely } from 'kysely';

const CURRENT_TENANT = sql`nullif(current_setting('app.tenant_id', true), '')::uuid`;
const CURRENT_ACTOR = sql`nullif(current_setting('app.actor_id', true), '')::uuid`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE audit_logs (
      id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
      -- no foreign keys: entries outlive the users and organizations they name
      tenant_id  uuid,
      actor_id   uuid,
      action     text        NOT NULL CHECK (action ~ '^[a-z_]+\\.[a-z_]+$'),
      metadata   jsonb       NOT NULL DEFAULT '{}'::jsonb,
      request_id text,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `.execute(db);
  await sql`CREATE INDEX audit_logs_tenant_id_created_at_idx ON audit_logs (tenant_id, created_at DESC, id DESC)`.execute(db);
  await sql`CREATE INDEX audit_logs_actor_id_idx ON audit_logs (actor_id)`.execute(db);

  await sql`ALTER TABLE audit_logs ENABLE ROW LEVEL SECURITY`.execute(db);
  await sql`ALTER TABLE audit_logs FORCE ROW LEVEL SECURITY`.execute(db);
  // A tenant reads its own entries; a transaction that names no tenant but
  // names an actor (a user's data export) reads that actor's entries.
  await sql`
    CREATE POLICY audit_logs_select ON audit_logs FOR SELECT
      USING (tenant_id = ${CURRENT_TENANT} OR (${CURRENT_TENANT} IS NULL AND actor_id = ${CURRENT_ACTOR}))
  `.execute(db);
  await sql`
    CREATE POLICY audit_logs_insert ON audit_logs FOR INSERT
      WITH CHECK (tenant_id = ${CURRENT_TENANT} OR (tenant_id IS NULL AND ${CURRENT_TENANT} IS NULL))
  `.execute(db);

  await sql`GRANT SELECT, INSERT ON audit_logs TO gatehouse_app`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS audit_logs`.execute(db);
}
