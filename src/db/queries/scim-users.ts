import { sql, type Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { proveEmailOwnership } from './email-proof.js';
import { memberElsewhere, membershipOf } from './members.js';
import { addMembership, removeMembership, type ScimTokenActor } from './scim-membership.js';
import { baseQuery, type StoredScimUser } from './scim-user-reads.js';

/**
 * docs/scim.md "Users": the organization's SCIM Users (scim_users, the
 * account in users, the membership). Every function runs in the request's
 * one transaction with the tenant named (`withTenant`); each query names the
 * tenant too. A resource of another organization is not found.
 */

type Trx = Transaction<Database>;

/** A POST or PUT body as the route has read it: the address canonical, the name settled. */
export type ScimUserFields = Pick<StoredScimUser, 'email' | 'name' | 'externalId' | 'active'>;

/** Why a write is refused; the route answers each as SCIM's error. */
export class ScimUserConflict extends Error {
  constructor(readonly reason: 'uniqueness' | 'userNameChange' | 'preconditionFailed' | 'unprovisionable') {
    super(reason);
  }
}

/**
 * docs/scim.md "Users": what single sign-on refuses, a directory may not
 * take in (link, reactivate, rename) either: an account with a platform role
 * or scheduled for deletion.
 */
const provisionable = (user: { role: string; deleted_at: Date | null }) => user.role === 'user' && !user.deleted_at;

const notFound = () => new ApiError('NOT_FOUND', 'User not found');

/**
 * POST: the account with the address (created verified, with no password,
 * when there is none), its SCIM row and, when active, its membership. An
 * address that is already a member's, or already a User of the
 * organization, is `uniqueness`. Two at once: the loser of the unique keys
 * (users' email, the membership) fails with 23505, and the caller retries.
 */
export async function createScimUser(trx: Trx, writer: ScimTokenActor, fields: ScimUserFields): Promise<string> {
  const { tenantId } = writer;
  const existing = await trx
    .selectFrom('users')
    .select(['id', 'role', 'deleted_at', 'email_verified'])
    .where('email', '=', fields.email)
    .forUpdate()
    .executeTakeFirst();
  if (existing) {
    const resource = await baseQuery(trx, tenantId).select('su.user_id').where('su.user_id', '=', existing.id);
    if ((await membershipOf(trx, tenantId, existing.id)) || (await resource.executeTakeFirst()))
      throw new ScimUserConflict('uniqueness');
    if (!provisionable(existing)) throw new ScimUserConflict('unprovisionable');
    // An address nobody proved is vouched for by the directory, as the
    // accounts it creates are; whatever was attached to it before (a
    // squatter's password above all) goes, as when single sign-on proves it.
    if (!existing.email_verified) await proveEmailOwnership(trx, existing.id, { dropPassword: true });
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
  writer: ScimTokenActor,
  userId: string,
  changes: Partial<ScimUserFields>,
  allows: (version: number) => boolean = () => true,
): Promise<void> {
  const { tenantId, scimTokenId } = writer;
  const row = await trx
    .selectFrom('scim_users as su')
    .innerJoin('users as u', 'u.id', 'su.user_id')
    .select(['su.external_id', 'su.active', 'su.previous_role_id', 'su.version', 'u.email', 'u.name'])
    .select(['u.role', 'u.deleted_at', 'u.email_verified'])
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
  const own = provisionable(row) && !(await memberElsewhere(trx, tenantId, userId));
  if (changes.name !== undefined && changes.name !== row.name && own) {
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
    if (!provisionable(row)) throw new ScimUserConflict('unprovisionable');
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
  writer: ScimTokenActor,
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
