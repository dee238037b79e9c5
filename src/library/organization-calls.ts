import type { Transaction } from 'kysely';
import { assertGrantable } from '../auth/access.js';
import { recordAudit } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { revokeKeys } from '../db/queries/api-keys.js';
import { setInvitationRole, setMemberRoleColumns, storedMemberRoles } from '../db/queries/library-calls.js';
import { lockOwners } from '../db/queries/members.js';
import { findRoleBySlug, libraryRoleFor } from '../db/queries/roles.js';
import { setTenant, withTenant } from '../db/tenant.js';
import { ApiError } from '../shared/errors.js';
import { spendInvitationBudget } from './request.js';
import type { AfterHook, BeforeHook, InputRewrite, JsonObject } from './row.js';

/**
 * invite-member's input: invitations send mail, so the inviter's and the
 * organization's budgets are spent first; the invitation names a role slug
 * of the organization (default member), never Owner, and none with
 * permissions the inviter lacks. The library is told `member` (its own role
 * names); `storeInvitedRole` writes the slug after.
 */
export const checkInvitation: InputRewrite = async (call, { db, store, clock }) => {
  const organizationId = call.organizationId!;
  await spendInvitationBudget(store, clock, call.session!.user.id, organizationId);
  const body = call.body ?? {};
  const slug = typeof body.role === 'string' ? body.role : 'member';
  if (slug === 'owner')
    throw new ApiError('VALIDATION_ERROR', 'An invitation cannot grant the Owner role', {
      details: [{ path: 'role', message: 'must not be owner' }],
    });
  const role = await withTenant(db, organizationId, (trx) => findRoleBySlug(trx, organizationId, slug));
  if (!role)
    throw new ApiError('VALIDATION_ERROR', 'Unknown role', {
      details: [{ path: 'role', message: `no role "${slug}" in this organization` }],
    });
  assertGrantable({
    caller: call.session ?? undefined,
    granted: call.target!.permissions,
    wanted: role.permissions,
    path: 'role',
    who: 'inviter',
  });
  call.notes.invitedRoleSlug = role.slug;
  return { ...body, role: 'member' };
};

/** Last-Owner checks that follow (the library's) see settled Owner rows. */
export const lockOrganizationOwners: BeforeHook = async (trx, { organizationId }) => {
  if (!organizationId) return;
  await setTenant(trx, organizationId);
  await lockOwners(trx, organizationId);
};

/** Deleting an organization revokes its API keys (rolled back if the library refuses). */
export const revokeOrganizationKeys: BeforeHook = async (trx, call) => {
  if (!call.organizationId) return;
  await revokeKeys(trx, {
    tenantId: call.organizationId,
    actorId: call.session?.user.id ?? null,
    reason: 'organization_deleted',
  });
};

/** The creator's membership got its role id as the organization was created: answer what is stored. */
export const answerStoredRoles: AfterHook = async (trx, _call, { body }) => {
  const record = (body ?? {}) as JsonObject;
  if (typeof record.id !== 'string') return body;
  const stored = await storedMemberRoles(trx, record.id);
  const members = Array.isArray(record.members) ? (record.members as JsonObject[]) : [];
  return {
    ...record,
    members: members.map((m) => {
      const row = stored.find((s) => s.id === m.id);
      return { ...m, ...(row ? { roleId: row.role_id, role: row.role } : {}) };
    }),
  };
};

/** The invitation keeps the role slug `checkInvitation` checked. */
export const storeInvitedRole: AfterHook = async (trx, call, { body }) => {
  const record = (body ?? {}) as JsonObject;
  const slug = call.notes.invitedRoleSlug;
  if (!slug || typeof record.id !== 'string') return body;
  await setInvitationRole(trx, record.id, slug);
  return { ...record, role: slug };
};

/** The library ignores what beforeAcceptInvitation returns: the new member's role is set after. */
export const setAcceptedRole: AfterHook = async (trx, call, { body }) => {
  const record = (body ?? {}) as JsonObject;
  const invitation = record.invitation as { id?: unknown; role?: string | null; organizationId: string } | undefined;
  const member = record.member as JsonObject | undefined;
  if (!invitation || !member || typeof member.id !== 'string') return body;
  await setTenant(trx, invitation.organizationId);
  const named =
    invitation.role && invitation.role !== 'owner'
      ? await findRoleBySlug(trx, invitation.organizationId, invitation.role)
      : undefined;
  const role = named ?? (await findRoleBySlug(trx, invitation.organizationId, 'member'));
  if (!role) throw new Error('accept-invitation: the organization has no member role');
  await setMemberRoleColumns(trx, member.id, { id: role.id, library: libraryRoleFor(role.slug) });
  await recordAudit(trx, {
    action: 'member.added',
    actorId: call.session?.user.id ?? null,
    organizationId: invitation.organizationId,
    metadata: {
      memberId: member.id,
      userId: typeof member.userId === 'string' ? member.userId : null,
      roleId: role.id,
      roleSlug: role.slug,
      invitationId: typeof invitation.id === 'string' ? invitation.id : null,
    },
  });
  return {
    ...record,
    invitation: { ...invitation, role: role.slug },
    member: { ...member, roleId: role.id, role: libraryRoleFor(role.slug) },
  };
};

/** A member removed by another: audited, and their keys of the organization revoked. */
export const recordMemberRemoved: AfterHook = async (trx, call, { body }) => {
  const member = ((body ?? {}) as JsonObject).member as JsonObject | undefined;
  const userId = member?.userId;
  if (typeof userId === 'string') await endMembership(trx, call, { userId, memberId: member?.id, reason: 'removed' });
  return body;
};

/** A member who left: audited, and their keys of the organization revoked. */
export const recordMemberLeft: AfterHook = async (trx, call, { body }) => {
  const userId = call.session?.user.id;
  if (userId) await endMembership(trx, call, { userId, reason: 'left' });
  return body;
};

/** A member who leaves or is removed keeps no key of that organization; rejoining revives none. */
async function endMembership(
  trx: Transaction<Database>,
  call: Parameters<AfterHook>[1],
  { userId, memberId, reason }: { userId: string; memberId?: unknown; reason: 'left' | 'removed' },
): Promise<void> {
  if (!call.organizationId) return;
  await recordAudit(trx, {
    action: 'member.removed',
    actorId: call.session?.user.id ?? null,
    organizationId: call.organizationId,
    metadata: { userId, ...(typeof memberId === 'string' ? { memberId } : {}), reason },
  });
  await revokeKeys(trx, {
    tenantId: call.organizationId,
    createdBy: userId,
    actorId: call.session?.user.id ?? null,
    reason: 'member_removed',
  });
}
