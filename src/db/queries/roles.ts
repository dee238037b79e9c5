import { type Kysely, sql, type Transaction } from 'kysely';
import { DEFAULT_ROLES, type DefaultRoleSlug } from '../../shared/permissions.js';
import type { Database, Role, RolesTable } from '../database.js';

type Db = Kysely<Database> | Transaction<Database>;

export interface RoleWithPermissions extends Role {
  permissions: string[];
}

/** docs/api.md "Permissions and roles": slug from name, lower-case words joined by hyphens. */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * Every column of `roles`, named: a statement in a transaction is prepared
 * only when its text has no `*` (src/db/client.ts `preparing`), and these are
 * the hot write path's. A column added to RolesTable and not here fails the
 * type check where a Role is returned.
 */
export const ROLE_COLUMNS = [
  'id',
  'tenant_id',
  'name',
  'slug',
  'description',
  'is_default',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof RolesTable)[];

const permissionList = sql<string[]>`coalesce((
  select array_agg(p.resource || ':' || p.action order by p.resource || ':' || p.action)
  from role_permissions rp join permissions p on p.id = rp.permission_id
  where rp.role_id = roles.id
), '{}')`;

/**
 * docs/api.md "Permissions and roles": Owner, Admin, Member, Viewer first, then custom roles by name. One
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
    .select(ROLE_COLUMNS)
    .select(permissionList.as('permissions'))
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findRoleBySlug(db: Db, tenantId: string, slug: string): Promise<RoleWithPermissions | undefined> {
  return db
    .selectFrom('roles')
    .select(ROLE_COLUMNS)
    .select(permissionList.as('permissions'))
    .where('tenant_id', '=', tenantId)
    .where('slug', '=', slug)
    .executeTakeFirst();
}

export async function findDefaultRole(db: Db, tenantId: string, slug: DefaultRoleSlug): Promise<Role> {
  return db
    .selectFrom('roles')
    .select(ROLE_COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('slug', '=', slug)
    .where('is_default', '=', true)
    .executeTakeFirstOrThrow();
}

/** Gives a role that has none yet these permissions. The strings must exist (callers validate first). */
export async function addRolePermissions(
  trx: Transaction<Database>,
  roleId: string,
  permissions: readonly string[],
): Promise<void> {
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

/** Replaces a role's permission set. The strings must exist (callers validate first). */
export async function setRolePermissions(
  trx: Transaction<Database>,
  roleId: string,
  permissions: readonly string[],
): Promise<void> {
  await trx.deleteFrom('role_permissions').where('role_id', '=', roleId).execute();
  await addRolePermissions(trx, roleId, permissions);
}

/**
 * A role's permission list as the database lists it (`permissionList`):
 * each once, in order. The catalog's strings differ at a letter before any
 * punctuation, so every collation orders them as JavaScript does.
 */
export function permissionListOf(permissions: readonly string[]): string[] {
  return [...new Set(permissions)].sort();
}

/** docs/api.md "Organizations": the four default roles of a new organization; returns their ids by slug. Needs the tenant set on `trx`. */
export async function seedDefaultRoles(
  trx: Transaction<Database>,
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
    await addRolePermissions(trx, id, role.permissions);
    ids[role.slug] = id;
  }
  return ids;
}

/** The library's member role string, kept in step with our role so its own owner rules agree with ours. */
export function libraryRoleFor(slug: string): 'owner' | 'admin' | 'member' {
  return slug === 'owner' ? 'owner' : slug === 'admin' ? 'admin' : 'member';
}
