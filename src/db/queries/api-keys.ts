import { sql, type Transaction } from 'kysely';
import { recordAudit } from '../../audit.js';
import type { DB } from '../database.js';
import { setTenant } from '../tenant.js';

export const KEY_COLUMNS = ['id', 'tenant_id', 'created_by', 'name', 'scopes', 'expires_at', 'key_prefix', 'last_four', 'created_at', 'revoked_at', 'last_used_at'] as const;

/** The metadata audit entries carry (spec §2: name, scopes, expiry; never the key, hash or salt). */
export function keyMetadata(key: { id: string; name: string; scopes: string[]; expires_at: Date | null }) {
  return { keyId: key.id, name: key.name, scopes: key.scopes, expiresAt: key.expires_at ? new Date(key.expires_at).toISOString() : null };
}

/**
 * Revokes every active key of one organization, or only those `createdBy`
 * made there, each with an `api_key.revoked` entry (spec §3: organization
 * deleted; issue 14: a member removed). Needs nothing set on `trx`.
 */
export async function revokeOrganizationKeys(
  trx: Transaction<DB>,
  { tenantId, createdBy, actorId, requestId, reason }: { tenantId: string; createdBy?: string; actorId: string | null; requestId?: string; reason: string },
): Promise<number> {
  await setTenant(trx, tenantId);
  let query = trx.updateTable('api_keys').set({ revoked_at: sql`now()` }).where('tenant_id', '=', tenantId).where('revoked_at', 'is', null);
  if (createdBy) query = query.where('created_by', '=', createdBy);
  const revoked = await query.returning(['id', 'name', 'scopes', 'expires_at']).execute();
  for (const key of revoked) {
    await recordAudit(trx, { action: 'api_key.revoked', actorId, organizationId: tenantId, metadata: { ...keyMetadata(key), reason }, requestId });
  }
  return revoked.length;
}

/**
 * Revokes every active key a user created, in every organization, each with
 * an `api_key.revoked` entry in its organization (spec §3: user deleted).
 * Leaves the transaction with no tenant named.
 */
export async function revokeUserKeys(trx: Transaction<DB>, { userId, actorId, requestId, reason }: { userId: string; actorId: string | null; requestId?: string; reason: string }): Promise<number> {
  await sql`select set_config('app.tenant_id', '', true), set_config('app.key_owner_id', ${userId}, true)`.execute(trx);
  const tenants = await trx.selectFrom('api_keys').select('tenant_id').distinct().where('created_by', '=', userId).where('revoked_at', 'is', null).execute();
  let count = 0;
  for (const { tenant_id: tenantId } of tenants) {
    count += await revokeOrganizationKeys(trx, { tenantId, createdBy: userId, actorId, requestId, reason });
  }
  await sql`select set_config('app.tenant_id', '', true), set_config('app.key_owner_id', '', true)`.execute(trx);
  return count;
}
