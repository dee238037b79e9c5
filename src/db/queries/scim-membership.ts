import type { Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import type { ScimCaller } from '../../shared/types.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { revokeKeys } from './api-keys.js';
import { moveMember } from './member-moves.js';
import { addMember, lockOwners, membershipOf } from './members.js';
import { findDefaultRole, findRole } from './roles.js';
import { groupRoles, mapsGroups } from './scim-group-ranks.js';

/**
 * What a directory's SCIM requests do to memberships (docs/scim.md "Roles"),
 * in the request's one transaction with the tenant set. Every change is
 * audited with no actor and the token that made it (`scimTokenId`, via scim).
 * The last Owner is never removed nor demoted: OWNERSHIP_CONSTRAINT, a 409.
 * A token gives or takes away the Owner role only while its creator is an
 * Owner (docs/scim.md "Tokens"): FORBIDDEN, a 403. Every path goes through
 * these three functions, so every SCIM change meets both rules.
 */

type Trx = Transaction<Database>;

/** A directory's token acting, and the person who created it (`scim_tokens.created_by`, from the token's row). */
export interface ScimTokenActor {
  tenantId: string;
  scimTokenId: string;
  tokenCreatorId: string;
}

/** The actor a SCIM request's caller (as the door resolved it) is. */
export function tokenActor({ tenantId, tokenId, createdBy }: ScimCaller): ScimTokenActor {
  return { tenantId, scimTokenId: tokenId, tokenCreatorId: createdBy };
}

/**
 * Who changes a member: a directory's token, or a person whose mapping
 * change recomputes roles (PUT /api/scim/group-roles, which checked the
 * roles they map) and who is then the audited actor; `actorIsOwner`: they
 * may give or take away the Owner role (an Owner, as the route found them).
 */
type Acting = { tenantId: string } & (
  | { scimTokenId: string; tokenCreatorId: string; actorId?: undefined; actorIsOwner?: undefined }
  | { scimTokenId: null; actorId: string; actorIsOwner: boolean; tokenCreatorId?: undefined }
);

export type ScimUserActor = Acting & { userId: string };

export type SyncOptions = Acting & {
  userIds: readonly string[];
  /** The mapping of one of the users' groups changed: recompute even if no group is mapped now. */
  mappingChanged?: boolean;
};

/** What an audit entry says of how a change came: the token, via scim (nothing for a person's change). */
export const via = (scimTokenId: string | null) => (scimTokenId ? { scimTokenId, via: 'scim' } : {});

function lastOwner(): ApiError {
  return new ApiError('OWNERSHIP_CONSTRAINT', 'The organization must keep at least one Owner');
}

/**
 * docs/scim.md "Tokens": only an Owner gives or takes away the Owner role,
 * and a token grants at most what its creator could, as an API key does.
 * Called only for a change that does either, so other requests pay nothing:
 * the creator's membership is read now, in this transaction, against
 * `owners` (lockOwners: the Owners' rows, locked), so a creator who left or
 * was demoted no longer counts, and their demotion cannot pass this check
 * unseen. A person's mapping change may not demote an Owner either
 * (docs/scim.md "Roles"): an Admin's mapping of a group an Owner is in.
 */
async function mayMoveOwnerRole(trx: Trx, actor: Acting, owners: string[]): Promise<void> {
  if (actor.scimTokenId === null) {
    if (actor.actorIsOwner) return;
    throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', {
      details: [{ path: '', message: 'only an Owner gives or takes away the Owner role' }],
    });
  }
  const creator = await membershipOf(trx, actor.tenantId, actor.tokenCreatorId);
  if (creator && owners.includes(creator.id)) return;
  throw new ApiError(
    'FORBIDDEN',
    'This token cannot give or take away the Owner role: the person who created it is not an Owner',
  );
}

/**
 * THE role function (docs/scim.md "Roles"): the highest role mapped to the
 * user's groups (Owner > Admin > Member > Viewer; between custom roles, more
 * permissions), else Member; `null` when the organization maps no group (its
 * roles are then set by hand, and groups change none).
 */
export async function roleFromGroups(trx: Trx, tenantId: string, userId: string): Promise<string | null> {
  if (!(await mapsGroups(trx, tenantId))) return null;
  const mapped = (await groupRoles(trx, tenantId, [userId])).get(userId);
  return mapped?.id ?? (await findDefaultRole(trx, tenantId, 'member')).id;
}

