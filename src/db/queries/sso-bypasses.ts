import type { Kysely } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';

/**
 * An Owner's break-glass (docs/sso.md "Policy"): a session that did not come
 * through the organization's single sign-on is let in, and its first use
 * there is audited `sso.bypassed`. The row and the entry are written in one
 * transaction; a row already there (an earlier request, another instance)
 * inserts nothing and audits nothing, so each session is audited once per
 * organization. True when this call wrote the entry.
 */
export async function recordSsoBypass(
  db: Kysely<Database>,
  { organizationId, sessionId, userId }: { organizationId: string; sessionId: string; userId: string },
): Promise<boolean> {
  return withTenant(db, organizationId, async (trx) => {
    const inserted = await trx
      .insertInto('sso_bypasses')
      .values({ tenant_id: organizationId, session_id: sessionId })
      .onConflict((conflict) => conflict.columns(['session_id', 'tenant_id']).doNothing())
      .returning('session_id')
      .executeTakeFirst();
    if (!inserted) return false;
    // Who, never which session: a session id is a bearer secret's handle (docs/api.md "Audit actions").
    await recordAudit(trx, { action: 'sso.bypassed', actorId: userId, organizationId, metadata: { userId } });
    return true;
  });
}
