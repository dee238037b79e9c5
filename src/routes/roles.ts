import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { recordAudit } from '../audit.js';
import { missing } from '../auth/permissions.js';
import type { DB } from '../db/database.js';
import { findDefaultRole, findRole, knownPermissions, listRoles, setRolePermissions, slugify } from '../db/queries/roles.js';
import { withTenant } from '../db/tenant.js';
import { ApiError } from '../errors.js';
import { access, sessionOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import type { EnrichedSession } from '../types.js';
import { displayName, IdParams, PermissionList, RoleSchema, toRoleRecord, updateBody } from './schemas.js';

const Name = displayName(100).openapi({
  description: 'Its slug is the lower-cased letters and digits of the name (accents dropped) joined by hyphens, and must not be empty',
});
// Line breaks are fine in a description (NUL is refused in every body by middleware/json-input.ts).
const Description = z.string().max(500);

const CreateRoleSchema = z.object({ name: Name, description: Description.default(''), permissions: PermissionList }).strict().openapi('CreateRole');
const UpdateRoleSchema = updateBody('UpdateRole', { name: Name.optional(), description: Description.optional(), permissions: PermissionList.optional() });

const listRoute = defineRoute({
  method: 'get',
  path: '/api/roles',
  access: access.permissions('roles:read'),
  summary: 'Roles of the active organization (defaults first)',
  responses: { 200: jsonContent(z.array(RoleSchema), 'Owner, Admin, Member, Viewer, then custom roles by name') },
});

const createRoleRoute = defineRoute({
  method: 'post',
  path: '/api/roles',
  access: access.permissions('roles:write'),
  summary: 'Create a custom role; its slug comes from its name',
  request: { body: { content: { 'application/json': { schema: CreateRoleSchema } } } },
  responses: { 201: jsonContent(RoleSchema, 'The created role') },
});

const updateRoleRoute = defineRoute({
  method: 'patch',
  path: '/api/roles/{id}',
  access: access.permissions('roles:write'),
  summary: 'Change a role (partial); a new name regenerates the slug',
  request: { params: IdParams, body: { content: { 'application/json': { schema: UpdateRoleSchema } } } },
  responses: { 200: jsonContent(RoleSchema, 'The updated role') },
});

const deleteRoleRoute = defineRoute({
  method: 'delete',
  path: '/api/roles/{id}',
  access: access.permissions('roles:delete'),
  summary: 'Delete a custom role; its members move to Viewer',
  request: { params: IdParams },
  responses: {
    200: jsonContent(z.object({ id: z.uuid(), deleted: z.literal(true), reassignedMembers: z.number().int() }), 'The role is gone'),
  },
});

/** Permission strings must exist, and nobody grants through a role what they do not hold (superadmins excepted). */
async function checkGrantable(db: Kysely<DB>, session: EnrichedSession, permissions: readonly string[]): Promise<void> {
  const known = await knownPermissions(db);
  const unknown = permissions.filter((permission) => !known.has(permission));
  if (unknown.length > 0) {
    throw new ApiError('VALIDATION_ERROR', 'Unknown permissions', { details: unknown.map((p) => ({ path: 'permissions', message: `unknown permission ${p}` })) });
  }
  const lacking = session.user.role === 'superadmin' ? [] : missing(session.permissions, permissions);
  if (lacking.length > 0) {
    throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', { details: lacking.map((p) => ({ path: 'permissions', message: `caller lacks ${p}` })) });
  }
}

function slugOf(name: string): string {
  const slug = slugify(name);
  if (!slug) throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path: 'name', message: 'must contain a letter or digit' }] });
  return slug;
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '23505';
}

const slugConflict = (slug: string) => new ApiError('SLUG_CONFLICT', `A role with slug "${slug}" already exists in this organization`);

