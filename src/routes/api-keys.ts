import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { assertGrantable } from '../auth/access.js';
import { generateKey, KEY_PREFIX } from '../auth/api-key-material.js';
import type { NoticeOrigin, SecurityEvent } from '../auth/security-notices.js';
import type { Database } from '../db/database.js';
import { insertKey, listKeys, revokeKey } from '../db/queries/api-keys.js';
import { access, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { ApiError } from '../shared/errors.js';
import { isPermission, PERMISSION_COUNT } from '../shared/permissions.js';
import { displayName, NAME_MAX } from '../shared/text.js';
import type { Clock } from '../shared/types.js';
import { IdParams, isoOrNull, PermissionString, uniqueArray } from './schemas.js';

const ApiKeySchema = z
  .object({
    id: z.uuid(),
    name: z.string(),
    scopes: z.array(z.string()),
    expiresAt: z.iso.datetime().nullable(),
    keyPrefix: z.literal(KEY_PREFIX),
    lastFour: z.string(),
    createdAt: z.iso.datetime(),
    createdBy: z.uuid(),
    revokedAt: z.iso.datetime().nullable(),
    lastUsedAt: z.iso.datetime().nullable(),
  })
  .openapi('ApiKey');

const CreatedApiKeySchema = ApiKeySchema.omit({ revokedAt: true, lastUsedAt: true })
  .extend({ key: z.string().describe('The full key. Shown here once; it cannot be retrieved again.') })
  .openapi('CreatedApiKey');

/** The last instant whose ISO string has a 4-digit year (later ones render as `+010000-…`). */
const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
/** Z, or ±HH:MM no further than ±14:00 (the world's clocks span UTC-12:00 to UTC+14:00). */
const OFFSET = /(?:Z|[+-](?:(?:0\d|1[0-3]):[0-5]\d|14:00))$/;

/**
 * RFC 3339 date-time: a 4-digit year, seconds, Z or a ±HH:MM offset within
 * ±14:00, naming an instant no later than the end of year 9999 (UTC), so the
 * answer always echoes it as a plain ISO string in UTC.
 */
const ExpiresAt = z.iso
  .datetime({ offset: true, abort: true })
  .refine((value) => OFFSET.test(value), { message: 'offset must be Z or within ±14:00', abort: true })
  .refine((value) => Date.parse(value) <= LAST_INSTANT, { message: 'must be no later than 9999-12-31T23:59:59.999Z' })
  .openapi({
    pattern: OFFSET.source,
    description:
      'RFC 3339 date-time with a 4-digit year, Z or an offset within ±14:00, in the future and no later than 9999-12-31T23:59:59.999Z; echoed in UTC',
  });

const CreateApiKeySchema = z
  .object({
    name: displayName(NAME_MAX),
    scopes: uniqueArray(PermissionString, { min: 1, max: PERMISSION_COUNT, what: 'scope' }),
    expiresAt: ExpiresAt.nullable().optional(),
  })
  .strict()
  .openapi('CreateApiKey');

const createRoute = defineRoute({
  method: 'post',
  path: '/api/api-keys',
  // No key mints keys (API_KEY_AUTH).
  // A long-lived credential (docs/security.md "Sensitive actions and step-up"); no key mints keys.
  access: access.tenant(['api_keys:write'], { apiKeys: false, sensitive: true }),
  summary: 'Create an API key; scopes must be a subset of your own permissions',
  request: { body: { content: { 'application/json': { schema: CreateApiKeySchema } } } },
  responses: { 201: jsonContent(CreatedApiKeySchema, 'The key, with its plaintext shown once') },
});

const listRoute = defineRoute({
  method: 'get',
  path: '/api/api-keys',
  access: access.tenant(['api_keys:read'], { apiKeys: true }),
  summary: 'API keys of the active organization (never the key, its hash or salt)',
  responses: { 200: jsonContent(z.array(ApiKeySchema), 'Keys, newest first') },
});

const revokeRoute = defineRoute({
  method: 'delete',
  path: '/api/api-keys/{id}',
  access: access.tenant(['api_keys:write'], { apiKeys: true }),
  summary: 'Revoke an API key (idempotent)',
  request: { params: IdParams },
  responses: {
    200: jsonContent(
      z.object({ id: z.uuid(), revoked: z.literal(true), revokedAt: z.iso.datetime() }),
      'The key is revoked',
    ),
  },
});

type KeyRow = {
  id: string;
  name: string;
  scopes: string[];
  expires_at: Date | null;
  key_prefix: string;
  last_four: string;
  created_at: Date;
  created_by: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
};

function toApiKey(row: KeyRow) {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    expiresAt: isoOrNull(row.expires_at),
    keyPrefix: KEY_PREFIX as typeof KEY_PREFIX,
    lastFour: row.last_four,
    createdAt: new Date(row.created_at).toISOString(),
    createdBy: row.created_by,
    revokedAt: isoOrNull(row.revoked_at),
    lastUsedAt: isoOrNull(row.last_used_at),
  };
}

/** docs/api.md "API keys" (create, idempotent revoke, one audit entry each). */
export function apiKeyRoutes({
  db,
  clock,
  notify,
}: {
  db: Kysely<Database>;
  clock: Clock;
  /** Mails the creator a security notice after the answer (docs/security.md "Security notices"). */
  notify: (to: string, event: SecurityEvent, origin: NoticeOrigin) => void;
}) {
  return createRouter()
    .openapi(createRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = tenantOf(c);
      const { name, scopes, expiresAt } = c.req.valid('json');
      const expires = expiresAt ? new Date(expiresAt) : null;
      if (expires && expires.getTime() <= clock().getTime()) {
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
          details: [{ path: 'expiresAt', message: 'must be in the future' }],
        });
      }
      const unknown = scopes.filter((scope) => !isPermission(scope));
      if (unknown.length > 0) {
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
          details: unknown.map((scope) => ({ path: 'scopes', message: `unknown permission ${scope}` })),
        });
      }
      // A key's scopes are a subset of its creator's own permissions in the
      // organization, superadmins' too: no caller, so no bypass (a key never has it).
      assertGrantable({ granted: session.permissions, wanted: scopes, path: 'scopes' });
      const material = generateKey();
      const row = await insertKey(db, {
        tenantId,
        createdBy: session.user.id,
        name,
        scopes: [...scopes].sort(),
        expiresAt: expires,
        material,
      });
      const { revokedAt: _r, lastUsedAt: _l, ...created } = toApiKey(row);
      notify(
        session.user.email,
        { kind: 'api_key_created', keyName: name },
        { at: clock(), ip: c.get('clientIp') ?? null, userAgent: c.req.header('user-agent') ?? null },
      );
      return c.json({ ...created, key: material.key }, 201);
    })
    .openapi(listRoute, async (c) => {
      const tenantId = tenantOf(c);
      const rows = await listKeys(db, tenantId);
      return c.json(rows.map(toApiKey), 200);
    })
    .openapi(revokeRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = tenantOf(c);
      const { id } = c.req.valid('param');
      const revokedAt = await revokeKey(db, {
        tenantId,
        keyId: id,
        actorId: session.user.id,
      });
      if (!revokedAt) throw new ApiError('NOT_FOUND', 'API key not found');
      return c.json({ id, revoked: true as const, revokedAt: new Date(revokedAt).toISOString() }, 200);
    });
}
