import type { Kysely, Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';
import {
  addRolePermissions,
  findRole,
  permissionListOf,
  ROLE_COLUMNS,
  type RoleWithPermissions,
  setRolePermissions,
} from './roles.js';

/** Custom roles created, changed and deleted, each with its audit entry in the same transaction. */

interface Actor {
  actorId: string;
}

/** The role, locked until the transaction ends (a concurrent change or delete waits for this one). */
function lockRole(trx: Transaction<Database>, tenantId: string, id: string) {
  return trx
    .selectFrom('roles')
    .select(ROLE_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .forUpdate()
    .executeTakeFirst();
}

/** A second role with the slug (roles_tenant_id_slug_key) is the client's 409, not a 500. */
async function uniqueSlug<T>(slug: string | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if ((error as { code?: unknown })?.code === '23505' && slug)
      throw new ApiError('SLUG_CONFLICT', `A role with slug "${slug}" already exists in this organization`);
    throw error;
  }
}

/** A custom role with its permissions (validated by the caller), audited as `role.created`. */
export function createRole(
  db: Kysely<Database>,
  {
    tenantId,
    name,
    slug,
    description,
    permissions,
    actorId,
  }: Actor & { tenantId: string; name: string; slug: string; description: string; permissions: readonly string[] },
): Promise<RoleWithPermissions> {
  return uniqueSlug(slug, () =>
    withTenant(db, tenantId, async (trx) => {
      const row = await trx
        .insertInto('roles')
        .values({ tenant_id: tenantId, name, slug, description })
        .returning(ROLE_COLUMNS)
        .executeTakeFirstOrThrow();
      await addRolePermissions(trx, row.id, permissions);
      const created = { ...row, permissions: permissionListOf(permissions) };
      await recordAudit(trx, {
        action: 'role.created',
        actorId,
        organizationId: tenantId,
        metadata: { roleId: row.id, name, slug, permissions: created.permissions },
      });
      return created;
    }),
  );
}

/**
 * Changes a role, audited as `role.updated` with before and after. Default
 * roles keep their names, and the Owner its permissions (DEFAULT_ROLE).
 */
export function updateRole(
  db: Kysely<Database>,
  {
    tenantId,
    id,
    changes,
    actorId,
  }: Actor & {
    tenantId: string;
    id: string;
    changes: { name?: string; slug?: string; description?: string; permissions?: readonly string[] };
  },
): Promise<RoleWithPermissions> {
  return uniqueSlug(changes.slug, () =>
    withTenant(db, tenantId, async (trx) => {
      const current = await lockRole(trx, tenantId, id);
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
          ...(changes.name !== undefined ? { name: changes.name, slug: changes.slug } : {}),
          ...(changes.description !== undefined ? { description: changes.description } : {}),
          updated_at: new Date(),
        })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .execute();
      if (changes.permissions) await setRolePermissions(trx, id, changes.permissions);
      const after = (await findRole(trx, tenantId, id))!;
      const shown = (role: RoleWithPermissions) => ({
        name: role.name,
        slug: role.slug,
        description: role.description,
        permissions: role.permissions,
      });
      await recordAudit(trx, {
        action: 'role.updated',
        actorId,
        organizationId: tenantId,
        metadata: { roleId: id, before: shown(before), after: shown(after) },
      });
      return after;
    }),
  );
}

/**
 * Deletes a custom role; its members become Viewers in the same transaction
 * (docs/api.md "Permissions and roles"). Audited as `role.deleted`; returns how many moved.
 */
export function deleteRole(
  db: Kysely<Database>,
  { tenantId, id, actorId }: Actor & { tenantId: string; id: string },
): Promise<number> {
  return withTenant(db, tenantId, async (trx) => {
    const role = await lockRole(trx, tenantId, id);
    if (!role) throw new ApiError('NOT_FOUND', 'Role not found');
    if (role.is_default) throw new ApiError('DEFAULT_ROLE', 'Default roles cannot be deleted');
    const moved = await trx
      .updateTable('members')
      .set((eb) => ({
        role_id: eb
          .selectFrom('roles')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('slug', '=', 'viewer')
          .where('is_default', '=', true),
        role: 'member',
      }))
      .where('organization_id', '=', tenantId)
      .where('role_id', '=', id)
      .executeTakeFirst();
    await trx.deleteFrom('roles').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
    const count = Number(moved.numUpdatedRows);
    await recordAudit(trx, {
      action: 'role.deleted',
      actorId,
      organizationId: tenantId,
      metadata: { roleId: id, name: role.name, slug: role.slug, reassignedMembers: count },
    });
    return count;
  });
}
