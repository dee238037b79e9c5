import { sql, type Kysely } from 'kysely';
import { recordAudit } from '../../audit.js';
import { ApiError } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { DB } from '../database.js';
import { revokeOrganizationKeys, revokeUserKeys } from './api-keys.js';
import { runInTransaction } from '../ambient.js';

/** When an account scheduled at `deletedAt` is due for purge (ACCOUNT_DELETION_GRACE_DAYS). */
export function purgeAfter(deletedAt: Date | string, graceDays: number): Date {
  return new Date(new Date(deletedAt).getTime() + graceDays * 24 * 60 * 60 * 1000);
}

/**
 * Removes an account at once, in one transaction (API.md purge row): its API
 * keys are revoked with audit entries, organizations where it is the only
 * member go with it (their keys revoked too), its sessions, accounts,
 * memberships and invitations go with the user row, and an `account.purged`
 * entry remains that names nothing but the user id. Refused with
 * OWNERSHIP_CONSTRAINT while it is the only Owner of an organization that
 * has other members. A failure leaves the account as it was.
 */
export async function purgeAccount(
  db: Kysely<DB>,
  { userId, actorId, requestId, dueBy }: { userId: string; actorId: string | null; requestId?: string; dueBy?: Date },
): Promise<boolean> {
  return runInTransaction(db, async (trx) => {
    const user = await trx.selectFrom('users').select(['id', 'deleted_at']).where('id', '=', userId).forUpdate().executeTakeFirst();
    // `dueBy`: the scheduled job picked the account before taking this lock;
    // since then it may have been reactivated (or purged by its owner), and
    // then it is left alone (false).
    if (dueBy && (!user || !user.deleted_at || new Date(user.deleted_at) > dueBy)) return false;
    if (!user) throw new ApiError('NOT_FOUND', 'User not found');

    const memberships = await trx
      .selectFrom('members as m')
      .select([
        'm.organization_id',
        'm.role',
        sql<number>`(select count(*) from members o where o.organization_id = m.organization_id and o.role = 'owner')::int`.as('owners'),
        sql<number>`(select count(*) from members o where o.organization_id = m.organization_id)::int`.as('members'),
      ])
      .where('m.user_id', '=', userId)
      .execute();
    const blocked = memberships.filter((m) => m.role === 'owner' && m.owners <= 1 && m.members > 1);
    if (blocked.length > 0) {
      throw new ApiError('OWNERSHIP_CONSTRAINT', 'Transfer ownership of your organizations with other members before purging the account', {
        details: blocked.map((m) => ({ path: 'organizationId', message: m.organization_id })),
      });
    }

    await revokeUserKeys(trx, { userId, actorId, requestId, reason: 'account_purged' });
    for (const solo of memberships.filter((m) => m.members === 1)) {
      await revokeOrganizationKeys(trx, { tenantId: solo.organization_id, actorId, requestId, reason: 'account_purged' });
      await sql`select set_config('app.tenant_id', '', true)`.execute(trx);
      await trx.deleteFrom('organizations').where('id', '=', solo.organization_id).execute();
    }
    // Outstanding reset tokens (value: the user id) and magic links (value: JSON naming the email).
    const { email } = await trx.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow();
    await trx
      .deleteFrom('verifications')
      .where((eb) => eb.or([eb('value', '=', userId), eb(sql`position(${JSON.stringify(email)} in value)`, '>', 0)]))
      .execute();
    // Sessions, accounts, memberships and invitations sent go by cascade.
    await trx.deleteFrom('users').where('id', '=', userId).execute();
    await recordAudit(trx, { action: 'account.purged', actorId, organizationId: null, metadata: { userId }, requestId });
    return true;
  });
}

/**
 * The scheduled job (API.md cron row, Workers `scheduled`): purges every
 * account whose grace period has ended, each in its own transaction; one
 * failure is logged and counted, and the others go on.
 */
export async function purgeExpiredAccounts(db: Kysely<DB>, { now, graceDays, logger }: { now: Date; graceDays: number; logger: Logger }): Promise<{ purged: number; failed: number }> {
  const cutoff = new Date(now.getTime() - graceDays * 24 * 60 * 60 * 1000);
  const due = await db.selectFrom('users').select('id').where('deleted_at', 'is not', null).where('deleted_at', '<=', cutoff).orderBy('deleted_at').execute();
  let purged = 0;
  let failed = 0;
  let skipped = 0;
  for (const { id } of due) {
    try {
      if (await purgeAccount(db, { userId: id, actorId: null, dueBy: cutoff })) purged += 1;
      else skipped += 1;
    } catch (error) {
      failed += 1;
      logger.error('account.purge_failed', { userId: id, code: error instanceof ApiError ? error.code : 'INTERNAL_ERROR', message: (error as Error).message });
    }
  }
  logger.info('account.purge_run', { due: due.length, purged, failed, skipped });
  return { purged, failed };
}
