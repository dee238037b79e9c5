import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely';
import type { Database } from '../database.js';
import { setScope } from '../tenant.js';

/**
 * The deliverer's side of the webhook outbox: claims and outcomes across
 * organizations (the transaction names app.webhook_deliverer, which the
 * policies of migrations/0008_webhooks.ts let through). The management
 * routes' side is ./webhooks.ts.
 */

/** A disabled endpoint's pending events are failed: it receives nothing until enabled again. */
export async function failPending(trx: Transaction<Database>, endpointId: string, now: Date) {
  await trx
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', next_attempt_at: null, last_error: 'Endpoint disabled', updated_at: now })
    .where('endpoint_id', '=', endpointId)
    .where('status', '=', 'pending')
    .where('event_type', '<>', 'webhook.test')
    .execute();
}

export interface ClaimedDelivery {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  payload: Record<string, unknown>;
  attempts: number;
  url: string;
  secret: string;
  failing_since: Date | null;
  /** The lease this claim holds: its outcome is recorded only while the lease is still this one. */
  locked_until: Date;
}

/** Serialises claims (a transaction-scoped advisory lock): each sees the leases of the one before. */
const CLAIM_LOCK = sql`pg_advisory_xact_lock(hashtextextended('gatehouse.webhook_claim', 0))`;

/**
 * Leases up to `limit` due deliveries until `leaseUntil`, counting the
 * attempt, fairly across organizations:
 *
 * - an organization never holds more than `perOrganization` live leases,
 *   counted over every instance (a lease is the row's `locked_until`), so a
 *   slow or silent organization leaves the rest of the slots to the others;
 * - the claim takes the organizations in turn: each organization's first due
 *   deliveries are numbered, and the claim takes the lowest (leases held +
 *   number) first, so an organization with nothing in flight goes before
 *   the second delivery of one that has some.
 *
 * It walks the organizations that have pending deliveries (a skip scan of
 * migration 0010's index) and reads a few index entries of each: one
 * organization's backlog does not slow it. Claims are serialised by an
 * advisory lock so the counts are exact; FOR UPDATE SKIP LOCKED and the
 * lease re-checked on the locked row keep two claims from ever taking the
 * same delivery. A lease that expires (the instance died mid-send) makes the
 * delivery due again.
 */
