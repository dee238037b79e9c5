import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { generateScimToken, SCIM_TOKEN_PREFIX } from '../auth/scim-token-material.js';
import type { Database } from '../db/database.js';
import { insertScimToken, listScimTokens, revokeScimToken } from '../db/queries/scim-tokens.js';
import { access, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { ApiError } from '../shared/errors.js';
import { displayName, NAME_MAX } from '../shared/text.js';
import { IdParams, isoOrNull } from './schemas.js';

const ScimTokenSchema = z
  .object({
    id: z.uuid(),
    name: z.string(),
    createdAt: z.iso.datetime(),
    lastUsedAt: z.iso.datetime().nullable(),
  })
  .openapi('ScimToken');

const CreatedScimTokenSchema = ScimTokenSchema.omit({ lastUsedAt: true })
  .extend({
    token: z
      .string()
      .startsWith(SCIM_TOKEN_PREFIX)
      .describe("The token, for the directory's SCIM connection. Shown here once; it cannot be retrieved again."),
  })
  .openapi('CreatedScimToken');

const CreateScimTokenSchema = z
  .object({ name: displayName(NAME_MAX) })
  .strict()
  .openapi('CreateScimToken');

// A long-lived credential (docs/security.md "Sensitive actions and step-up"): a fresh session, never an API key.
const createRoute = defineRoute({
  method: 'post',
  path: '/api/scim/tokens',
  access: access.tenant(['organizations:write'], { apiKeys: false, sensitive: true }),
  summary: "Create a SCIM token for the organization's directory (valid on /api/scim/v2 only)",
  request: { body: { content: { 'application/json': { schema: CreateScimTokenSchema } } } },
  responses: { 201: jsonContent(CreatedScimTokenSchema, 'The token, shown once') },
});

const listRoute = defineRoute({
  method: 'get',
  path: '/api/scim/tokens',
  access: access.tenant(['organizations:read'], { apiKeys: false }),
  summary: "The organization's SCIM tokens in force (never the token)",
  responses: { 200: jsonContent(z.array(ScimTokenSchema), 'Tokens, oldest first') },
});

const revokeRoute = defineRoute({
  method: 'delete',
  path: '/api/scim/tokens/{id}',
  access: access.tenant(['organizations:write'], { apiKeys: false, sensitive: true }),
  summary: 'Revoke a SCIM token: refused from the next request on',
  request: { params: IdParams },
  responses: {
    200: jsonContent(z.object({ id: z.uuid(), deleted: z.literal(true) }), 'The token is revoked'),
  },
});

const toToken = (row: { id: string; name: string; created_at: Date; last_used_at: Date | null }) => ({
  id: row.id,
  name: row.name,
  createdAt: new Date(row.created_at).toISOString(),
  lastUsedAt: isoOrNull(row.last_used_at),
});

/** docs/scim.md: an organization's SCIM tokens (shown once, stored as a salted hash, audited). */
export function scimTokenRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter()
    .openapi(createRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = tenantOf(c);
      const { name } = c.req.valid('json');
      const material = generateScimToken();
      const row = await insertScimToken(db, { tenantId, createdBy: session.user.id, name, material });
      const { lastUsedAt: _l, ...created } = toToken(row);
      return c.json({ ...created, token: material.token }, 201);
    })
    .openapi(listRoute, async (c) => {
      const rows = await listScimTokens(db, tenantOf(c));
      return c.json(rows.map(toToken), 200);
    })
    .openapi(revokeRoute, async (c) => {
      const session = sessionOf(c);
      const { id } = c.req.valid('param');
      const revoked = await revokeScimToken(db, { tenantId: tenantOf(c), tokenId: id, actorId: session.user.id });
      if (!revoked) throw new ApiError('NOT_FOUND', 'SCIM token not found');
      return c.json({ id, deleted: true as const }, 200);
    });
}
