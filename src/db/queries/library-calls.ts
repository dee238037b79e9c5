import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../database.js';

type Db = Kysely<Database> | Transaction<Database>;

/** The id of the organization with this slug, if any (a library call may name its organization by slug). */
export async function organizationIdBySlug(db: Db, slug: string): Promise<string | null> {
  const row = await db.selectFrom('organizations').select('id').where('slug', '=', slug).executeTakeFirst();
  return row?.id ?? null;
}

/** The organization an invitation belongs to, if the invitation exists. */
export async function invitationOrganization(db: Db, invitationId: string): Promise<string | null> {
  const row = await db
    .selectFrom('invitations')
    .select('organization_id')
    .where('id', '=', invitationId)
    .executeTakeFirst();
  return row?.organization_id ?? null;
}

/** The members of an organization with their stored role id and library role name. */
export function storedMemberRoles(db: Db, organizationId: string) {
  return db
    .selectFrom('members')
    .select(['id', 'role_id', 'role'])
    .where('organization_id', '=', organizationId)
    .execute();
}

/** The role slug an invitation grants (the library is told `member`). */
export async function setInvitationRole(db: Db, invitationId: string, slug: string): Promise<void> {
  await db.updateTable('invitations').set({ role: slug }).where('id', '=', invitationId).execute();
}

/** A member's role id and the library's role name for it. */
export async function setMemberRoleColumns(
  db: Db,
  memberId: string,
  role: { id: string; library: 'owner' | 'admin' | 'member' },
): Promise<void> {
  await db.updateTable('members').set({ role_id: role.id, role: role.library }).where('id', '=', memberId).execute();
}

/** The user's passkey, locked for the call that is about to delete it; undefined when it is not theirs. */
export function lockUserPasskey(trx: Transaction<Database>, userId: string, passkeyId: string) {
  return trx
    .selectFrom('passkeys')
    .select(['id', 'name', 'device_type'])
    .where('id', '=', passkeyId)
    .where('user_id', '=', userId)
    .forUpdate()
    .executeTakeFirst();
}

/** Marks the user's session issued with `token` multi-factor (and, given, fresh as of `stepUpAt`). */
export async function markIssuedSession(
  db: Db,
  { token, userId, stepUpAt }: { token: string; userId: string; stepUpAt?: Date },
): Promise<void> {
  await db
    .updateTable('sessions')
    .set(stepUpAt ? { mfa: true, step_up_at: stepUpAt } : { mfa: true })
    .where('token', '=', token)
    .where('user_id', '=', userId)
    .execute();
}
