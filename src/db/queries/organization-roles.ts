import type { Transaction } from 'kysely';
import type { Database } from '../database.js';
import { setTenant } from '../tenant.js';
import { libraryRoleFor, seedDefaultRoles } from './roles.js';

/**
 * A new organization's roles (docs/api.md "Organizations"): the four default
 * roles, then the creator's membership made Owner. Names the tenant on `trx`.
 */
export async function seedOrganizationRoles(
  trx: Transaction<Database>,
  { organizationId, creatorUserId }: { organizationId: string; creatorUserId: string },
): Promise<void> {
  await setTenant(trx, organizationId);
  const roles = await seedDefaultRoles(trx, organizationId);
  const updated = await trx
    .updateTable('members')
    .set({ role_id: roles.owner, role: libraryRoleFor('owner') })
    .where('organization_id', '=', organizationId)
    .where('user_id', '=', creatorUserId)
    .executeTakeFirst();
  if (updated.numUpdatedRows !== 1n)
    throw new Error('Organization created: the creator has no membership to make Owner');
}
