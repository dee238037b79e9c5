import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { PageQuerySchema } from '../db/pagination.js';
import { deliveriesPage, enqueueTest } from '../db/queries/webhooks.js';
import { sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { IdParams, isoOrNull, WEBHOOK_ACCESS } from './schemas.js';

const DeliverySchema = z
  .object({
    id: z.uuid().describe('The `webhook-id` header of every attempt'),
    eventId: z.uuid().describe('The audit entry the event reports'),
    eventType: z.string(),
    status: z.enum(['pending', 'succeeded', 'failed']),
    attempts: z.number().int(),
    lastStatusCode: z.number().int().nullable(),
    lastError: z.string().nullable(),
    nextAttemptAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
  })
  .openapi('WebhookDelivery');

const { read, write } = WEBHOOK_ACCESS;

const testRoute = defineRoute({
  method: 'post',
  path: '/api/webhooks/{id}/test',
  access: write,
  summary: 'Send one `webhook.test` event to this endpoint, whatever its filter',
  request: { params: IdParams },
  responses: { 202: jsonContent(z.object({ deliveryId: z.uuid() }), 'Queued for delivery') },
});

const deliveriesRoute = defineRoute({
  method: 'get',
  path: '/api/webhooks/{id}/deliveries',
  access: read,
  summary: "An endpoint's deliveries, newest first",
  request: { params: IdParams, query: PageQuerySchema },
  responses: {
    200: jsonContent(
      z.object({ items: z.array(DeliverySchema), nextCursor: z.string().nullable() }),
      'A page of deliveries',
    ),
  },
});

/** README "Webhooks": what an endpoint was sent, and a test event on demand. */
export function webhookDeliveryRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter()
    .openapi(testRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json(await enqueueTest(db, id, { tenantId: tenantOf(c), actorId: sessionOf(c).user.id }), 202);
    })
    .openapi(deliveriesRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { items, nextCursor } = await deliveriesPage(db, tenantOf(c), id, c.req.valid('query'));
      return c.json(
        {
          items: items.map((row) => ({
            id: row.id,
            eventId: row.event_id,
            eventType: row.event_type,
            status: row.status,
            attempts: row.attempts,
            lastStatusCode: row.last_status_code,
            lastError: row.last_error,
            // A new delivery is due at once: its creation time.
            nextAttemptAt: row.status === 'pending' ? isoOrNull(row.next_attempt_at ?? row.created_at) : null,
            createdAt: new Date(row.created_at).toISOString(),
          })),
          nextCursor,
        },
        200,
      );
    });
}
