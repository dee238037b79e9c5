import type { Kysely, Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import { assertGrantable } from '../../shared/permissions.js';
import type { EnrichedSession } from '../../shared/types.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';
import { findDefaultRole, findRole, libraryRoleFor } from './roles.js';

/**
 * Locks the organization's Owner memberships for the rest of the
 * transaction and returns their ids. Every change that can remove an Owner
 * takes this lock first, so two of them never both see "another Owner
 * remains" (docs/api.md "Members and ownership"; two Owners demoting each other at once).
 */
export async function lockOwners(trx: Transaction<Database>, tenantId: string): Promise<string[]> {
  const owner = await findDefaultRole(trx, tenantId, 'owner');
  const rows = await trx
    .selectFrom('members')
    .select('id')
    .where('organization_id', '=', tenantId)
    .where('role_id', '=', owner.id)
    .orderBy('id')
    .forUpdate()
    .execute();
  return rows.map((row) => row.id);
}

export interface RoleChange {
  memberId: string;
  roleId: string;
  previousRoleId: string | null;
}

/**
 * docs/api.md "Members and ownership": the target role must belong to the organization, at
 * least one Owner must remain, and the caller can neither grant nor take away
 * a role holding permissions the caller lacks (no escalation by assignment).
 * Needs the tenant set on `trx`.
 */
export async function changeMemberRole(
  trx: Transaction<Database>,
  {
    tenantId,
    memberId,
    roleId,
    actor,
    makesOrUnmakesOwner,
  }: {
    tenantId: string;
    memberId: string;
    roleId: string;
    actor: EnrichedSession;
    /** Called (and may throw, rolling back) before a change that makes or unmakes an Owner. */
    makesOrUnmakesOwner?: () => void;
  },
): Promise<RoleChange> {
  const owners = await lockOwners(trx, tenantId);
  const member = await trx
    .selectFrom('members')
    .select(['id', 'role_id'])
    .where('organization_id', '=', tenantId)
    .where('id', '=', memberId)
    .forUpdate()
    .executeTakeFirst();
  if (!member) throw new ApiError('NOT_FOUND', 'Member not found');
  // Key-share lock: a concurrent DELETE /api/roles/:id either waits for this
  // change (and then moves the member to Viewer) or wins, and the role is not
  // found here (404), instead of a foreign-key violation (500) at the update.
  const lockedTarget = await trx
    .selectFrom('roles')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', roleId)
    .forKeyShare()
    .executeTakeFirst();
  const target = lockedTarget && (await findRole(trx, tenantId, roleId));
  if (!target) throw new ApiError('NOT_FOUND', 'Role not found');
  const previous = member.role_id ? await findRole(trx, tenantId, member.role_id) : undefined;

  // Neither the role given nor the one taken away may hold what the caller lacks.
  assertGrantable({
    caller: actor,
    granted: actor.permissions,
    wanted: [...target.permissions, ...(previous?.permissions ?? [])],
    path: 'roleId',
  });
  const isOwner = owners.includes(member.id);
  if (member.role_id !== target.id && (isOwner || target.slug === 'owner')) makesOrUnmakesOwner?.();
  if (isOwner && target.slug !== 'owner' && owners.length <= 1) {
    throw new ApiError('OWNERSHIP_CONSTRAINT', 'The organization must keep at least one Owner');
  }
  if (member.role_id !== target.id) {
    await trx
      .updateTable('members')
      .set({ role_id: target.id, role: libraryRoleFor(target.slug) })
      .where('id', '=', member.id)
      .execute();
  }
  return { memberId: member.id, roleId: target.id, previousRoleId: member.role_id };
}

/** changeMemberRole in its own transaction, audited as `member.role_changed` when the role changed. */
export function setMemberRole(
  db: Kysely<Database>,
  { tenantId, memberId, roleId, actor, makesOrUnmakesOwner }: Parameters<typeof changeMemberRole>[1],
): Promise<RoleChange> {
  return withTenant(db, tenantId, async (trx) => {
    const result = await changeMemberRole(trx, { tenantId, memberId, roleId, actor, makesOrUnmakesOwner });
    if (result.previousRoleId !== result.roleId) {
      await recordAudit(trx, {
        action: 'member.role_changed',
        actorId: actor.user.id,
        organizationId: tenantId,
        metadata: { ...result },
      });
    }
    return result;
  });
}

/**
 * docs/api.md "Members and ownership": the transfer, an atomic swap: the calling Owner becomes an
 * Admin and the target Admin the Owner (NOT_OWNER, TARGET_NOT_ADMIN otherwise).
 */
export function transferOwnership(
  db: Kysely<Database>,
  { tenantId, userId, targetMemberId }: { tenantId: string; userId: string; targetMemberId: string },
) {
  return withTenant(db, tenantId, async (trx) => {
    const owners = await lockOwners(trx, tenantId);
    const caller = await membershipOf(trx, tenantId, userId);
    if (!caller || !owners.includes(caller.id))
      throw new ApiError('NOT_OWNER', 'Only the current Owner can transfer ownership');
    const admin = await findDefaultRole(trx, tenantId, 'admin');
    const owner = await findDefaultRole(trx, tenantId, 'owner');
    const target = await trx
      .selectFrom('members')
      .select(['id', 'role_id'])
      .where('organization_id', '=', tenantId)
      .where('id', '=', targetMemberId)
      .forUpdate()
      .executeTakeFirst();
    if (!target || target.role_id !== admin.id)
      throw new ApiError('TARGET_NOT_ADMIN', 'The new Owner must be an Admin of this organization');
    await trx
      .updateTable('members')
      .set({ role_id: admin.id, role: libraryRoleFor('admin') })
      .where('id', '=', caller.id)
      .execute();
    await trx
      .updateTable('members')
      .set({ role_id: owner.id, role: libraryRoleFor('owner') })
      .where('id', '=', target.id)
      .execute();
    await recordAudit(trx, {
      action: 'ownership.transferred',
      actorId: userId,
      organizationId: tenantId,
      metadata: { previousOwnerMemberId: caller.id, newOwnerMemberId: target.id },
    });
    return { transferred: true as const, previousOwnerMemberId: caller.id, newOwnerMemberId: target.id };
  });
}

export interface MemberRow {
  id: string;
  user_id: string;
  email: string;
  name: string;
  role_id: string | null;
  role_slug: string | null;
  created_at: Date;
}

/** The organization's members with their roles, oldest first. */
export function listMembers(db: Kysely<Database>, tenantId: string): Promise<MemberRow[]> {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('members as m')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .leftJoin('roles as r', (join) =>
        join.onRef('r.id', '=', 'm.role_id').onRef('r.tenant_id', '=', 'm.organization_id'),
      )
      .select(['m.id', 'm.user_id', 'u.email', 'u.name', 'm.role_id', 'r.slug as role_slug', 'm.created_at'])
      .where('m.organization_id', '=', tenantId)
      .orderBy('m.created_at')
      .orderBy('m.id')
      .execute(),
  );
}

