import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { PLATFORM_ROLES } from '../auth/permissions.js';
import type { DB } from '../db/database.js';
import { afterCursor, cursorAt, decodeCursor, page, PageQuerySchema } from '../db/pagination.js';
import { ApiError } from '../errors.js';
import { access, sessionOf } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';
import { recordAudit } from '../audit.js';
import { IdParams } from './schemas.js';

const AdminUserSchema = z
  .object({
    id: z.uuid(),
    email: z.string(),
    role: z.enum(PLATFORM_ROLES),
    emailVerified: z.boolean(),
    deletedAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
  })
  .openapi('AdminUser');

const listRoute = defineRoute({
  method: 'get',
  path: '/api/admin/users',
  access: access.platform('admin', 'superadmin'),
  summary: 'List users (platform admins)',
  request: { query: PageQuerySchema },
  responses: {
    200: {
      description: 'A page of users, newest first',
      content: { 'application/json': { schema: z.object({ items: z.array(AdminUserSchema), nextCursor: z.string().nullable() }) } },
    },
  },
});

const RoleChangeSchema = z.object({ role: z.enum(PLATFORM_ROLES) }).strict().openapi('PlatformRoleChange');

const changeRoleRoute = defineRoute({
  method: 'patch',
  path: '/api/admin/users/{id}/role',
  access: access.platform('superadmin'),
  summary: "Change a user's platform role (superadmins)",
  request: {
    params: IdParams,
    body: { content: { 'application/json': { schema: RoleChangeSchema } } },
  },
  responses: {
    200: { description: 'The new role', content: { 'application/json': { schema: z.object({ id: z.uuid(), role: z.enum(PLATFORM_ROLES) }) } } },
  },
});

/** API.md platform admin routes; every change is audited (`user.role_changed`). */
export function adminRoutes({ db }: { db: Kysely<DB> }) {
  return createRouter()
    .openapi(listRoute, async (c) => {
      const { limit, cursor } = c.req.valid('query');
      let query = db
        .selectFrom('users')
        .select(['id', 'email', 'role', 'email_verified', 'deleted_at', 'created_at'])
        .select(cursorAt)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit + 1);
      if (cursor) {
        const after = decodeCursor(cursor);
        query = query.where((eb) => afterCursor(eb, after));
      }
      const { items, nextCursor } = page(await query.execute(), limit);
      return c.json(
        {
          items: items.map((user) => ({
            id: user.id,
            email: user.email,
            role: user.role,
            emailVerified: user.email_verified,
            deletedAt: user.deleted_at ? user.deleted_at.toISOString() : null,
            createdAt: user.created_at.toISOString(),
          })),
          nextCursor,
        },
        200,
      );
    })
    .openapi(changeRoleRoute, async (c) => {
      const actor = sessionOf(c);
      const { id } = c.req.valid('param');
      const { role } = c.req.valid('json');
      const changed = await db.transaction().execute(async (trx) => {
        // Every superadmin row first, in one order, then the target's: two
        // superadmins demoting each other at once queue on the same locks,
        // and the second re-reads the rows the first changed (so it counts
        // one superadmin, not two). Concurrent changes are audited in the
        // order they apply.
        const superadmins = await trx.selectFrom('users').select('id').where('role', '=', 'superadmin').orderBy('id').forUpdate().execute();
        const current = await trx.selectFrom('users').select(['id', 'role']).where('id', '=', id).forUpdate().executeTakeFirst();
        if (!current) throw new ApiError('NOT_FOUND', 'User not found');
        if (current.role === role) return current;
        // Like the last Owner of an organization (API.md 409 OWNERSHIP_CONSTRAINT):
        // only the command line can make a superadmin, so none must be left without one.
        if (current.role === 'superadmin' && superadmins.length <= 1) {
          throw new ApiError('OWNERSHIP_CONSTRAINT', 'The last superadmin cannot be demoted');
        }
        await trx.updateTable('users').set({ role, updated_at: new Date() }).where('id', '=', id).execute();
        await recordAudit(trx, {
          action: 'user.role_changed',
          actorId: actor.user.id,
          organizationId: null,
          metadata: { userId: id, previousRole: current.role, role },
          requestId: c.get('requestId'),
        });
        return { id, role };
      });
      return c.json({ id: changed.id, role: changed.role }, 200);
    });
}