/** Spec §4 role routes, API.md role record. Every query names the tenant; RLS is the second lock. */
export function roleRoutes({ db }: { db: Kysely<DB> }) {
  return createRouter()
    .openapi(listRoute, async (c) => {
      const tenantId = sessionOf(c).session.activeOrganizationId!;
      const roles = await listRoles(db, tenantId);
      return c.json(roles.map(toRoleRecord), 200);
    })
    .openapi(createRoleRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = session.session.activeOrganizationId!;
      const { name, description, permissions } = c.req.valid('json');
      await checkGrantable(db, session, permissions);
      const slug = slugOf(name);
      try {
        const role = await withTenant(db, tenantId, async (trx) => {
          const { id } = await trx.insertInto('roles').values({ tenant_id: tenantId, name, slug, description }).returning('id').executeTakeFirstOrThrow();
          await setRolePermissions(trx, id, permissions);
          const created = (await findRole(trx, tenantId, id))!;
          await recordAudit(trx, {
            action: 'role.created',
            actorId: session.user.id,
            organizationId: tenantId,
            metadata: { roleId: id, name, slug, permissions: created.permissions },
            requestId: c.get('requestId'),
          });
          return created;
        });
        return c.json(toRoleRecord(role), 201);
      } catch (error) {
        if (isUniqueViolation(error)) throw slugConflict(slug);
        throw error;
      }
    })
    .openapi(updateRoleRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = session.session.activeOrganizationId!;
      const { id } = c.req.valid('param');
      const changes = c.req.valid('json');
      if (changes.permissions) await checkGrantable(db, session, changes.permissions);
      const slug = changes.name === undefined ? undefined : slugOf(changes.name);
      try {
        const role = await withTenant(db, tenantId, async (trx) => {
          const current = await trx.selectFrom('roles').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
          if (!current) throw new ApiError('NOT_FOUND', 'Role not found');
          if (current.slug === 'owner' && current.is_default && changes.permissions) {
            throw new ApiError('DEFAULT_ROLE', 'The Owner role always holds every permission');
          }
          // A different name, not only a different slug: 'OWNER' is a rename too.
          if (current.is_default && changes.name !== undefined && changes.name !== current.name) {
            throw new ApiError('DEFAULT_ROLE', 'Default roles keep their names');
          }
          const before = (await findRole(trx, tenantId, id))!;
          await trx
            .updateTable('roles')
            .set({
              ...(changes.name !== undefined ? { name: changes.name, slug } : {}),
              ...(changes.description !== undefined ? { description: changes.description } : {}),
              updated_at: new Date(),
            })
            .where('tenant_id', '=', tenantId)
            .where('id', '=', id)
            .execute();
          if (changes.permissions) await setRolePermissions(trx, id, changes.permissions);
          const after = (await findRole(trx, tenantId, id))!;
          await recordAudit(trx, {
            action: 'role.updated',
            actorId: session.user.id,
            organizationId: tenantId,
            metadata: {
              roleId: id,
              before: { name: before.name, slug: before.slug, description: before.description, permissions: before.permissions },
              after: { name: after.name, slug: after.slug, description: after.description, permissions: after.permissions },
            },
            requestId: c.get('requestId'),
          });
          return after;
        });
        return c.json(toRoleRecord(role), 200);
      } catch (error) {
        if (isUniqueViolation(error) && slug) throw slugConflict(slug);
        throw error;
      }
    })
    .openapi(deleteRoleRoute, async (c) => {
      const session = sessionOf(c);
      const tenantId = session.session.activeOrganizationId!;
      const { id } = c.req.valid('param');
      const reassigned = await withTenant(db, tenantId, async (trx) => {
        const role = await trx.selectFrom('roles').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
        if (!role) throw new ApiError('NOT_FOUND', 'Role not found');
        if (role.is_default) throw new ApiError('DEFAULT_ROLE', 'Default roles cannot be deleted');
        // Spec §4 rule 2: members of a deleted custom role become Viewers, in the same transaction.
        const viewer = await findDefaultRole(trx, tenantId, 'viewer');
        const moved = await trx
          .updateTable('members')
          .set({ role_id: viewer.id, role: 'member' })
          .where('organization_id', '=', tenantId)
          .where('role_id', '=', id)
          .executeTakeFirst();
        await trx.deleteFrom('roles').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
        const count = Number(moved.numUpdatedRows);
        await recordAudit(trx, {
          action: 'role.deleted',
          actorId: session.user.id,
          organizationId: tenantId,
          metadata: { roleId: id, name: role.name, slug: role.slug, reassignedMembers: count },
          requestId: c.get('requestId'),
        });
        return count;
      });
      return c.json({ id, deleted: true as const, reassignedMembers: reassigned }, 200);
    });
}