export function claimDue(
  db: Kysely<Database>,
  {
    now,
    leaseUntil,
    limit,
    perOrganization = limit,
  }: { now: Date; leaseUntil: Date; limit: number; perOrganization?: number },
) {
  return db.transaction().execute(async (trx) => {
    await setScope(trx, { webhookDeliverer: 'on' });
    await sql`SELECT ${CLAIM_LOCK}`.execute(trx);
    // Planner settings for this transaction only. Under row-level security
    // the planner underestimates an organization's pending rows and reads
    // them all (a bitmap scan and a sort) instead of the first few in the
    // index's order; and the statement's estimated cost starts a JIT
    // compilation that takes longer than the statement (PostgreSQL 15, 100,000
    // pending: 650 ms with both, 12-45 ms without).
    await sql`SELECT set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)`.execute(trx);
    const due = (range: RawBuilder<unknown>) => sql`
      SELECT d.id, d.tenant_id, d.next_attempt_at, d.created_at FROM webhook_deliveries d
      WHERE d.tenant_id = h.tenant_id AND d.status = 'pending' AND ${range}
        AND (d.locked_until IS NULL OR d.locked_until <= ${now})
        -- A disabled endpoint receives only what its test button sends.
        AND (d.event_type = 'webhook.test' OR (SELECT w.enabled FROM webhook_endpoints w WHERE w.id = d.endpoint_id))
      ORDER BY d.next_attempt_at NULLS FIRST, d.created_at, d.id
      LIMIT ${perOrganization}
    `;
    const { rows } = await sql<ClaimedDelivery>`
      WITH RECURSIVE tenants AS (
        (SELECT tenant_id FROM webhook_deliveries WHERE status = 'pending' ORDER BY tenant_id LIMIT 1)
        UNION ALL
        SELECT (
          SELECT d.tenant_id FROM webhook_deliveries d
          WHERE d.status = 'pending' AND d.tenant_id > t.tenant_id
          ORDER BY d.tenant_id LIMIT 1
        )
        FROM tenants t WHERE t.tenant_id IS NOT NULL
      ),
      held AS (
        SELECT t.tenant_id, (
          SELECT count(*) FROM webhook_deliveries d
          WHERE d.tenant_id = t.tenant_id AND d.status = 'pending' AND d.locked_until > ${now}
        ) AS leases
        FROM tenants t WHERE t.tenant_id IS NOT NULL
      ),
      candidates AS (
        -- New deliveries, then retries that have come due: two ranges of the index, each read in order.
        SELECT c.*, h.leases FROM held h
        CROSS JOIN LATERAL ((${due(sql`d.next_attempt_at IS NULL`)}) UNION ALL (${due(sql`d.next_attempt_at <= ${now}`)})) c
      ),
      ranked AS (
        SELECT id, next_attempt_at, created_at,
          leases + row_number() OVER (PARTITION BY tenant_id ORDER BY next_attempt_at NULLS FIRST, created_at, id) AS turn
        FROM candidates
      ),
      picked AS (
        SELECT id FROM ranked WHERE turn <= ${perOrganization}
        ORDER BY turn, next_attempt_at NULLS FIRST, created_at, id
        LIMIT ${limit}
      ),
      due AS (
        SELECT d.id FROM webhook_deliveries d JOIN picked USING (id)
        WHERE d.status = 'pending' AND (d.locked_until IS NULL OR d.locked_until <= ${now})
        FOR UPDATE OF d SKIP LOCKED
      )
      UPDATE webhook_deliveries d
      SET locked_until = ${leaseUntil}, attempts = d.attempts + 1, updated_at = ${now}
      FROM due, webhook_endpoints w
      WHERE d.id = due.id AND w.id = d.endpoint_id
      RETURNING d.id, d.tenant_id, d.endpoint_id, d.payload, d.attempts, w.url, w.secret, w.failing_since, d.locked_until
    `.execute(trx);
    return rows;
  });
}

export interface AttemptOutcome {
  id: string;
  /** The claim's lease: a delivery whose lease has since passed to another claim is not touched. */
  leasedUntil: Date;
  endpointId: string;
  succeeded: boolean;
  statusCode: number | null;
  error: string | null;
  /** When to try again; null: no retry left (the delivery is failed). */
  retryAt: Date | null;
  now: Date;
  /** The attempt reached a verdict on the endpoint (false: succeeded, or interrupted by the instance stopping). */
  endpointFailed: boolean;
  /** The endpoint has failed for long enough: disable it with this reason. */
  disable: string | null;
}

/**
 * Settles one attempt: the delivery's state, and the endpoint's failure
 * streak. Only while the delivery still holds this claim's lease: one whose
 * lease ran out and was claimed again belongs to the new claim.
 */
export function settleAttempt(db: Kysely<Database>, outcome: AttemptOutcome) {
  return db.transaction().execute(async (trx) => {
    await setScope(trx, { webhookDeliverer: 'on' });
    const settled = await trx
      .updateTable('webhook_deliveries')
      .set({
        status: outcome.succeeded ? 'succeeded' : outcome.retryAt ? 'pending' : 'failed',
        last_status_code: outcome.statusCode,
        last_error: outcome.error,
        next_attempt_at: outcome.succeeded ? null : outcome.retryAt,
        locked_until: null,
        updated_at: outcome.now,
      })
      .where('id', '=', outcome.id)
      .where('locked_until', '=', outcome.leasedUntil)
      .executeTakeFirst();
    if (settled.numUpdatedRows === 0n) return false;
    if (outcome.succeeded || outcome.endpointFailed)
      await trx
        .updateTable('webhook_endpoints')
        .set(
          outcome.succeeded
            ? { failing_since: null }
            : outcome.disable
              ? { enabled: false, disabled_reason: outcome.disable }
              : { failing_since: sql`coalesce(failing_since, ${outcome.now})` },
        )
        .where('id', '=', outcome.endpointId)
        .execute();
    if (outcome.disable) await failPending(trx, outcome.endpointId, outcome.now);
    return true;
  });
}
