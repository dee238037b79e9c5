import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { scimTokenByDigest, touchScimToken } from '../db/queries/scim-tokens.js';
import { describeError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { Clock, ScimCaller } from '../shared/types.js';
import { isWellFormedScimToken, scimTokenDigest, verifyScimToken } from './scim-token-material.js';

const LAST_USED_RESOLUTION_MS = 60_000;

/** The token a presented `scim_…` token stands for; null for anything not a token in force. */
export type ScimTokenResolver = (presented: string, logger?: Logger) => Promise<ScimCaller | null>;

/**
 * docs/scim.md "Tokens": a token is found by its digest across
 * organizations, checked against its salted hash in constant time, and
 * refused once revoked: read on every request, never cached, so a
 * revocation bites on the next one. `last_used_at` is written at most once a
 * minute, within the request and never waiting on a lock (touchScimToken):
 * a write left running after the answer would hold a pooled connection that
 * closing the pool then waits for without end (postgres.js `end()`).
 */
export function createScimTokenResolver({ db, clock }: { db: Kysely<Database>; clock: Clock }): ScimTokenResolver {
  return async (presented, logger) => {
    if (!isWellFormedScimToken(presented)) return null;
    const token = await scimTokenByDigest(db, scimTokenDigest(presented));
    if (!token || !verifyScimToken(presented, token.token_salt, token.token_hash) || token.revoked_at) return null;
    const now = clock();
    if (!token.last_used_at || now.getTime() - new Date(token.last_used_at).getTime() >= LAST_USED_RESOLUTION_MS) {
      // A failed stamp is logged; the request goes on.
      await touchScimToken(db, token, now, LAST_USED_RESOLUTION_MS).catch((error: unknown) =>
        logger?.warn('scim_token.last_used_failed', { tokenId: token.id, error: describeError(error) }),
      );
    }
    return { tokenId: token.id, tenantId: token.tenant_id, createdBy: token.created_by };
  };
}
