import { type Kysely, sql, type Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import { currentRequestScope } from '../../shared/request-scope.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { decodeCursor, paginate } from '../pagination.js';
import { withTenant } from '../tenant.js';
import { failPending } from './webhook-deliveries.js';

/** What the management routes return (never the secret). */
const ENDPOINT_COLUMNS = ['id', 'url', 'events', 'description', 'enabled', 'disabled_reason', 'created_at'] as const;

interface Actor {
  tenantId: string;
  actorId: string;
}

export function listEndpoints(db: Kysely<Database>, tenantId: string) {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('webhook_endpoints')
      .select(ENDPOINT_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at')
      .orderBy('id')
      .execute(),
  );
}

/**
 * Creates an endpoint with its (sealed) secret, audited as `webhook.created`;
 * 409 QUOTA_EXCEEDED when the organization has `maxEndpoints` already. The
 * count and the insert run under the organization's advisory lock, so two
 * creations at the limit never both pass.
 */
export function createEndpoint(
  db: Kysely<Database>,
  input: { url: string; events: string[]; description: string | null; sealedSecret: string },
  { tenantId, actorId }: Actor,
  { maxEndpoints }: { maxEndpoints: number },
) {
  return withTenant(db, tenantId, async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`gatehouse.webhook_endpoints:${tenantId}`}, 0))`.execute(
      trx,
    );
    const { count } = await trx
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('tenant_id', '=', tenantId)
      .executeTakeFirstOrThrow();
    if (Number(count) >= maxEndpoints) throw new ApiError('QUOTA_EXCEEDED', 'Quota exceeded');
    const endpoint = await trx
      .insertInto('webhook_endpoints')
      .values({
        tenant_id: tenantId,
        url: input.url,
        events: input.events,
        description: input.description,
        secret: input.sealedSecret,
      })
      .returning(ENDPOINT_COLUMNS)
      .executeTakeFirstOrThrow();
    await recordAudit(trx, {
      action: 'webhook.created',
      actorId,
      organizationId: tenantId,
      metadata: { webhookId: endpoint.id, url: endpoint.url, events: endpoint.events },
    });
    return endpoint;
  });
}

const notFound = () => new ApiError('NOT_FOUND', 'Webhook not found');

/** The organization's endpoint, or 404 (another organization's id included). */
async function existingEndpoint(trx: Transaction<Database>, tenantId: string, id: string) {
  const endpoint = await trx
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!endpoint) throw notFound();
}

/** Applies the given fields, audited as `webhook.updated` with the names of the fields changed. */
export function updateEndpoint(
  db: Kysely<Database>,
  id: string,
  changes: { url?: string; events?: string[]; description?: string | null; enabled?: boolean },
  { tenantId, actorId }: Actor,
) {
  return withTenant(db, tenantId, async (trx) => {
    const endpoint = await trx
      .updateTable('webhook_endpoints')
      .set({
        ...changes,
        // Enabling again starts with a clean slate; disabling by hand names no failure.
        ...(changes.enabled !== undefined ? { disabled_reason: null, failing_since: null } : {}),
        updated_at: new Date(),
      })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .returning(ENDPOINT_COLUMNS)
      .executeTakeFirst();
    if (!endpoint) throw notFound();
    if (changes.enabled === false) await failPending(trx, id, new Date());
    await recordAudit(trx, {
      action: 'webhook.updated',
      actorId,
      organizationId: tenantId,
      metadata: { webhookId: id, fields: Object.keys(changes).sort() },
    });
    return endpoint;
  });
}

export function deleteEndpoint(db: Kysely<Database>, id: string, { tenantId, actorId }: Actor) {
  return withTenant(db, tenantId, async (trx) => {
    const endpoint = await trx
      .deleteFrom('webhook_endpoints')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .returning('url')
      .executeTakeFirst();
    if (!endpoint) throw notFound();
    await recordAudit(trx, {
      action: 'webhook.deleted',
      actorId,
      organizationId: tenantId,
      metadata: { webhookId: id, url: endpoint.url },
    });
  });
}

/** Replaces the secret: the old one signs nothing from the commit on (deliveries read it at send time). */
export function rotateSecret(db: Kysely<Database>, id: string, sealedSecret: string, { tenantId, actorId }: Actor) {
  return withTenant(db, tenantId, async (trx) => {
    const rotated = await trx
      .updateTable('webhook_endpoints')
      .set({ secret: sealedSecret, updated_at: new Date() })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .returning('id')
      .executeTakeFirst();
    if (!rotated) throw notFound();
    await recordAudit(trx, {
      action: 'webhook.secret_rotated',
      actorId,
      organizationId: tenantId,
      metadata: { webhookId: id },
    });
  });
}

/** One `webhook.test` event for this endpoint only, whatever its filter (not an audit entry). */
export function enqueueTest(db: Kysely<Database>, id: string, { tenantId, actorId }: Actor) {
  return withTenant(db, tenantId, async (trx) => {
    const eventId = crypto.randomUUID();
    const now = new Date().toISOString();
    const payload = {
      type: 'webhook.test',
      timestamp: now,
      data: { id: eventId, action: 'webhook.test', actorId, organizationId: tenantId, metadata: {}, createdAt: now },
    };
    // One statement: written only if the endpoint is the organization's and
    // still there (its foreign-key check holds it against a concurrent delete).
    const delivery = await trx
      .insertInto('webhook_deliveries')
      .columns(['tenant_id', 'endpoint_id', 'event_id', 'event_type', 'payload'])
      .expression((eb) =>
        eb
          .selectFrom('webhook_endpoints')
          .select([
            'tenant_id',
            'id',
            sql<string>`${eventId}::uuid`.as('event_id'),
            sql<string>`'webhook.test'`.as('event_type'),
            sql<string>`${JSON.stringify(payload)}::text::jsonb`.as('payload'),
          ])
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id),
      )
      .returning('id')
      .executeTakeFirst();
    if (!delivery) throw notFound();
    const scope = currentRequestScope();
    if (scope) scope.webhooksQueued = true;
    return { deliveryId: delivery.id };
  });
}

/** GET /api/webhooks/:id/deliveries: newest first, the shared cursor paging. */
export function deliveriesPage(
  db: Kysely<Database>,
  tenantId: string,
  endpointId: string,
  page: { limit: number; cursor?: string },
) {
  // A bad cursor is the client's 400 whether or not the endpoint exists.
  if (page.cursor !== undefined) decodeCursor(page.cursor);
  return withTenant(db, tenantId, async (trx) => {
    await existingEndpoint(trx, tenantId, endpointId);
    return paginate(
      trx
        .selectFrom('webhook_deliveries')
        .select([
          'id',
          'event_id',
          'event_type',
          'status',
          'attempts',
          'last_status_code',
          'last_error',
          'next_attempt_at',
          'created_at',
        ])
        .where('tenant_id', '=', tenantId)
        .where('endpoint_id', '=', endpointId),
      page,
    );
  });
}
