import type { Kysely } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';

/** README "Multi-factor authentication", docs/sso.md "Policy". */
export interface OrganizationSecurity {
  requireMfa: boolean;
  requireSso: boolean;
}

/** The organization's security policy. */
export async function organizationSecurity(
  db: Kysely<Database>,
  organizationId: string,
): Promise<OrganizationSecurity> {
  const row = await db
    .selectFrom('organizations')
    .select(['require_mfa', 'require_sso'])
    .where('id', '=', organizationId)
    .executeTakeFirstOrThrow();
  return { requireMfa: row.require_mfa, requireSso: row.require_sso };
}

/**
 * Sets the policies given (the others stay) and writes
 * `organization.security_updated` in one transaction: every accepted change
 * is audited, a repeat included, naming each value given and what it was
 * before. The row lock orders concurrent changes.
 */
export async function updateOrganizationSecurity(
  db: Kysely<Database>,
  {
    organizationId,
    change,
    actorId,
  }: { organizationId: string; change: Partial<OrganizationSecurity>; actorId: string },
): Promise<OrganizationSecurity> {
  return withTenant(db, organizationId, async (trx) => {
    const row = await trx
      .selectFrom('organizations')
      .select(['require_mfa', 'require_sso'])
      .where('id', '=', organizationId)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const before: OrganizationSecurity = { requireMfa: row.require_mfa, requireSso: row.require_sso };
    const after: OrganizationSecurity = {
      requireMfa: change.requireMfa ?? before.requireMfa,
      requireSso: change.requireSso ?? before.requireSso,
    };
    // Only the columns given: each policy's column notifies the session-state listeners (migrations/0007, 0011).
    await trx
      .updateTable('organizations')
      .set({
        ...(change.requireMfa === undefined ? {} : { require_mfa: change.requireMfa }),
        ...(change.requireSso === undefined ? {} : { require_sso: change.requireSso }),
      })
      .where('id', '=', organizationId)
      .execute();
    const given = (Object.keys(after) as (keyof OrganizationSecurity)[]).filter((name) => change[name] !== undefined);
    await recordAudit(trx, {
      action: 'organization.security_updated',
      actorId,
      organizationId,
      metadata: {
        ...Object.fromEntries(given.map((name) => [name, after[name]])),
        previous: Object.fromEntries(given.map((name) => [name, before[name]])),
      },
    });
    return after;
  });
}
