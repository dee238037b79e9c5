import type { Kysely } from 'kysely';
import type { Database } from '../database.js';
import { paginate } from '../pagination.js';
import { withTenant } from '../tenant.js';

/** GET /api/audit-logs: a page of one organization's entries, newest first. */
export function auditPage(db: Kysely<Database>, tenantId: string, page: { limit: number; cursor?: string }) {
  return withTenant(db, tenantId, (trx) =>
    paginate(
      trx
        .selectFrom('audit_logs')
        .select(['id', 'action', 'actor_id', 'tenant_id', 'metadata', 'created_at'])
        .where('tenant_id', '=', tenantId),
      page,
    ),
  );
}
