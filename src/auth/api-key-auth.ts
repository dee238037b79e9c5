import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { keyByDigest, touchKey } from '../db/queries/api-keys.js';
import { loadSessionState, type SessionStateRow } from '../db/queries/session-state.js';
import type { RateLimitStore } from '../platform/rate-limit-store.js';
import type { Config } from '../shared/config.js';
import { ApiError, describeError, tooMany } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { currentRequestScope } from '../shared/request-scope.js';
import type { Clock, EnrichedSession } from '../shared/types.js';
import { isWellFormedKey, lookupDigest, verifyKey } from './api-key-material.js';
import { SCIM_TOKEN_PREFIX } from './scim-token-material.js';
import type { SessionStateCache } from './session-state-cache.js';

const NO_SESSION = '00000000-0000-4000-8000-000000000000';
const LAST_USED_RESOLUTION_MS = 60_000;

/** Authenticates a presented `sk_live_…` key; the request's logger hears about store failures. */
export type ApiKeyResolver = (presented: string, logger?: Logger) => Promise<EnrichedSession>;

const refused = () => new ApiError('UNAUTHORIZED', 'Invalid API key');
/** A key is not a session: it has no break-glass to record (a call would be a programming error). */
const refuseSsoBypass = async (): Promise<void> => {
  throw new Error('An API key is not a session: the single sign-on policy does not apply to it');
};

/**
 * API_KEY_AUTH=enabled (docs/api.md "API keys"): a key authenticates as its creator within
 * its organization, with the key's scopes narrowed to what the creator holds
 * there now. A malformed key is refused before any database work; a known
 * digest is checked against the salted hash in constant time; revoked,
 * expired, or orphaned (creator scheduled for deletion or no longer a
 * member) keys answer 401. Two statements: the key by digest (always: a
 * revocation bites on the next request), the creator's state (from the
 * session-state cache when the app has one). Key-authenticated requests have their own rate tier (docs/api.md "Rate limiting").
 */
export function createApiKeyResolver({
  db,
  config,
  store,
  clock,
  background = (task) => void task,
  cache,
}: {
  db: Kysely<Database>;
  config: Config;
  store: RateLimitStore;
  clock: Clock;
  /** Keeps the throttled lastUsedAt write alive after the response (Workers: waitUntil). */
  background?: (task: Promise<unknown>) => void;
  /** The app's session-state cache: the creator's state in the key's organization is kept there too. */
  cache?: SessionStateCache<SessionStateRow>;
}): ApiKeyResolver {
  const creatorState = (userId: string, tenantId: string) =>
    cache
      ? cache.through(`creator:${userId}:${tenantId}`, Number.POSITIVE_INFINITY, () =>
          loadSessionState(db, NO_SESSION, userId, tenantId),
        )
      : loadSessionState(db, NO_SESSION, userId, tenantId);
  const tier = { name: 'api' as const, limit: config.rateLimit.api.limit, window: config.rateLimit.api.ttl };

  return async (presented, logger) => {
    // A SCIM token is valid under /api/scim/v2 only (docs/scim.md): never an API key, whatever it looks like.
    if (presented.startsWith(SCIM_TOKEN_PREFIX) || !isWellFormedKey(presented)) throw refused();
    const key = await keyByDigest(db, lookupDigest(presented));
    if (!key || !verifyKey(presented, key.key_salt, key.key_hash)) throw refused();
    const now = clock();
    if (key.revoked_at || (key.expires_at && new Date(key.expires_at).getTime() <= now.getTime())) throw refused();

    const creator = await creatorState(key.created_by, key.tenant_id);
    if (!creator || creator.deleted_at || !creator.member_id) throw refused();

    if (config.rateLimit.enabled) {
      const decision = await store.limit(tier, `apikey:${key.id}`).catch((error) => {
        logger?.error('rate_limit.store_failed', { tier: 'api', failOpen: true, error: describeError(error) });
        return null;
      });
      if (decision && !decision.success) throw tooMany(decision, now);
    }

    if (!key.last_used_at || now.getTime() - new Date(key.last_used_at).getTime() >= LAST_USED_RESOLUTION_MS) {
      const write = touchKey(db, key, now, LAST_USED_RESOLUTION_MS).catch((error) =>
        logger?.warn('api_key.last_used_failed', { keyId: key.id, error: describeError(error) }),
      );
      background(write);
    }

    const scope = currentRequestScope();
    if (scope) scope.apiKeyId = key.id;
    return {
      // Never the creator's platform role: the superadmin bypass must not
      // apply to keys anywhere, and routes check `user.role` themselves
      // (roles.ts checkGrantable, members.ts changeMemberRole), not only the guard.
      user: {
        id: key.created_by,
        email: creator.email,
        name: creator.name,
        role: 'user',
        emailVerified: creator.email_verified,
        twoFactorEnabled: creator.two_factor_enabled,
      },
      session: {
        id: key.id,
        activeOrganizationId: key.tenant_id,
        expiresAt: (key.expires_at ? new Date(key.expires_at) : new Date('9999-12-31T00:00:00Z')).toISOString(),
        // A key is not a session: the organization's MFA policy does not apply to it.
        mfa: false,
        // Nor does it ever prove a factor: never fresh for a sensitive action.
        stepUpUntil: new Date(0).toISOString(),
      },
      permissions: key.scopes.filter((scope) => creator.permissions.includes(scope)).sort(),
      requireMfa: false,
      // Nor the single sign-on policy (docs/sso.md "Policy"): the guard never asks a key for its break-glass.
      ssoRequired: false,
      isOwner: false,
      recordSsoBypass: refuseSsoBypass,
      stepUpFresh: false,
      deletedAt: null,
      purgeAfter: null,
      apiKey: { id: key.id },
    };
  };
}
