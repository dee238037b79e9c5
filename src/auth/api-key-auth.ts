import type { Context } from 'hono';
import { type Kysely, sql } from 'kysely';
import type { Config } from '../config.js';
import type { DB } from '../db/database.js';
import { withTenant } from '../db/tenant.js';
import { ApiError, describeError, tooMany } from '../errors.js';
import type { RateLimitStore } from '../middleware/rate-limit-store.js';
import { currentRequestScope } from '../request-scope.js';
import type { AppEnv, Clock, EnrichedSession, SessionResolver } from '../types.js';
import { isWellFormedKey, lookupDigest, verifyKey } from './api-key-material.js';
import { COOKIE_PREFIX } from './auth.js';
import { loadSessionState, type SessionStateRow } from './session.js';
import type { SessionStateCache } from './session-state-cache.js';

const NO_SESSION = '00000000-0000-4000-8000-000000000000';
const LAST_USED_RESOLUTION_MS = 60_000;

interface KeyRow {
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

/** `Bearer sk_live_…` from the Authorization header, if the request presents one. */
export function presentedKey(c: Context<AppEnv>): string | null {
  const match = /^Bearer\s+(sk_live_\S*)$/i.exec(c.req.header('authorization') ?? '');
  return match?.[1] ?? null;
}

export function hasSessionCookie(c: Context<AppEnv>): boolean {
  const cookie = c.req.header('cookie') ?? '';
  return cookie.includes(`${COOKIE_PREFIX}.session_token=`);
}

/**
 * Which credential a request authenticates with: a key when one is presented
 * and keys are on (`key` given), a session cookie otherwise; both at once is
 * refused. Keys never authenticate the library's routes (API.md API_KEY_AUTH).
 */
export function credentialResolver({
  cookie,
  key,
}: {
  cookie: SessionResolver;
  key: ((c: Context<AppEnv>, presented: string) => Promise<EnrichedSession | null>) | null;
}): SessionResolver {
  return async (c) => {
    const presented = key && !c.req.path.startsWith('/api/auth/') ? presentedKey(c) : null;
    if (!presented) return cookie(c);
    if (hasSessionCookie(c)) throw new ApiError('VALIDATION_ERROR', 'Send a session cookie or an API key, not both');
    return key!(c, presented);
  };
}

const refused = () => new ApiError('UNAUTHORIZED', 'Invalid API key');

/**
 * API_KEY_AUTH=enabled (API.md): a key authenticates as its creator within
 * its organization, with the key's scopes narrowed to what the creator holds
 * there now. A malformed key is refused before any database work; a known
 * digest is checked against the salted hash in constant time; revoked,
 * expired, or orphaned (creator scheduled for deletion or no longer a
 * member) keys answer 401. Two statements: the key by digest (always: a
 * revocation bites on the next request), the creator's state (from the
 * session-state cache when the app has one). Key-authenticated requests have their own rate tier (spec §8 rule 6).
 */
export function createApiKeyResolver({
  db,
  config,
  store,
  clock,
  background = (task) => void task,
  cache,
}: {
  db: Kysely<DB>;
  config: Config;
  store: RateLimitStore;
  clock: Clock;
  /** Keeps the throttled lastUsedAt write alive after the response (Workers: waitUntil). */
  background?: (task: Promise<unknown>) => void;
  /** The app's session-state cache: the creator's state in the key's organization is kept there too. */
  cache?: SessionStateCache<SessionStateRow>;
}) {
  const creatorState = (userId: string, tenantId: string) =>
    cache
      ? cache.through(`creator:${userId}:${tenantId}`, Number.POSITIVE_INFINITY, () =>
          loadSessionState(db, NO_SESSION, userId, tenantId),
        )
      : loadSessionState(db, NO_SESSION, userId, tenantId);
  const tier = { name: 'api' as const, limit: config.rateLimit.api.limit, window: config.rateLimit.api.ttl };

  return async (c: Context<AppEnv>, presented: string): Promise<EnrichedSession> => {
    if (!isWellFormedKey(presented)) throw refused();
    const digest = lookupDigest(presented);
    const { rows } =
      await sql<KeyRow>`select id, tenant_id, created_by, scopes, expires_at, key_hash, key_salt, revoked_at, last_used_at from api_key_by_digest(${digest})`.execute(
        db,
      );
    const key = rows[0];
    if (!key || !verifyKey(presented, key.key_salt, key.key_hash)) throw refused();
    const now = clock();
    if (key.revoked_at || (key.expires_at && new Date(key.expires_at).getTime() <= now.getTime())) throw refused();

    const creator = await creatorState(key.created_by, key.tenant_id);
    if (!creator || creator.deleted_at || !creator.member_id) throw refused();

    if (config.rateLimit.enabled) {
      const decision = await store.limit(tier, `apikey:${key.id}`).catch((error) => {
        c.get('logger')?.error('rate_limit.store_failed', { tier: 'api', failOpen: true, error: describeError(error) });
        return null;
      });
      if (decision && !decision.success) throw tooMany(decision, now);
    }

    if (!key.last_used_at || now.getTime() - new Date(key.last_used_at).getTime() >= LAST_USED_RESOLUTION_MS) {
      const write = withTenant(db, key.tenant_id, (trx) =>
        trx
          .updateTable('api_keys')
          .set({ last_used_at: now })
          .where('id', '=', key.id)
          .where((eb) =>
            eb.or([
              eb('last_used_at', 'is', null),
              eb('last_used_at', '<', new Date(now.getTime() - LAST_USED_RESOLUTION_MS)),
            ]),
          )
          .execute(),
      ).catch((error) =>
        c.get('logger')?.warn('api_key.last_used_failed', { keyId: key.id, error: describeError(error) }),
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
      },
      session: {
        id: key.id,
        activeOrganizationId: key.tenant_id,
        expiresAt: (key.expires_at ? new Date(key.expires_at) : new Date('9999-12-31T00:00:00Z')).toISOString(),
      },
      permissions: key.scopes.filter((scope) => creator.permissions.includes(scope)).sort(),
      deletedAt: null,
      purgeAfter: null,
      apiKey: { id: key.id },
    };
  };
}
