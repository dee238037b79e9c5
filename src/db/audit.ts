import { type Kysely, sql, type Transaction } from 'kysely';
import { currentRequestScope } from '../shared/request-scope.js';
import type { Database } from './database.js';

/** docs/api.md "Audit actions". */
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
  'user.account_linked',
  'organization.security_updated',
  'member.added',
  'member.removed',
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
  'webhook.secret_rotated',
  'sso.connection_created',
  'sso.connection_updated',
  'sso.connection_deleted',
  'sso.domain_added',
  'sso.domain_verified',
  'sso.domain_deleted',
  'sso.bypassed',
  'scim.token_created',
  'scim.token_revoked',
  'scim.user_updated',
  'scim.group_created',
  'scim.group_updated',
  'scim.group_deleted',
  'scim.group_roles_updated',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export interface AuditEntry {
  action: AuditAction;
  actorId: string | null;
  /** The tenant; null for platform-level actions. Must match the transaction's tenant context. */
  organizationId: string | null;
  /** Never a key, hash, salt, password, token or session id (docs/api.md "Audit actions"). */
  metadata: Record<string, unknown>;
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

/**
 * The events an organization's webhook endpoints subscribe to (README
 * "Webhooks"): every audit action written for an organization, except
 * `webhook.*` (audited, never delivered). Account actions (`user.*`,
 * `account.*`) belong to no organization.
 */
/** An organization's audit action: every one but the platform's, the account's and the webhooks' own. */
export type WebhookEvent = Exclude<AuditAction, `user.${string}` | `account.${string}` | `webhook.${string}`>;

export const WEBHOOK_EVENTS = AUDIT_ACTIONS.filter(
  (action): action is WebhookEvent => !/^(user|account|webhook)\./.test(action),
) as [WebhookEvent, ...WebhookEvent[]];

const EVENTS: ReadonlySet<string> = new Set(WEBHOOK_EVENTS);

/** ISO 8601 with milliseconds, as JSON dates are written everywhere else (Date#toISOString). */
const iso = (column: string) => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);

/**
 * Writes one entry inside the caller's transaction, so it commits or rolls
 * back with the change. The request it belongs to (its id, the API key that
 * acted) is read from the request scope, never passed by hand; outside a
 * request (the purge job, the command line) it has none. An organization's entry is also its webhook event:
 * the same statement writes one delivery per enabled endpoint subscribed to
 * the action (the transactional outbox; no route can forget it, and no
 * committed change lacks its event or the reverse).
 */
export async function recordAudit(
  trx: Transaction<Database> | Kysely<Database>,
  { action, actorId, organizationId, metadata }: AuditEntry,
): Promise<void> {
  const scope = currentRequestScope();
  // An action done with an API key names the key as the actor's means.
  const means = scope?.apiKeyId ? { via: { type: 'api_key', apiKeyId: scope.apiKeyId } } : {};
  // As text, cast by the server: postgres.js binds a string to a jsonb
  // parameter as a JSON string scalar ("{\"keyId\":…}"), not an object.
  const json = sql<string>`${JSON.stringify(scrub({ ...metadata, ...means }))}::text::jsonb`;
  const request = scope?.requestId ?? null;
  if (!organizationId || !EVENTS.has(action)) {
    await trx
      .insertInto('audit_logs')
      .values({ tenant_id: organizationId, actor_id: actorId, action, metadata: json, request_id: request })
      .execute();
    return;
  }
  const { numAffectedRows } = await sql`
    WITH entry AS (
      INSERT INTO audit_logs (tenant_id, actor_id, action, metadata, request_id)
      VALUES (${organizationId}, ${actorId}, ${action}, ${json}, ${request})
      RETURNING id, tenant_id, actor_id, action, metadata, created_at
    )
    INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, event_type, payload)
    SELECT entry.tenant_id, w.id, entry.id, entry.action,
           jsonb_build_object(
             'type', entry.action,
             'timestamp', ${iso('entry.created_at')},
             'data', jsonb_build_object(
               'id', entry.id, 'action', entry.action, 'actorId', entry.actor_id,
               'organizationId', entry.tenant_id, 'metadata', entry.metadata,
               'createdAt', ${iso('entry.created_at')}
             )
           )
    FROM entry
    JOIN webhook_endpoints w ON w.tenant_id = entry.tenant_id
    WHERE w.enabled AND (entry.action = ANY (w.events) OR '*' = ANY (w.events))
  `.execute(trx);
  if (scope && numAffectedRows) scope.webhooksQueued = true;
}
