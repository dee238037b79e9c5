import type { Kysely } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import type { PlatformRole } from '../../shared/permissions.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { paginate } from '../pagination.js';

/** GET /api/admin/users: a page of every user, newest first. */
export function listUsers(db: Kysely<Database>, page: { limit: number; cursor?: string }) {
  return paginate(
    db.selectFrom('users').select(['id', 'email', 'role', 'email_verified', 'deleted_at', 'created_at']),
    page,
  );
}

/**
 * PATCH /api/admin/users/:id/role: sets a user's platform role, audited as
 * `user.role_changed`; a change to the role held is a no-op. Refuses to
 * demote the last superadmin (OWNERSHIP_CONSTRAINT).
 */
export async function changePlatformRole(
  db: Kysely<Database>,
  { userId, role, actorId }: { userId: string; role: PlatformRole; actorId: string },
): Promise<{ id: string; role: PlatformRole }> {
  return db.transaction().execute(async (trx) => {
    // Every superadmin row first, in one order, then the target's: two
    // superadmins demoting each other at once queue on the same locks,
    // and the second re-reads the rows the first changed (so it counts
    // one superadmin, not two). Concurrent changes are audited in the
    // order they apply.
    const superadmins = await trx
      .selectFrom('users')
      .select('id')
      .where('role', '=', 'superadmin')
      .orderBy('id')
      .forUpdate()
      .execute();
    const current = await trx
      .selectFrom('users')
      .select(['id', 'role'])
      .where('id', '=', userId)
      .forUpdate()
      .executeTakeFirst();
    if (!current) throw new ApiError('NOT_FOUND', 'User not found');
    if (current.role === role) return current;
    // Like the last Owner of an organization (409 OWNERSHIP_CONSTRAINT, docs/api.md "Errors"):
    // only the command line can make a superadmin, so none must be left without one.
    if (current.role === 'superadmin' && superadmins.length <= 1) {
      throw new ApiError('OWNERSHIP_CONSTRAINT', 'The last superadmin cannot be demoted');
    }
    await trx.updateTable('users').set({ role, updated_at: new Date() }).where('id', '=', userId).execute();
    await recordAudit(trx, {
      action: 'user.role_changed',
      actorId,
      organizationId: null,
      metadata: { userId, previousRole: current.role, role },
    });
    return { id: userId, role };
  });
}
