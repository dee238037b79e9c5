import type { Kysely } from 'kysely';
import { runInTransaction } from '../db/ambient.js';
import type { Database } from '../db/database.js';
import { libraryRoleFor, seedDefaultRoles } from '../db/queries/roles.js';
import { setTenant } from '../db/tenant.js';
import type { Events } from '../shared/events.js';

/**
 * Spec §6 ORGANIZATION_CREATED: seed the four default roles, then give the
 * creator's membership the Owner role. Runs in the ambient transaction of the
 * create request (src/routes/auth.ts), so a failure here rolls the whole
 * organization back; called outside one, it opens its own.
 */
export function registerOrganizationHandlers({ events, db }: { events: Events; db: Kysely<Database> }): void {
  events.on('ORGANIZATION_CREATED', async ({ organizationId, creatorUserId }) => {
    await runInTransaction(db, async (trx) => {
      await setTenant(trx, organizationId);
      const roles = await seedDefaultRoles(trx, organizationId);
      const updated = await trx
        .updateTable('members')
        .set({ role_id: roles.owner, role: libraryRoleFor('owner') })
        .where('organization_id', '=', organizationId)
        .where('user_id', '=', creatorUserId)
        .executeTakeFirst();
      if (updated.numUpdatedRows !== 1n)
        throw new Error('ORGANIZATION_CREATED: the creator has no membership to make Owner');
    });
  });
}
