import { type Expression, type SqlBool, sql, type Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { memberElsewhere, membershipOf } from './members.js';
import { addMembership, removeMembership, type ScimUserActor } from './scim-membership.js';

/**
 * docs/scim.md "Users": the organization's SCIM Users (scim_users, the
 * account in users, the membership). Every function runs in the request's
 * one transaction with the tenant named (`withTenant`); each query names the
 * tenant too. A resource of another organization is not found.
 */

type Trx = Transaction<Database>;

/** What the User resource is made of (src/scim/resources.ts ScimUserRecord). */
export interface StoredScimUser {
  id: string;
  email: string;
  name: string;
  externalId: string | null;
  active: boolean;
  created: Date;
  lastModified: Date;
  version: number;
  groups: { id: string; displayName: string }[];
}

/** The organization and the directory token that writes. */
export type ScimUserWriter = Omit<ScimUserActor, 'userId'>;

/** A POST or PUT body as the route has read it: the address canonical, the name settled. */
export type ScimUserFields = Pick<StoredScimUser, 'email' | 'name' | 'externalId' | 'active'>;

/** Why a write is refused; the route answers each as SCIM's error. */
export class ScimUserConflict extends Error {
  constructor(readonly reason: 'uniqueness' | 'userNameChange' | 'preconditionFailed') {
    super(reason);
  }
}

const notFound = () => new ApiError('NOT_FOUND', 'User not found');

function baseQuery(trx: Trx, tenantId: string) {
  return trx
    .selectFrom('scim_users as su')
    .innerJoin('users as u', 'u.id', 'su.user_id')
    .where('su.tenant_id', '=', tenantId);
}

const COLUMNS = [
  'su.user_id',
  'u.email',
  'u.name',
  'su.external_id',
  'su.active',
  'su.created_at',
  'su.updated_at',
  'su.version',
] as const;
type Row = Pick<StoredScimUser, 'email' | 'name' | 'active' | 'version'> & {
  user_id: string;
  external_id: string | null;
  created_at: Date;
  updated_at: Date;
};

async function withGroups(trx: Trx, tenantId: string, rows: Row[]): Promise<StoredScimUser[]> {
  const ids = rows.map((row) => row.user_id);
  const groups =
    ids.length === 0
      ? []
      : await trx
          .selectFrom('scim_group_members as gm')
          .innerJoin('scim_groups as g', (join) =>
            join.onRef('g.id', '=', 'gm.group_id').onRef('g.tenant_id', '=', 'gm.tenant_id'),
          )
          .select(['gm.user_id', 'g.id', 'g.display_name'])
          .where('gm.tenant_id', '=', tenantId)
          .where('gm.user_id', 'in', ids)
          .orderBy('g.display_name')
          .execute();
  return rows.map((row) => ({
    id: row.user_id,
    email: row.email,
    name: row.name,
    externalId: row.external_id,
    active: row.active,
    created: new Date(row.created_at),
    lastModified: new Date(row.updated_at),
    version: row.version,
    groups: groups.filter((g) => g.user_id === row.user_id).map((g) => ({ id: g.id, displayName: g.display_name })),
  }));
}

export async function getScimUser(trx: Trx, tenantId: string, userId: string): Promise<StoredScimUser | undefined> {
  const row = await baseQuery(trx, tenantId).select(COLUMNS).where('su.user_id', '=', userId).executeTakeFirst();
  return row ? (await withGroups(trx, tenantId, [row]))[0] : undefined;
}

/** One page of the list, oldest first, and how many match in all (`count` 0: the total only). */
export async function listScimUsers(
  trx: Trx,
  tenantId: string,
  { filter, offset, count }: { filter: Expression<SqlBool>; offset: number; count: number },
): Promise<{ total: number; users: StoredScimUser[] }> {
  const { total } = await baseQuery(trx, tenantId)
    .where(filter)
    .select((eb) => eb.fn.countAll<string>().as('total'))
    .executeTakeFirstOrThrow();
  const rows =
    count === 0
      ? []
      : await baseQuery(trx, tenantId)
          .where(filter)
          .select(COLUMNS)
          .orderBy('su.created_at')
          .orderBy('su.user_id')
          .offset(offset)
          .limit(count)
          .execute();
  return { total: Number(total), users: await withGroups(trx, tenantId, rows) };
}

/**
 * POST: the account with the address (created verified, with no password,
 * when there is none), its SCIM row and, when active, its membership. An
 * address that is already a member's, or already a User of the
 * organization, is `uniqueness`. Two at once: the loser of the unique keys
 * (users' email, the membership) fails with 23505, and the caller retries.
 */
export async function createScimUser(trx: Trx, writer: ScimUserWriter, fields: ScimUserFields): Promise<string> {
  const { tenantId } = writer;
  const existing = await trx
    .selectFrom('users')
    .select('id')
    .where('email', '=', fields.email)
    .forUpdate()
    .executeTakeFirst();
  if (existing) {
    const resource = await baseQuery(trx, tenantId).select('su.user_id').where('su.user_id', '=', existing.id);
    if ((await membershipOf(trx, tenantId, existing.id)) || (await resource.executeTakeFirst()))
      throw new ScimUserConflict('uniqueness');
  }
  const userId =
    existing?.id ??
    (
      await trx
        .insertInto('users')
        .values({ email: fields.email, name: fields.name, email_verified: true })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
  await trx
    .insertInto('scim_users')
    .values({ tenant_id: tenantId, user_id: userId, external_id: fields.externalId, active: fields.active })
    .execute();
  if (fields.active) await addMembership(trx, { ...writer, userId });
  return userId;
}

/**
 * PUT and PATCH: the fields given change, one new version when anything
 * did. `active` false removes the membership (its role kept for a return),
 * true brings it back. The address never changes (it is the account's, and
 * the account may be more than this organization's): a different one is
 * `userNameChange`. `allows(version)`: the If-Match check.
 */
export async function updateScimUser(
  trx: Trx,
  writer: ScimUserWriter,
  userId: string,
  changes: Partial<ScimUserFields>,
  allows: (version: number) => boolean = () => true,
): Promise<void> {
  const { tenantId, scimTokenId } = writer;
  const row = await trx
    .selectFrom('scim_users as su')
    .innerJoin('users as u', 'u.id', 'su.user_id')
    .select(['su.external_id', 'su.active', 'su.previous_role_id', 'su.version', 'u.email', 'u.name'])
    .where('su.tenant_id', '=', tenantId)
    .where('su.user_id', '=', userId)
    .forUpdate('su')
    .executeTakeFirst();
  if (!row) throw notFound();
  if (!allows(row.version)) throw new ScimUserConflict('preconditionFailed');
  if (changes.email !== undefined && changes.email !== row.email) throw new ScimUserConflict('userNameChange');
  const updated: string[] = [];
  // docs/scim.md "Users": the name is the account's, shared by every organization it is in; a
  // directory renames only an account no other organization holds (else the change is not made).
  if (changes.name !== undefined && changes.name !== row.name && !(await memberElsewhere(trx, tenantId, userId))) {
    await trx
      .updateTable('users')
      .set({ name: changes.name, updated_at: new Date() })
      .where('id', '=', userId)
      .execute();
    updated.push('name');
  }
  if (changes.externalId !== undefined && changes.externalId !== row.external_id) updated.push('externalId');
  let previousRoleId = row.previous_role_id;
  const member = await membershipOf(trx, tenantId, userId);
  if (changes.active === false && (row.active || member)) {
    const removed = await removeMembership(trx, { ...writer, userId, reason: 'scim_deactivated' });
    previousRoleId = removed?.roleId ?? previousRoleId;
  } else if (changes.active === true && !member) {
    await addMembership(trx, { ...writer, userId, roleId: row.previous_role_id });
    previousRoleId = null;
  }
  const activeChanged = changes.active !== undefined && changes.active !== row.active;
  if (updated.length === 0 && !activeChanged && previousRoleId === row.previous_role_id) return;
  await trx
    .updateTable('scim_users')
    .set({
      ...(changes.externalId !== undefined ? { external_id: changes.externalId } : {}),
      ...(changes.active !== undefined ? { active: changes.active } : {}),
      previous_role_id: previousRoleId,
      version: sql`version + 1`,
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId)
    .execute();
  if (updated.length > 0)
    await recordAudit(trx, {
      action: 'scim.user_updated',
      actorId: null,
      organizationId: tenantId,
      metadata: { userId, changed: updated, scimTokenId, via: 'scim' },
    });
}

/** DELETE: the membership removed as by `active: false`, then the resource (and its group memberships). */
export async function deleteScimUser(
  trx: Trx,
  writer: ScimUserWriter,
  userId: string,
  allows: (version: number) => boolean = () => true,
): Promise<void> {
  const { tenantId } = writer;
  const row = await baseQuery(trx, tenantId)
    .select('su.version')
    .where('su.user_id', '=', userId)
    .forUpdate('su')
    .executeTakeFirst();
  if (!row) throw notFound();
  if (!allows(row.version)) throw new ScimUserConflict('preconditionFailed');
  await removeMembership(trx, { ...writer, userId, reason: 'scim_deleted' });
  await trx.deleteFrom('scim_users').where('tenant_id', '=', tenantId).where('user_id', '=', userId).execute();
}
