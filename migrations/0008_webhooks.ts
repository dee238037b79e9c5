/**
 * 0008: webhooks (README "Webhooks", docs/webhooks.md): an organization's endpoints and the
 * deliveries of its events, a transactional outbox.
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * - webhook_endpoints: `secret` holds the signing secret encrypted under
 *   AUTH_SECRET (AES-GCM, src/webhooks/secrets.ts), never the secret itself;
 *   `failing_since` is when the endpoint's deliveries started failing (cleared
 *   by a success): five days of it disables the endpoint.
 * - webhook_deliveries: one row per (event, endpoint), written by the same
 *   statement as the audit entry it reports (src/db/audit.ts), so it commits
 *   or rolls back with the change. `payload` is the body, fixed at write time
 *   so every retry sends the same bytes under the same `webhook-id` (the row
 *   id). `locked_until` is the lease of the instance sending it: an instance
 *   that dies mid-send leaves a lease that expires, and the delivery is sent
 *   again (at least once). A new delivery has no `next_attempt_at`: it is
 *   due at once (whatever the clock of the instance that reads it says);
 *   a retry's is the time it comes due.
 * - Row-level security like every tenant table; the deliverer, which works
 *   across organizations, names itself (app.webhook_deliverer = 'on') for the
 *   statements that claim and settle deliveries.
 * - A row trigger notifies `gatehouse_webhooks` when deliveries are written
 *   (PostgreSQL folds the repeats of one transaction into one, sent at
 *   commit): a Node instance's deliverer wakes then, and not for an audited
 *   change no endpoint subscribes to.
 */
import { sql, type Kysely } from 'kysely';

const CURRENT_TENANT = sql`nullif(current_setting('app.tenant_id', true), '')::uuid`;
const DELIVERER = sql`current_setting('app.webhook_deliverer', true) = 'on'`;

export async function up(db: Kysely<any>): Promise<void> {
  const statements = [
    sql`
      CREATE TABLE webhook_endpoints (
        id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id       uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        url             text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
        events          text[]      NOT NULL CHECK (cardinality(events) >= 1),
        description     text        CHECK (length(description) <= 200),
        secret          text        NOT NULL,
        enabled         boolean     NOT NULL DEFAULT true,
        disabled_reason text,
        failing_since   timestamptz,
        created_at      timestamptz NOT NULL DEFAULT now(),
        updated_at      timestamptz NOT NULL DEFAULT now()
      )
    `,
    sql`CREATE INDEX webhook_endpoints_tenant_id_idx ON webhook_endpoints (tenant_id, created_at, id)`,
    sql`
      CREATE TABLE webhook_deliveries (
        id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id       uuid        NOT NULL,
        endpoint_id     uuid        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
        event_id        uuid        NOT NULL,
        event_type      text        NOT NULL,
        payload         jsonb       NOT NULL,
        status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
        attempts        integer     NOT NULL DEFAULT 0,
        last_status_code integer,
        last_error      text,
        next_attempt_at timestamptz,
        locked_until    timestamptz,
        created_at      timestamptz NOT NULL DEFAULT now(),
        updated_at      timestamptz NOT NULL DEFAULT now()
      )
    `,
    sql`CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC)`,
    sql`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at NULLS FIRST) WHERE status = 'pending'`,

    sql`ALTER TABLE webhook_endpoints ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE webhook_endpoints FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY webhook_endpoints_access ON webhook_endpoints
        USING (tenant_id = ${CURRENT_TENANT} OR ${DELIVERER})
        WITH CHECK (tenant_id = ${CURRENT_TENANT} OR ${DELIVERER})
    `,
    sql`ALTER TABLE webhook_deliveries ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE webhook_deliveries FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY webhook_deliveries_access ON webhook_deliveries
        USING (tenant_id = ${CURRENT_TENANT} OR ${DELIVERER})
        WITH CHECK (tenant_id = ${CURRENT_TENANT} OR ${DELIVERER})
    `,
    sql`GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_endpoints, webhook_deliveries TO gatehouse_app`,

    sql`
      CREATE FUNCTION notify_webhooks() RETURNS trigger
      LANGUAGE plpgsql
      AS $$
      BEGIN
        PERFORM pg_notify('gatehouse_webhooks', '');
        RETURN NULL;
      END
      $$
    `,
    sql`
      CREATE TRIGGER webhook_deliveries_notify
      AFTER INSERT ON webhook_deliveries
      FOR EACH ROW EXECUTE FUNCTION notify_webhooks()
    `,
  ];
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS webhook_deliveries`.execute(db);
  await sql`DROP TABLE IF EXISTS webhook_endpoints`.execute(db);
  await sql`DROP FUNCTION IF EXISTS notify_webhooks()`.execute(db);
}
