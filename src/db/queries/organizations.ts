import type { Kysely } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';

export interface OrganizationSecurity {
  requireMfa: boolean;
}

/** The organization's security policy (README "Multi-factor authentication"). */
export async function organizationSecurity(
  db: Kysely<Database>,
  organizationId: string,
): Promise<OrganizationSecurity> {
  const row = await db
    .selectFrom('organizations')
    .select('require_mfa')
    .where('id', '=', organizationId)
    .executeTakeFirstOrThrow();
  return { requireMfa: row.require_mfa };
}

/**
 * Sets the policy and writes `organization.security_updated` in one
 * transaction (every accepted change is audited, a repeat included, naming
 * the value before and after). The row lock orders concurrent changes.
 */
export async function updateOrganizationSecurity(
  db: Kysely<Database>,
  { organizationId, requireMfa, actorId }: { organizationId: string; requireMfa: boolean; actorId: string },
): Promise<OrganizationSecurity> {
  return withTenant(db, organizationId, async (trx) => {
    const before = await trx
      .selectFrom('organizations')
      .select('require_mfa')
      .where('id', '=', organizationId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    await trx.updateTable('organizations').set({ require_mfa: requireMfa }).where('id', '=', organizationId).execute();
    await recordAudit(trx, {
      action: 'organization.security_updated',
      actorId,
      organizationId,
      metadata: { requireMfa, previous: { requireMfa: before.require_mfa } },
    });
    return { requireMfa };
  });
}
