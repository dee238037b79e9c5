/**
 * 0010: indexes for the webhook deliverer's fair claim (docs/webhooks.md
 * "Fairness").
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * A claim takes the organizations in turn: it walks the organizations that
 * have pending deliveries, and for each reads its live leases and its first
 * few due deliveries. Without these indexes a claim read and sorted every
 * pending delivery, so one organization's backlog slowed every claim,
 * everybody's.
 *
 * - webhook_deliveries_tenant_due_idx: pending deliveries by organization,
 *   in the order they come due (a new one, whose next_attempt_at is NULL,
 *   first).
 * - webhook_deliveries_leased_idx: the few pending deliveries a claim holds
 *   (locked_until is cleared when the attempt is recorded), by organization.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE INDEX webhook_deliveries_tenant_due_idx ON webhook_deliveries
      (tenant_id, next_attempt_at NULLS FIRST, created_at, id)
      WHERE status = 'pending'
  `.execute(db);
  await sql`
    CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (tenant_id, locked_until)
      WHERE status = 'pending' AND locked_until IS NOT NULL
  `.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS webhook_deliveries_leased_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS webhook_deliveries_tenant_due_idx`.execute(db);
}
