import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { WEBHOOK_EVENTS } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { createEndpoint, deleteEndpoint, listEndpoints, rotateSecret, updateEndpoint } from '../db/queries/webhooks.js';
import { sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, errorResponse, jsonContent } from '../router.js';
import { ApiError } from '../shared/errors.js';
import { generateWebhookSecret, type SecretBox } from '../webhooks/secrets.js';
import { checkWebhookUrl, type UrlPolicy } from '../webhooks/url-policy.js';
import { IdParams, uniqueArray, updateBody, WEBHOOK_ACCESS } from './schemas.js';

const EventName = z.enum(['*', ...WEBHOOK_EVENTS]);

const Events = uniqueArray(EventName, { min: 1, max: WEBHOOK_EVENTS.length, what: 'event' })
  .refine((events) => !events.includes('*') || events.length === 1, {
    message: '"*" subscribes to every event and stands alone',
  })
  .describe('Event names of the catalog, or ["*"] for every event (new ones included)')
  // The refinement above, as the document states it: "*" alone, or catalog names.
  .openapi({
    anyOf: [
      { type: 'array', items: { type: 'string', const: '*' }, minItems: 1, maxItems: 1 },
      { type: 'array', items: { type: 'string', enum: [...WEBHOOK_EVENTS] } },
    ],
  });

const Url = z
  .string()
  .min(1)
  .max(2048)
  .describe('https:// (http:// too outside production); no private addresses')
  .openapi({ format: 'uri' });
const Description = z.string().max(200);

const WebhookSchema = z
  .object({
    id: z.uuid(),
    url: z.string().openapi({ format: 'uri' }),
    events: z.array(z.string()),
    description: z.string().nullable(),
    enabled: z.boolean(),
    createdAt: z.iso.datetime(),
    disabledReason: z.string().nullable(),
  })
  .openapi('Webhook');

const CreatedWebhookSchema = WebhookSchema.omit({ disabledReason: true })
  .extend({
    secret: z.string().describe('The signing secret (`whsec_` + base64 of 24 bytes). Shown here and on rotation only.'),
  })
  .openapi('CreatedWebhook');

const CreateWebhookSchema = z
  .object({ url: Url, events: Events, description: Description.nullable().optional() })
  .strict()
  .openapi('CreateWebhook');

const UpdateWebhookSchema = updateBody('UpdateWebhook', {
  url: Url.optional(),
  events: Events.optional(),
  description: Description.nullable().optional(),
  enabled: z.boolean().optional(),
});

const { read, write, writeSecret } = WEBHOOK_ACCESS;

const createRoute = defineRoute({
  method: 'post',
  path: '/api/webhooks',
  access: writeSecret,
  summary: 'Add a webhook endpoint to the active organization (at most WEBHOOK_MAX_ENDPOINTS)',
  request: { body: { content: { 'application/json': { schema: CreateWebhookSchema } }, required: true } },
  responses: {
    201: jsonContent(CreatedWebhookSchema, 'The endpoint, with its signing secret shown once'),
    409: errorResponse(409, [['QUOTA_EXCEEDED', 'the organization has WEBHOOK_MAX_ENDPOINTS endpoints already']]),
  },
});

const listRoute = defineRoute({
  method: 'get',
  path: '/api/webhooks',
  access: read,
  summary: "The active organization's webhook endpoints (never their secrets)",
  responses: { 200: jsonContent(z.array(WebhookSchema), 'Endpoints, oldest first') },
});

const updateRoute = defineRoute({
  method: 'patch',
  path: '/api/webhooks/{id}',
  access: write,
  summary: 'Change a webhook endpoint; enabling it again clears its failure streak',
  description:
    'An API key may not change `url` (403 FORBIDDEN): pointing the stream elsewhere is worth as much as ' +
    'creating an endpoint or rotating its secret, which keys never do.',
  request: {
    params: IdParams,
    body: { content: { 'application/json': { schema: UpdateWebhookSchema } }, required: true },
  },
  responses: { 200: jsonContent(WebhookSchema, 'The endpoint') },
});

const deleteRoute = defineRoute({
  method: 'delete',
  path: '/api/webhooks/{id}',
  access: write,
  summary: 'Remove a webhook endpoint and its deliveries',
  request: { params: IdParams },
  responses: { 200: jsonContent(z.object({ id: z.uuid(), deleted: z.literal(true) }), 'The endpoint is gone') },
});

const rotateRoute = defineRoute({
  method: 'post',
  path: '/api/webhooks/{id}/rotate-secret',
  access: writeSecret,
  summary: 'Replace the signing secret; the old one signs nothing from now on',
  request: { params: IdParams },
  responses: { 200: jsonContent(z.object({ id: z.uuid(), secret: z.string() }), 'The new secret, shown once') },
});

function toWebhook(row: {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  created_at: Date;
}) {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    enabled: row.enabled,
    createdAt: new Date(row.created_at).toISOString(),
    disabledReason: row.disabled_reason,
  };
}

/**
 * README "Webhooks": an organization's endpoints, managed with
 * organizations:write, read with organizations:read (their deliveries:
 * routes/webhook-deliveries.ts).
 */
export function webhookRoutes({
  db,
  secrets,
  urlPolicy,
  maxEndpoints,
}: {
  db: Kysely<Database>;
  secrets: SecretBox;
  urlPolicy: UrlPolicy;
  /** WEBHOOK_MAX_ENDPOINTS: an organization's endpoints at most. */
  maxEndpoints: number;
}) {
  const checkedUrl = async (url: string) => {
    const verdict = await checkWebhookUrl(url, urlPolicy);
    if (!verdict.ok)
      throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
        details: [{ path: 'url', message: verdict.reason }],
      });
    // Stored as given (echoed as sent); the deliverer parses it again before each attempt.
    return url;
  };
  const actorOf = (c: Parameters<typeof sessionOf>[0]) => {
    const session = sessionOf(c);
    return { tenantId: tenantOf(c), actorId: session.user.id };
  };

  return createRouter()
    .openapi(createRoute, async (c) => {
      const { url, events, description } = c.req.valid('json');
      const secret = generateWebhookSecret();
      const endpoint = await createEndpoint(
        db,
        {
          url: await checkedUrl(url),
          events,
          description: description ?? null,
          sealedSecret: await secrets.seal(secret),
        },
        actorOf(c),
        { maxEndpoints },
      );
      const { disabledReason: _, ...created } = toWebhook(endpoint);
      return c.json({ ...created, secret }, 201);
    })
    .openapi(listRoute, async (c) => {
      const rows = await listEndpoints(db, tenantOf(c));
      return c.json(rows.map(toWebhook), 200);
    })
    .openapi(updateRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { url, ...changes } = c.req.valid('json');
      // Where the events go is the secret's other half: no key moves it.
      if (url !== undefined && sessionOf(c).apiKey)
        throw new ApiError('FORBIDDEN', 'API keys cannot perform this action');
      const endpoint = await updateEndpoint(
        db,
        id,
        { ...changes, ...(url !== undefined ? { url: await checkedUrl(url) } : {}) },
        actorOf(c),
      );
      return c.json(toWebhook(endpoint), 200);
    })
    .openapi(deleteRoute, async (c) => {
      const { id } = c.req.valid('param');
      await deleteEndpoint(db, id, actorOf(c));
      return c.json({ id, deleted: true as const }, 200);
    })
    .openapi(rotateRoute, async (c) => {
      const { id } = c.req.valid('param');
      const secret = generateWebhookSecret();
      await rotateSecret(db, id, await secrets.seal(secret), actorOf(c));
      return c.json({ id, secret }, 200);
    });
}
