import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { PageQuerySchema } from '../db/pagination.js';
import { changePlatformRole, listUsers } from '../db/queries/users.js';
import { access, sessionOf } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';
import { PLATFORM_ROLES } from '../shared/permissions.js';
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
      content: {
        'application/json': {
          schema: z.object({ items: z.array(AdminUserSchema), nextCursor: z.string().nullable() }),
        },
      },
    },
  },
});

const RoleChangeSchema = z
  .object({ role: z.enum(PLATFORM_ROLES) })
  .strict()
  .openapi('PlatformRoleChange');

const changeRoleRoute = defineRoute({
  method: 'patch',
  path: '/api/admin/users/{id}/role',
  // docs/security.md "Sensitive actions and step-up".
  access: access.session({ platformRoles: ['superadmin'], sensitive: true }),
  summary: "Change a user's platform role (superadmins)",
  request: {
    params: IdParams,
    body: { content: { 'application/json': { schema: RoleChangeSchema } } },
  },
  responses: {
    200: {
      description: 'The new role',
      content: { 'application/json': { schema: z.object({ id: z.uuid(), role: z.enum(PLATFORM_ROLES) }) } },
    },
  },
});

/** docs/api.md "Platform roles": the admin routes; every change is audited (`user.role_changed`). */
export function adminRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter()
    .openapi(listRoute, async (c) => {
      const { items, nextCursor } = await listUsers(db, c.req.valid('query'));
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
      const changed = await changePlatformRole(db, {
        userId: id,
        role,
        actorId: actor.user.id,
      });
      return c.json({ id: changed.id, role: changed.role }, 200);
    });
}