/** The caller's own membership in the organization. */
export async function membershipOf(trx: Transaction<Database>, tenantId: string, userId: string) {
  return trx
    .selectFrom('members as m')
    .leftJoin('roles as r', (join) =>
      join.onRef('r.id', '=', 'm.role_id').onRef('r.tenant_id', '=', 'm.organization_id'),
    )
    .select(['m.id', 'm.role_id', 'r.slug as role_slug'])
    .where('m.organization_id', '=', tenantId)
    .where('m.user_id', '=', userId)
    .executeTakeFirst();
}

/**
 * Makes a user a member with `role`, audited `member.added` in the same
 * transaction (`via`: what added them, e.g. single sign-on or the directory).
 * The caller has checked that they are not one. Returns the member's id.
 */
export async function addMember(
  trx: Transaction<Database>,
  entry: {
    tenantId: string;
    userId: string;
    role: { id: string; slug: string };
    actorId: string | null;
    via: Record<string, unknown>;
  },
): Promise<string> {
  const { tenantId, userId, role } = entry;
  const { id } = await trx
    .insertInto('members')
    .values({ organization_id: tenantId, user_id: userId, role_id: role.id, role: libraryRoleFor(role.slug) })
    .returning('id')
    .executeTakeFirstOrThrow();
  await recordAudit(trx, {
    action: 'member.added',
    actorId: entry.actorId,
    organizationId: tenantId,
    metadata: { memberId: id, userId, roleId: role.id, roleSlug: role.slug, ...entry.via },
  });
  return id;
}

/** Whether an organization other than `tenantId` has the account as a member. */
export async function memberElsewhere(trx: Transaction<Database>, tenantId: string, userId: string): Promise<boolean> {
  const other = await trx
    .selectFrom('members')
    .select('id')
    .where('user_id', '=', userId)
    .where('organization_id', '!=', tenantId)
    .executeTakeFirst();
  return other !== undefined;
}
