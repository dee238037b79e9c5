import { type Kysely, sql } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { runInTransaction } from '../ambient.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { setScope, setTenant } from '../tenant.js';
import { revokeKeys } from './api-keys.js';
import { secondFactorsOf } from './second-factors.js';

/** When an account scheduled at `deletedAt` is due for purge (ACCOUNT_DELETION_GRACE_DAYS). */
export function purgeAfter(deletedAt: Date | string, graceDays: number): Date {
  return new Date(new Date(deletedAt).getTime() + graceDays * 24 * 60 * 60 * 1000);
}

/**
 * Removes an account at once, in one transaction (docs/api.md "Accounts scheduled for deletion"): its API
 * keys are revoked with audit entries, organizations where it is the only
 * member go with it (their keys revoked too), the others each get a
 * `member.removed` entry (reason `account_purged`), its sessions, accounts,
 * memberships and invitations go with the user row, and an `account.purged`
 * entry remains that names nothing but the user id. Refused with
 * OWNERSHIP_CONSTRAINT while it is the only Owner of an organization that
 * has other members. A failure leaves the account as it was.
 */
export async function purgeAccount(
  db: Kysely<Database>,
  { userId, actorId, dueBy }: { userId: string; actorId: string | null; dueBy?: Date },
): Promise<boolean> {
  return runInTransaction(db, async (trx) => {
    const user = await trx
      .selectFrom('users')
      .select(['id', 'deleted_at'])
      .where('id', '=', userId)
      .forUpdate()
      .executeTakeFirst();
    // `dueBy`: the scheduled job picked the account before taking this lock;
    // since then it may have been reactivated (or purged by its owner), and
    // then it is left alone (false).
    if (dueBy && (!user?.deleted_at || new Date(user.deleted_at) > dueBy)) return false;
    if (!user) throw new ApiError('NOT_FOUND', 'User not found');

    const memberships = await trx
      .selectFrom('members as m')
      .select([
        'm.id',
        'm.organization_id',
        'm.role',
        sql<number>`(select count(*) from members o where o.organization_id = m.organization_id and o.role = 'owner')::int`.as(
          'owners',
        ),
        sql<number>`(select count(*) from members o where o.organization_id = m.organization_id)::int`.as('members'),
      ])
      .where('m.user_id', '=', userId)
      .execute();
    const blocked = memberships.filter((m) => m.role === 'owner' && m.owners <= 1 && m.members > 1);
    if (blocked.length > 0) {
      throw new ApiError(
        'OWNERSHIP_CONSTRAINT',
        'Transfer ownership of your organizations with other members before purging the account',
        {
          details: blocked.map((m) => ({ path: 'organizationId', message: m.organization_id })),
        },
      );
    }

    await revokeKeys(trx, { createdBy: userId, actorId, reason: 'account_purged' });
    for (const solo of memberships.filter((m) => m.members === 1)) {
      await revokeKeys(trx, { tenantId: solo.organization_id, actorId, reason: 'account_purged' });
      await setScope(trx, { tenantId: '' });
      await trx.deleteFrom('organizations').where('id', '=', solo.organization_id).execute();
    }
    // The organizations that stay lose a member: each hears of it as when a member leaves
    // (member.removed, a webhook event), in this transaction.
    for (const kept of memberships.filter((m) => m.members > 1)) {
      await setTenant(trx, kept.organization_id);
      await recordAudit(trx, {
        action: 'member.removed',
        actorId,
        organizationId: kept.organization_id,
        metadata: { userId, memberId: kept.id, reason: 'account_purged' },
      });
    }
    await setScope(trx, { tenantId: '' });
    // Outstanding reset tokens (value: the user id) and magic links (value: JSON naming the email).
    const { email } = await trx.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow();
    await trx
      .deleteFrom('verifications')
      .where((eb) => eb.or([eb('value', '=', userId), eb(sql`position(${JSON.stringify(email)} in value)`, '>', 0)]))
      .execute();
    // Sessions, accounts, memberships and invitations sent go by cascade.
    await trx.deleteFrom('users').where('id', '=', userId).execute();
    await recordAudit(trx, {
      action: 'account.purged',
      actorId,
      organizationId: null,
      metadata: { userId },
    });
    return true;
  });
}

/**
 * The scheduled job (docs/api.md "Accounts scheduled for deletion", Workers `scheduled`): purges every
 * account whose grace period has ended, each in its own transaction; one
 * failure is logged and counted, and the others go on.
 */
