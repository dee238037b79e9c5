import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { PageQuerySchema } from '../db/pagination.js';
import { auditPage } from '../db/queries/audit-logs.js';
import { access, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';

const AuditEntrySchema = z
  .object({
    id: z.uuid(),
    action: z.string(),
    actorId: z.uuid().nullable(),
    organizationId: z.uuid().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    createdAt: z.iso.datetime(),
  })
  .openapi('AuditEntry');

const route = defineRoute({
  method: 'get',
  path: '/api/audit-logs',
  access: access.tenant(['organizations:read'], { apiKeys: true }),
  summary: 'Audit log of the active organization, newest first',
  request: { query: PageQuerySchema },
  responses: {
    200: {
      description: 'A page of entries',
      content: {
        'application/json': {
          schema: z.object({ items: z.array(AuditEntrySchema), nextCursor: z.string().nullable() }),
        },
      },
    },
  },
});

/** GET /api/audit-logs (docs/api.md "Pagination"): keyset pages of (created_at, id), newest first. */
export function auditLogRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter().openapi(route, async (c) => {
    const tenantId = tenantOf(c);
    const { items, nextCursor } = await auditPage(db, tenantId, c.req.valid('query'));
    return c.json(
      {
        items: items.map((row) => ({
          id: row.id,
          action: row.action,
          actorId: row.actor_id,
          organizationId: row.tenant_id,
          metadata: row.metadata,
          createdAt: row.created_at.toISOString(),
        })),
        nextCursor,
      },
      200,
    );
  });
}
