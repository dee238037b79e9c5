import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { assertGrantable } from '../auth/access.js';
import type { Database } from '../db/database.js';
import { createRole, deleteRole, updateRole } from '../db/queries/role-changes.js';
import { listRoles, slugify } from '../db/queries/roles.js';
import { access, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { ApiError } from '../shared/errors.js';
import { isPermission } from '../shared/permissions.js';
import { displayName, NAME_MAX } from '../shared/text.js';
import type { EnrichedSession } from '../shared/types.js';
import { IdParams, PermissionList, RoleSchema, toRoleRecord, updateBody } from './schemas.js';

const Name = displayName(NAME_MAX).openapi({
  description:
    'Its slug is the lower-cased letters and digits of the name (accents dropped) joined by hyphens, and must not be empty',
});
// Line breaks are fine in a description (NUL is refused in every body by middleware/json-input.ts).
const Description = z.string().max(500);

const CreateRoleSchema = z
  .object({ name: Name, description: Description.default(''), permissions: PermissionList })
  .strict()
  .openapi('CreateRole');
const UpdateRoleSchema = updateBody('UpdateRole', {
  name: Name.optional(),
  description: Description.optional(),
  permissions: PermissionList.optional(),
});

const listRoute = defineRoute({
  method: 'get',
  path: '/api/roles',
  access: access.tenant(['roles:read'], { apiKeys: true }),
  summary: 'Roles of the active organization (defaults first)',
  responses: { 200: jsonContent(z.array(RoleSchema), 'Owner, Admin, Member, Viewer, then custom roles by name') },
});

const createRoleRoute = defineRoute({
  method: 'post',
  path: '/api/roles',
  access: access.tenant(['roles:write'], { apiKeys: true }),
  summary: 'Create a custom role; its slug comes from its name',
  request: { body: { content: { 'application/json': { schema: CreateRoleSchema } } } },
  responses: { 201: jsonContent(RoleSchema, 'The created role') },
});

const updateRoleRoute = defineRoute({
  method: 'patch',
  path: '/api/roles/{id}',
  access: access.tenant(['roles:write'], { apiKeys: true }),
  summary: 'Change a role (partial); a new name regenerates the slug',
  request: { params: IdParams, body: { content: { 'application/json': { schema: UpdateRoleSchema } } } },
  responses: { 200: jsonContent(RoleSchema, 'The updated role') },
});

const deleteRoleRoute = defineRoute({
  method: 'delete',
  path: '/api/roles/{id}',
  access: access.tenant(['roles:delete'], { apiKeys: true }),
  summary: 'Delete a custom role; its members move to Viewer',
  request: { params: IdParams },
  responses: {
    200: jsonContent(
      z.object({ id: z.uuid(), deleted: z.literal(true), reassignedMembers: z.number().int() }),
      'The role is gone',
    ),
  },
});

/** Permission strings must exist, and nobody grants through a role what they do not hold (superadmins excepted). */
function checkGrantable(session: EnrichedSession, permissions: readonly string[]): void {
  const unknown = permissions.filter((permission) => !isPermission(permission));
  if (unknown.length > 0) {
    throw new ApiError('VALIDATION_ERROR', 'Unknown permissions', {
      details: unknown.map((p) => ({ path: 'permissions', message: `unknown permission ${p}` })),
    });
  }
  assertGrantable({ caller: session, granted: session.permissions, wanted: permissions, path: 'permissions' });
}

function slugOf(name: string): string {
  const slug = slugify(name);
  if (!slug)
    throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
      details: [{ path: 'name', message: 'must contain a letter or digit' }],
    });
  return slug;
}

/** docs/api.md "Permissions and roles". Every query names the tenant; RLS is the second lock. */
export function roleRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter()
    .openapi(listRoute, async (c) => {
      const tenantId = tenantOf(c);
      const roles = await listRoles(db, tenantId);
      return c.json(roles.map(toRoleRecord), 200);
    })
    .openapi(createRoleRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = tenantOf(c);
      const { name, description, permissions } = c.req.valid('json');
      checkGrantable(session, permissions);
      const slug = slugOf(name);
      const role = await createRole(db, {
        tenantId,
        name,
        slug,
        description,
        permissions,
        actorId: session.user.id,
      });
      return c.json(toRoleRecord(role), 201);
    })
    .openapi(updateRoleRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = tenantOf(c);
      const { id } = c.req.valid('param');
      const changes = c.req.valid('json');
      if (changes.permissions) checkGrantable(session, changes.permissions);
      const slug = changes.name === undefined ? undefined : slugOf(changes.name);
      const role = await updateRole(db, {
        tenantId,
        id,
        changes: { ...changes, slug },
        actorId: session.user.id,
      });
      return c.json(toRoleRecord(role), 200);
    })
    .openapi(deleteRoleRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = tenantOf(c);
      const { id } = c.req.valid('param');
      const reassigned = await deleteRole(db, {
        tenantId,
        id,
        actorId: session.user.id,
      });
      return c.json({ id, deleted: true as const, reassignedMembers: reassigned }, 200);
    });
}
