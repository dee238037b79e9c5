import { type Kysely, sql } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';

const LISTED = ['id', 'name', 'created_at', 'last_used_at'] as const;

/** What an audit entry says of a token (docs/api.md "Audit actions": never the token, its hash or salt). */
const tokenMetadata = (token: { id: string; name: string }) => ({ tokenId: token.id, name: token.name });

export interface NewScimToken {
  tenantId: string;
  createdBy: string;
  name: string;
  material: { hash: string; salt: string; lookupDigest: string };
}

/** Stores a token (its salted hash and lookup digest, never the token) with its `scim.token_created` entry. */
export function insertScimToken(db: Kysely<Database>, token: NewScimToken) {
  return withTenant(db, token.tenantId, async (trx) => {
    const inserted = await trx
      .insertInto('scim_tokens')
      .values({
        tenant_id: token.tenantId,
        created_by: token.createdBy,
        name: token.name,
        token_hash: token.material.hash,
        token_salt: token.material.salt,
        lookup_digest: token.material.lookupDigest,
      })
      .returning([...LISTED])
      .executeTakeFirstOrThrow();
    await recordAudit(trx, {
      action: 'scim.token_created',
      actorId: token.createdBy,
      organizationId: token.tenantId,
      metadata: tokenMetadata(inserted),
    });
    return inserted;
  });
}

/** The organization's tokens in force, oldest first. */
export function listScimTokens(db: Kysely<Database>, tenantId: string) {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('scim_tokens')
      .select([...LISTED])
      .where('tenant_id', '=', tenantId)
      .where('revoked_at', 'is', null)
      .orderBy('created_at')
      .orderBy('id')
      .execute(),
  );
}

/**
 * Revokes a token in force, with its `scim.token_revoked` entry; false when
 * the organization has no such token in force (already revoked, another
 * organization's, or none). One conditional UPDATE: concurrent calls audit once.
 */
export function revokeScimToken(
  db: Kysely<Database>,
  { tenantId, tokenId, actorId }: { tenantId: string; tokenId: string; actorId: string },
): Promise<boolean> {
  return withTenant(db, tenantId, async (trx) => {
    const revoked = await trx
      .updateTable('scim_tokens')
      .set({ revoked_at: sql`now()` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', tokenId)
      .where('revoked_at', 'is', null)
      .returning(['id', 'name'])
      .executeTakeFirst();
    if (!revoked) return false;
    await recordAudit(trx, {
      action: 'scim.token_revoked',
      actorId,
      organizationId: tenantId,
      metadata: tokenMetadata(revoked),
    });
    return true;
  });
}

/** What authenticating with a token needs: its organization, creator, state and salted hash. */
export interface PresentedScimTokenRow {
  id: string;
  tenant_id: string;
  /** Its power to give or take away the Owner role is theirs (docs/scim.md "Tokens"). */
  created_by: string;
  token_hash: string;
  token_salt: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** The token with this lookup digest, whatever its organization (`scim_token_by_digest`: the one cross-tenant read). */
export async function scimTokenByDigest(
  db: Kysely<Database>,
  digest: string,
): Promise<PresentedScimTokenRow | undefined> {
  const { rows } = await sql<PresentedScimTokenRow>`
    select id, tenant_id, created_by, token_hash, token_salt, revoked_at, last_used_at
    from scim_token_by_digest(${digest})`.execute(db);
  return rows[0];
}

/**
 * Stamps `last_used_at` unless another request did within `resolutionMs` (one
 * write per token per interval). Never waits on a lock: a row another
 * transaction holds (a concurrent use stamping it, a revocation) is skipped,
 * so the request that carries the write is never held up by it.
 */
export function touchScimToken(
  db: Kysely<Database>,
  token: { id: string; tenant_id: string },
  now: Date,
  resolutionMs: number,
): Promise<unknown> {
  return withTenant(db, token.tenant_id, (trx) =>
    trx
      .updateTable('scim_tokens')
      .set({ last_used_at: now })
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('scim_tokens')
          .select('id')
          .where('id', '=', token.id)
          .where((inner) =>
            inner.or([
              inner('last_used_at', 'is', null),
              inner('last_used_at', '<', new Date(now.getTime() - resolutionMs)),
            ]),
          )
          .forUpdate()
          .skipLocked(),
      )
      .execute(),
  );
}
