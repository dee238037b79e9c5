import type { Kysely } from 'kysely';
import { runInTransaction } from '../db/ambient.js';
import type { Database } from '../db/database.js';
import { seedOrganizationRoles } from '../db/queries/organization-roles.js';

/**
 * What creating an organization does besides the library's own rows: seed
 * the four default roles, then give the creator's membership the Owner role
 * (docs/api.md "Organizations"). Called by the creation hook and awaited
 * before the create call returns; it runs in the ambient transaction of the
 * create request (src/routes/auth.ts), so a failure here rolls the whole
 * organization back. Called outside one, it opens its own.
 */
export function seedNewOrganization(
  db: Kysely<Database>,
  created: { organizationId: string; creatorUserId: string },
): Promise<void> {
  return runInTransaction(db, (trx) => seedOrganizationRoles(trx, created));
}
