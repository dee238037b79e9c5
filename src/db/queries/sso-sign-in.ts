import type { Transaction } from 'kysely';
import type { Database, SsoRoleMapping } from '../database.js';
import { moveMember } from './member-moves.js';
import { addMember, lockOwners, membershipOf } from './members.js';
import { findDefaultRole, findRole } from './roles.js';

/** What a single sign-on writes, in the callback's one transaction (docs/sso.md "Sign-in"). */

type Trx = Transaction<Database>;

/** The account an address names, with what decides whether single sign-on may sign it in. */
export function userByEmail(trx: Trx, email: string) {
  return trx
    .selectFrom('users')
    .select(['id', 'email', 'email_verified', 'role', 'deleted_at', 'two_factor_enabled'])
    .where('email', '=', email)
    .forUpdate()
    .executeTakeFirst();
}

/** The user an identity of the connection (`sso:<id>`, the subject or NameID) is linked to, if any. */
export async function linkedUserId(trx: Trx, providerId: string, accountId: string): Promise<string | null> {
  const row = await trx
    .selectFrom('accounts')
    .select('user_id')
    .where('provider_id', '=', providerId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.user_id ?? null;
}

/**
 * Records an accepted SAML assertion until it expires; false when the
 * connection has accepted it before (a replay). Needs the tenant set. Two
 * posts of one assertion at once: the second waits for the first's commit,
 * then inserts nothing.
 */
export async function claimAssertion(
  trx: Trx,
  entry: { tenantId: string; connectionId: string; assertionId: string; expiresAt: Date },
): Promise<boolean> {
  const inserted = await trx
    .insertInto('sso_saml_replays')
    .values({
      tenant_id: entry.tenantId,
      connection_id: entry.connectionId,
      assertion_id: entry.assertionId,
      expires_at: entry.expiresAt,
    })
    .onConflict((conflict) => conflict.columns(['connection_id', 'assertion_id']).doNothing())
    .returning('assertion_id')
    .executeTakeFirst();
  return inserted !== undefined;
}

/** Whether a claim (OIDC claim or SAML attribute) holds the value: equal, or an array containing it. */
export function claimMatches(claim: unknown, value: string): boolean {
  if (Array.isArray(claim)) return claim.some((item) => String(item) === value);
  if (typeof claim === 'string' || typeof claim === 'number' || typeof claim === 'boolean')
    return String(claim) === value;
  return false;
}

/** The first mapping, in list order, whose claim holds its value. */
export function mappedRoleId(mappings: readonly SsoRoleMapping[], claims: Record<string, unknown>): string | null {
  return mappings.find((mapping) => claimMatches(claims[mapping.claim], mapping.value))?.roleId ?? null;
}

export interface SsoMembershipInput {
  tenantId: string;
  userId: string;
  connection: { id: string; default_role_id: string | null; role_mappings: SsoRoleMapping[] };
  claims: Record<string, unknown>;
}

/** The role a sign-in gives: the first matching mapping, else the connection's default, else Member (roles that exist). */
async function roleFor(trx: Trx, { tenantId, connection, claims }: SsoMembershipInput) {
  for (const id of [mappedRoleId(connection.role_mappings, claims), connection.default_role_id]) {
    const role = id ? await findRole(trx, tenantId, id) : undefined;
    if (role) return role;
  }
  return findDefaultRole(trx, tenantId, 'member');
}

/**
 * A non-member joins with the role the sign-in gives (`member.added`, via
 * sso); a member's role follows the connection's mappings at each sign-in
 * when it has any (`member.role_changed`, via sso), except that the last
 * Owner stays Owner. Needs the tenant set. Returns the member's id.
 */
export async function joinOrFollowRole(trx: Trx, input: SsoMembershipInput): Promise<string> {
  const { tenantId, userId, connection } = input;
  const via = { via: 'sso', connectionId: connection.id };
  const member = await membershipOf(trx, tenantId, userId);
  if (!member) {
    return addMember(trx, { tenantId, userId, role: await roleFor(trx, input), actorId: userId, via });
  }
  if (connection.role_mappings.length === 0) return member.id;
  const owners = await lockOwners(trx, tenantId);
  const role = await roleFor(trx, input);
  if (role.id === member.role_id) return member.id;
  // docs/api.md "Members and ownership": an organization keeps an Owner.
  if (owners.includes(member.id) && owners.length <= 1) return member.id;
  await moveMember(trx, { tenantId, member, role, actorId: userId, via });
  return member.id;
}