/**
 * Sets each member's role to what their groups give (`roleFromGroups`),
 * audited as `member.role_changed`, in a few statements for any number of
 * them: users who are not members (deactivated) are passed over, and
 * nothing changes where no group is mapped unless `mappingChanged` (a role
 * a mapping handed out is taken back when the mapping goes, even the last).
 * Refuses to demote the last Owner, and to make or unmake an Owner with a
 * token whose creator is not one (counted as the changes go, in user order).
 */
export async function syncMemberRoles(trx: Trx, options: SyncOptions): Promise<void> {
  const { tenantId, scimTokenId, actorId = null, mappingChanged = false } = options;
  const userIds = [...new Set(options.userIds)].sort();
  if (userIds.length === 0) return;
  const owners = await lockOwners(trx, tenantId);
  if (!mappingChanged && !(await mapsGroups(trx, tenantId))) return;
  const members = await trx
    .selectFrom('members')
    .select(['id', 'user_id', 'role_id'])
    .where('organization_id', '=', tenantId)
    // One array parameter: a mapping change reaches more users than a statement may carry parameters (65,535).
    .where('user_id', '=', (eb) => eb.fn.any(eb.val(userIds)))
    .execute();
  if (members.length === 0) return;
  const mapped = await groupRoles(
    trx,
    tenantId,
    members.map((member) => member.user_id),
  );
  const fallback = mapped.size < members.length ? await findDefaultRole(trx, tenantId, 'member') : undefined;
  for (const member of members.sort((a, b) => (a.user_id < b.user_id ? -1 : 1))) {
    const role = mapped.get(member.user_id) ?? fallback!;
    if (role.id === member.role_id) continue;
    const wasOwner = owners.includes(member.id);
    if (wasOwner && role.slug !== 'owner' && owners.length <= 1) throw lastOwner();
    if (wasOwner || role.slug === 'owner') await mayMoveOwnerRole(trx, options, owners);
    await moveMember(trx, { tenantId, member, role, actorId, via: via(scimTokenId) });
    // The next changes count the Owners as they now are.
    if (wasOwner) owners.splice(owners.indexOf(member.id), 1);
    else if (role.slug === 'owner') owners.push(member.id);
  }
}

/**
 * Makes the user a member (`member.added`) with what their groups give
 * where groups are mapped, else `roleId` (the role held before a
 * deactivation) when it still exists, else Member; Owner only through a
 * token whose creator is one. The caller has checked that they are not
 * one. Returns the member's id.
 */
export async function addMembership(trx: Trx, actor: ScimUserActor & { roleId?: string | null }): Promise<string> {
  const { tenantId, userId, scimTokenId } = actor;
  const previous = actor.roleId ? await findRole(trx, tenantId, actor.roleId) : undefined;
  const groups = await roleFromGroups(trx, tenantId, userId);
  const mapped = groups ? await findRole(trx, tenantId, groups) : undefined;
  const role = mapped ?? previous ?? (await findDefaultRole(trx, tenantId, 'member'));
  if (role.slug === 'owner') await mayMoveOwnerRole(trx, actor, await lockOwners(trx, tenantId));
  return addMember(trx, { tenantId, userId, role, actorId: null, via: via(scimTokenId) });
}

/**
 * Removes the membership as POST /api/auth/organization/remove-member does
 * (docs/api.md "Members and ownership"): the row goes (every session of the
 * user loses the organization at its next request: session_state finds no
 * membership), `member.removed` is audited and sent, and the API keys the
 * user created there are revoked. Refused for the last Owner, and for any
 * Owner through a token whose creator is not one. Returns the
 * role the member held (null: was not a member).
 */
export async function removeMembership(
  trx: Trx,
  actor: ScimUserActor & { reason: 'scim_deactivated' | 'scim_deleted' },
): Promise<{ roleId: string | null } | null> {
  const { tenantId, userId, scimTokenId, reason } = actor;
  const owners = await lockOwners(trx, tenantId);
  const member = await membershipOf(trx, tenantId, userId);
  if (!member) return null;
  if (owners.includes(member.id) && owners.length <= 1) throw lastOwner();
  if (owners.includes(member.id)) await mayMoveOwnerRole(trx, actor, owners);
  await trx.deleteFrom('members').where('id', '=', member.id).execute();
  await recordAudit(trx, {
    action: 'member.removed',
    actorId: null,
    organizationId: tenantId,
    metadata: { userId, memberId: member.id, reason, ...via(scimTokenId) },
  });
  await revokeKeys(trx, { tenantId, createdBy: userId, actorId: null, reason: 'member_removed' });
  return { roleId: member.role_id };
}
