import { type Kysely, sql, type Transaction } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { setScope, setTenant, withTenant } from '../tenant.js';

export const KEY_COLUMNS = [
  'id',
  'tenant_id',
  'created_by',
  'name',
  'scopes',
  'expires_at',
  'key_prefix',
  'last_four',
  'created_at',
  'revoked_at',
  'last_used_at',
] as const;

/** The metadata audit entries carry (docs/api.md "Audit actions": name, scopes, expiry; never the key, hash or salt). */
export function keyMetadata(key: { id: string; name: string; scopes: string[]; expires_at: Date | null }) {
  return {
    keyId: key.id,
    name: key.name,
    scopes: key.scopes,
    expiresAt: key.expires_at ? new Date(key.expires_at).toISOString() : null,
  };
}

export interface RevokeKeys {
  /** The organization whose keys go; none: those `createdBy` made, in every organization. */
  tenantId?: string;
  /** Only the keys this user created. */
  createdBy?: string;
  /** Only this key. */
  keyId?: string;
  actorId: string | null;
  /** Why, in each audit entry's metadata (none for a key revoked by request). */
  reason?: string;
}

/**
 * Revokes active keys, each with one `api_key.revoked` entry in its
 * organization: one key (DELETE /api/api-keys/:id), an organization's (organization
 * deleted), one member's there (member removed or left), or a user's
 * everywhere (user deleted; docs/api.md "API keys"). One conditional UPDATE per
 * organization decides the winner, so concurrent revokes audit a key once.
 * Needs nothing set on `trx`; leaves the tenant named when given, no tenant
 * and no key owner otherwise.
 */
export async function revokeKeys(
  trx: Transaction<Database>,
  target: RevokeKeys,
): Promise<{ id: string; revoked_at: Date | null }[]> {
  const { tenantId, createdBy, keyId, actorId, reason } = target;
  if (tenantId === undefined) {
    if (!createdBy) throw new Error('revokeKeys: name a tenant or a creator');
    await setScope(trx, { tenantId: '', keyOwnerId: createdBy });
    const tenants = await trx
      .selectFrom('api_keys')
      .select('tenant_id')
      .distinct()
      .where('created_by', '=', createdBy)
      .where('revoked_at', 'is', null)
      .execute();
    const revoked = [];
    for (const { tenant_id } of tenants) revoked.push(...(await revokeKeys(trx, { ...target, tenantId: tenant_id })));
    await setScope(trx, { tenantId: '', keyOwnerId: '' });
    return revoked;
  }
  await setTenant(trx, tenantId);
  let query = trx
    .updateTable('api_keys')
    .set({ revoked_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('revoked_at', 'is', null);
  if (createdBy) query = query.where('created_by', '=', createdBy);
  if (keyId) query = query.where('id', '=', keyId);
  const revoked = await query.returning(['id', 'name', 'scopes', 'expires_at', 'revoked_at']).execute();
  for (const key of revoked) {
    await recordAudit(trx, {
      action: 'api_key.revoked',
      actorId,
      organizationId: tenantId,
      metadata: { ...keyMetadata(key), ...(reason ? { reason } : {}) },
    });
  }
  return revoked;
}

/** DELETE /api/api-keys/:id, idempotent: when the key was revoked, by this call or before; NOT_FOUND is the caller's to raise (null). */
export async function revokeKey(
  db: Kysely<Database>,
  { tenantId, keyId, actorId }: { tenantId: string; keyId: string; actorId: string },
): Promise<Date | null> {
  return withTenant(db, tenantId, async (trx) => {
    const [revoked] = await revokeKeys(trx, { tenantId, keyId, actorId });
    if (revoked) return revoked.revoked_at!;
    const existing = await trx
      .selectFrom('api_keys')
      .select('revoked_at')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', keyId)
      .executeTakeFirst();
    return existing?.revoked_at ?? null;
  });
}

/** The organization's keys, newest first. */
export function listKeys(db: Kysely<Database>, tenantId: string) {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('api_keys')
      .select([...KEY_COLUMNS])
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute(),
  );
}

export interface NewKey {
  tenantId: string;
  createdBy: string;
  name: string;
  scopes: string[];
  expiresAt: Date | null;
  material: { lastFour: string; hash: string; salt: string; lookupDigest: string };
}

/** Stores a key (its hash, salt and lookup digest, never the key) with its `api_key.created` entry. */
export function insertKey(db: Kysely<Database>, key: NewKey) {
  return withTenant(db, key.tenantId, async (trx) => {
    const inserted = await trx
      .insertInto('api_keys')
      .values({
        tenant_id: key.tenantId,
        created_by: key.createdBy,
        name: key.name,
        scopes: key.scopes,
        expires_at: key.expiresAt,
        last_four: key.material.lastFour,
        key_hash: key.material.hash,
        key_salt: key.material.salt,
        lookup_digest: key.material.lookupDigest,
      })
      .returning([...KEY_COLUMNS])
      .executeTakeFirstOrThrow();
    await recordAudit(trx, {
      action: 'api_key.created',
      actorId: key.createdBy,
      organizationId: key.tenantId,
      metadata: keyMetadata(inserted),
    });
    return inserted;
  });
}

/** What authenticating with a key needs: its tenant, creator, scopes, state and salted hash. */
export interface PresentedKeyRow {
  id: string;
  tenant_id: string;
  created_by: string;
  scopes: string[];
  expires_at: Date | null;
  key_hash: string;
  key_salt: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** The key with this lookup digest, across tenants (`api_key_by_digest` is the one cross-tenant read RLS allows). */
export async function keyByDigest(db: Kysely<Database>, digest: string): Promise<PresentedKeyRow | undefined> {
  const { rows } = await sql<PresentedKeyRow>`
    select id, tenant_id, created_by, scopes, expires_at, key_hash, key_salt, revoked_at, last_used_at
    from api_key_by_digest(${digest})`.execute(db);
  return rows[0];
}

/** Stamps `last_used_at` unless another request did within `resolutionMs` (one write per key per interval). */
export function touchKey(
  db: Kysely<Database>,
  key: { id: string; tenant_id: string },
  now: Date,
  resolutionMs: number,
): Promise<unknown> {
  return withTenant(db, key.tenant_id, (trx) =>
    trx
      .updateTable('api_keys')
      .set({ last_used_at: now })
      .where('id', '=', key.id)
      .where((eb) =>
        eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', new Date(now.getTime() - resolutionMs))]),
      )
      .execute(),
  );
}
