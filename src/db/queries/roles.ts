import { type Kysely, sql, type Transaction } from 'kysely';
import { ApiError } from '../../errors.js';
import { DEFAULT_ROLES, type DefaultRoleSlug } from '../../permissions.js';
import { recordAudit } from '../audit.js';
import type { DB, Role } from '../database.js';
import { withTenant } from '../tenant.js';

type Db = Kysely<DB> | Transaction<DB>;

export interface RoleWithPermissions extends Role {
  permissions: string[];
}

/** Spec §2 Role: slug from name, lower-case words joined by hyphens. */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

const permissionList = sql<string[]>`coalesce((
  select array_agg(p.resource || ':' || p.action order by p.resource || ':' || p.action)
  from role_permissions rp join permissions p on p.id = rp.permission_id
  where rp.role_id = roles.id
), '{}')`;

/**
 * API.md: Owner, Admin, Member, Viewer first, then custom roles by name. One
 * statement that names the tenant itself (migrations/0006 tenant_roles): no
 * surrounding transaction is needed, and inside one it names the same tenant.
 */
export async function listRoles(db: Db, tenantId: string): Promise<RoleWithPermissions[]> {
  const { rows } = await sql<RoleWithPermissions>`
    select id, tenant_id, name, slug, description, is_default, created_at, updated_at, permissions
    from tenant_roles(${tenantId}::uuid) with ordinality
    order by ordinality
  `.execute(db);
  return rows;
}

export async function findRole(db: Db, tenantId: string, id: string): Promise<RoleWithPermissions | undefined> {
  return db
    .selectFrom('roles')
    .selectAll()
    .select(permissionList.as('permissions'))
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findRoleBySlug(db: Db, tenantId: string, slug: string): Promise<RoleWithPermissions | undefined> {
  return db
    .selectFrom('roles')
    .selectAll()
    .select(permissionList.as('permissions'))
    .where('tenant_id', '=', tenantId)
    .where('slug', '=', slug)
    .executeTakeFirst();
}

export async function findDefaultRole(db: Db, tenantId: string, slug: DefaultRoleSlug): Promise<Role> {
  return db
    .selectFrom('roles')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('slug', '=', slug)
    .where('is_default', '=', true)
    .executeTakeFirstOrThrow();
}

/** Replaces a role's permission set. The strings must exist (callers validate first). */
export async function setRolePermissions(
  trx: Transaction<DB>,
  roleId: string,
  permissions: readonly string[],
): Promise<void> {
  await trx.deleteFrom('role_permissions').where('role_id', '=', roleId).execute();
  if (permissions.length === 0) return;
  await trx
    .insertInto('role_permissions')
    .columns(['role_id', 'permission_id'])
    .expression((eb) =>
      eb
        .selectFrom('permissions')
        .select([eb.val(roleId).as('role_id'), 'id'])
        .where(sql<string>`resource || ':' || action`, 'in', [...permissions]),
    )
    .execute();
}

/** The permission strings that exist (seeded by migration 0002). */
export async function knownPermissions(db: Db): Promise<Set<string>> {
  const rows = await db.selectFrom('permissions').select(sql<string>`resource || ':' || action`.as('name')).execute();
  return new Set(rows.map((row) => row.name));
}

/** Spec §6 ORGANIZATION_CREATED: the four default roles; returns their ids by slug. Needs the tenant set on `trx`. */
export async function seedDefaultRoles(
  trx: Transaction<DB>,
  tenantId: string,
): Promise<Record<DefaultRoleSlug, string>> {
  const ids = {} as Record<DefaultRoleSlug, string>;
  for (const role of DEFAULT_ROLES) {
    const { id } = await trx
      .insertInto('roles')
      .values({
        tenant_id: tenantId,
        name: role.name,
        slug: role.slug,
        description: role.description,
        is_default: true,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await setRolePermissions(trx, id, role.permissions);
    ids[role.slug] = id;
  }
  return ids;
}

/** The library's member role string, kept in step with our role so its own owner rules agree with ours. */
export function libraryRoleFor(slug: string): 'owner' | 'admin' | 'member' {
  return slug === 'owner' ? 'owner' : slug === 'admin' ? 'admin' : 'member';
}

interface Actor {
  actorId: string;
  requestId?: string;
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
  db: Kysely<DB>,
  {
    tenantId,
    name,
    slug,
    description,
    permissions,
    actorId,
    requestId,
  }: Actor & { tenantId: string; name: string; slug: string; description: string; permissions: readonly string[] },
): Promise<RoleWithPermissions> {
  return uniqueSlug(slug, () =>
    withTenant(db, tenantId, async (trx) => {
      const { id } = await trx
        .insertInto('roles')
        .values({ tenant_id: tenantId, name, slug, description })
        .returning('id')
        .executeTakeFirstOrThrow();
      await setRolePermissions(trx, id, permissions);
      const created = (await findRole(trx, tenantId, id))!;
      await recordAudit(trx, {
        action: 'role.created',
        actorId,
        organizationId: tenantId,
        metadata: { roleId: id, name, slug, permissions: created.permissions },
        requestId,
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
  db: Kysely<DB>,
  {
    tenantId,
    id,
    changes,
    actorId,
    requestId,
  }: Actor & {
    tenantId: string;
    id: string;
    changes: { name?: string; slug?: string; description?: string; permissions?: readonly string[] };
  },
): Promise<RoleWithPermissions> {
  return uniqueSlug(changes.slug, () =>
    withTenant(db, tenantId, async (trx) => {
      const current = await trx
        .selectFrom('roles')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .forUpdate()
        .executeTakeFirst();
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
        requestId,
      });
      return after;
    }),
  );
}

/**
 * Deletes a custom role; its members become Viewers in the same transaction
 * (spec §4 rule 2). Audited as `role.deleted`; returns how many moved.
 */
export function deleteRole(
  db: Kysely<DB>,
  { tenantId, id, actorId, requestId }: Actor & { tenantId: string; id: string },
): Promise<number> {
  return withTenant(db, tenantId, async (trx) => {
    const role = await trx
      .selectFrom('roles')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!role) throw new ApiError('NOT_FOUND', 'Role not found');
    if (role.is_default) throw new ApiError('DEFAULT_ROLE', 'Default roles cannot be deleted');
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
      actorId,
      organizationId: tenantId,
      metadata: { roleId: id, name: role.name, slug: role.slug, reassignedMembers: count },
      requestId,
    });
    return count;
  });
}
