import { type Kysely, sql, type Transaction } from 'kysely';
import { currentRequestScope } from '../request-scope.js';
import type { DB } from './database.js';

/** API.md "Audit actions". */
export const AUDIT_ACTIONS = [
  'api_key.created',
  'api_key.revoked',
  'member.role_changed',
  'role.created',
  'role.updated',
  'role.deleted',
  'ownership.transferred',
  'user.role_changed',
  'account.deletion_scheduled',
  'account.reactivated',
  'account.purged',
  'user.two_factor_enabled',
  'user.two_factor_disabled',
  'user.passkey_added',
  'user.passkey_removed',
  'organization.security_updated',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditEntry {
  action: AuditAction;
  actorId: string | null;
  /** The tenant; null for platform-level actions. Must match the transaction's tenant context. */
  organizationId: string | null;
  /** Never a key, hash, salt, password, token or session id (API.md). */
  metadata: Record<string, unknown>;
  requestId?: string | null;
}

/** Metadata keys that must never be written, whatever a caller passes. */
const FORBIDDEN_KEYS = /^(key|keyHash|keySalt|hash|salt|password|token|sessionId|secret)$/i;

function scrub(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(scrub);
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([key]) => !FORBIDDEN_KEYS.test(key))
        .map(([key, inner]) => [key, scrub(inner)]),
    );
  }
  return value;
}

/** Writes one entry inside the caller's transaction, so it commits or rolls back with the change. */
export async function recordAudit(
  trx: Transaction<DB> | Kysely<DB>,
  { action, actorId, organizationId, metadata, requestId }: AuditEntry,
): Promise<void> {
  const scope = currentRequestScope();
  // An action done with an API key names the key as the actor's means.
  const means = scope?.apiKeyId ? { via: { type: 'api_key', apiKeyId: scope.apiKeyId } } : {};
  await trx
    .insertInto('audit_logs')
    .values({
      tenant_id: organizationId,
      actor_id: actorId,
      action,
      // As text, cast by the server: postgres.js binds a string to a jsonb
      // parameter as a JSON string scalar ("{\"keyId\":…}"), not an object.
      metadata: sql<string>`${JSON.stringify(scrub({ ...metadata, ...means }))}::text::jsonb`,
      request_id: requestId ?? scope?.requestId ?? null,
    })
    .execute();
}