export async function purgeExpiredAccounts(
  db: Kysely<Database>,
  { now, graceDays, logger }: { now: Date; graceDays: number; logger: Logger },
): Promise<{ purged: number; failed: number }> {
  const cutoff = new Date(now.getTime() - graceDays * 24 * 60 * 60 * 1000);
  const due = await db
    .selectFrom('users')
    .select('id')
    .where('deleted_at', 'is not', null)
    .where('deleted_at', '<=', cutoff)
    .orderBy('deleted_at')
    .execute();
  let purged = 0;
  let failed = 0;
  let skipped = 0;
  for (const { id } of due) {
    try {
      if (await purgeAccount(db, { userId: id, actorId: null, dueBy: cutoff })) purged += 1;
      else skipped += 1;
    } catch (error) {
      failed += 1;
      logger.error('account.purge_failed', {
        userId: id,
        code: error instanceof ApiError ? error.code : 'INTERNAL_ERROR',
        message: (error as Error).message,
      });
    }
  }
  logger.info('account.purge_run', { due: due.length, purged, failed, skipped });
  return { purged, failed };
}

export function findProfile(db: Kysely<Database>, userId: string) {
  return db
    .selectFrom('users')
    .select(['id', 'email', 'name', 'role', 'email_verified', 'deleted_at'])
    .where('id', '=', userId)
    .executeTakeFirst();
}

/** Marks the account for deletion at `at` (docs/api.md "Accounts scheduled for deletion"), audited with its purge date. */
export async function scheduleDeletion(
  db: Kysely<Database>,
  { userId, at, purgeAfter }: { userId: string; at: Date; purgeAfter: Date },
): Promise<void> {
  await runInTransaction(db, async (trx) => {
    await trx.updateTable('users').set({ deleted_at: at, updated_at: at }).where('id', '=', userId).execute();
    await recordAudit(trx, {
      action: 'account.deletion_scheduled',
      actorId: userId,
      organizationId: null,
      metadata: { userId, purgeAfter: purgeAfter.toISOString() },
    });
  });
}

/** Cancels a scheduled deletion; audited only when there was one. */
export async function reactivate(db: Kysely<Database>, { userId, at }: { userId: string; at: Date }): Promise<void> {
  await runInTransaction(db, async (trx) => {
    const cleared = await trx
      .updateTable('users')
      .set({ deleted_at: null, updated_at: at })
      .where('id', '=', userId)
      .where('deleted_at', 'is not', null)
      .executeTakeFirst();
    if (cleared.numUpdatedRows > 0n) {
      await recordAudit(trx, {
        action: 'account.reactivated',
        actorId: userId,
        organizationId: null,
        metadata: { userId },
      });
    }
  });
}

/** The user's own memberships (with their roles), keys and audit entries, in one transaction (GET /api/users/me/export). */
export async function exportAccount(db: Kysely<Database>, userId: string) {
  return runInTransaction(db, async (trx) => {
    const memberships = await trx
      .selectFrom('members as m')
      .innerJoin('organizations as o', 'o.id', 'm.organization_id')
      .select(['m.id', 'm.organization_id', 'o.name', 'o.slug', 'm.role_id', 'm.created_at'])
      .where('m.user_id', '=', userId)
      .orderBy('m.created_at')
      .execute();
    const roles = new Map<string, { slug: string; name: string }>();
    for (const m of memberships) {
      if (!m.role_id) continue;
      await setTenant(trx, m.organization_id);
      const role = await trx
        .selectFrom('roles')
        .select(['slug', 'name'])
        .where('id', '=', m.role_id)
        .executeTakeFirst();
      if (role) roles.set(m.role_id, role);
    }
    // No tenant named: the key and audit policies admit the caller's own rows (migrations 0003, 0004).
    await setScope(trx, { tenantId: '', keyOwnerId: userId, actorId: userId });
    const keys = await trx
      .selectFrom('api_keys')
      .select(['id', 'tenant_id', 'name', 'scopes', 'expires_at', 'last_four', 'created_at', 'revoked_at'])
      .where('created_by', '=', userId)
      .orderBy('created_at')
      .execute();
    const audit = await trx
      .selectFrom('audit_logs')
      .select(['id', 'action', 'tenant_id', 'metadata', 'created_at'])
      .where('actor_id', '=', userId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return { memberships, roles, keys, audit, secondFactors: await secondFactorsOf(trx, userId) };
  });
}

/** The token of one of the user's own sessions (the library revokes by token; the service names sessions by id). */
export async function sessionToken(
  db: Kysely<Database>,
  { sessionId, userId }: { sessionId: string; userId: string },
): Promise<string | null> {
  const found = await db
    .selectFrom('sessions')
    .select('token')
    .where('id', '=', sessionId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return found?.token ?? null;
}
