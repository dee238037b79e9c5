import type { Context, MiddlewareHandler } from 'hono';
import type { RateLimitDecision, RateLimitStore, RateLimitTier } from '../platform/rate-limit-store.js';
import { clientIpFromForwardedFor, rateLimitIdentity } from '../shared/client-address.js';
import type { Config } from '../shared/config.js';
import { ApiError, tooMany } from '../shared/errors.js';
import type { AppEnv, Clock } from '../shared/types.js';
import { signInEmail, withAccountAttempt } from './account-budget.js';
import type { RateLimitTiers } from './rate-limit-tiers.js';

export { accountKey, withAccountAttempt } from './account-budget.js';
export {
  type LibraryRateLimits,
  normalizePath,
  type RateLimitTiers,
  rateLimitTiers,
  SERVICE_AUTH_TIER_PATHS,
  type TierOf,
} from './rate-limit-tiers.js';

export interface RateLimitOptions {
  config: Config['rateLimit'];
  store: RateLimitStore;
  /**
   * The client address; by default X-Forwarded-For behind `config.trustedProxyHops` (the entry passes one that knows
   * its platform and socket). The address-keyed tiers count it as `rateLimitIdentity` (an IPv6 client by its
   * `config.ipv6Prefix`); `c.get('clientIp')` keeps the address itself.
   */
  clientIp?: (c: Context<AppEnv>) => string | null | undefined;
  /** The signed-in user's id, when it can be known without touching the database. */
  identifyUser?: (c: Context<AppEnv>) => Promise<string | null> | string | null;
  /**
   * The tier of a request path, and the paths that name an account
   * (`rateLimitTiers`: the library's from its routes' rows, and the service's).
   */
  tiers: RateLimitTiers;
  clock?: Clock;
}

/**
 * docs/api.md "Rate limiting": the global tier on every route (keyed by user when
 * signed in, else by address: an IPv6 client by its RATE_LIMIT_IPV6_PREFIX, see
 * `rateLimitIdentity`), the auth tier (with its block) on the paths
 * `tierOf` puts in it, and per-account failures of password sign-in.
 *
 * The auth tier always counts the client address, whatever cookie comes
 * along: a session of an account the caller owns buys no attempts from a
 * blocked address. When the request also carries a session (change-password,
 * verify-password, purge, two-factor management) it counts against the user
 * too, so changing address buys nothing either; both must have budget.
 *
 * Password sign-in reserves one attempt in the account tier before it runs
 * and gives it back unless it was answered 401: wrong passwords for one
 * email, from any number of addresses, at once or in turn, stop at the limit
 * until the window ends. A success does not clear earlier failures.
 *
 * Headers on 429 only. When the store does not answer, the auth and account
 * checks fail closed (503) and the global tier fails open with an error log
 * (docs/api.md "Rate limiting").
 */
export function rateLimit({
  config,
  store,
  clientIp = (c) => clientIpFromForwardedFor(c.req.header('x-forwarded-for'), config.trustedProxyHops),
  identifyUser,
  tiers: { tierOf, namesAccount },
  clock = () => new Date(),
}: RateLimitOptions): MiddlewareHandler<AppEnv> {
  const globalTier: RateLimitTier = { name: 'global', limit: config.global.limit, window: config.global.ttl };
  const authTier: RateLimitTier = { name: 'auth', limit: config.auth.limit, window: config.auth.ttl };

  /** One identity's auth-tier decision: the refusal to answer with, or null. */
  const authRefusal = async (
    identity: string,
  ): Promise<Pick<RateLimitDecision, 'limit' | 'remaining' | 'reset'> | null> => {
    const blockedUntil = await store.blockedUntil(authTier, identity);
    if (blockedUntil !== null) return { limit: authTier.limit, remaining: 0, reset: blockedUntil };
    const decision = await store.limit(authTier, identity);
    if (decision.success) return null;
    const until = clock().getTime() + config.auth.blockDuration * 1000;
    if (config.auth.blockDuration > 0) await store.block(authTier, identity, until);
    return { ...decision, reset: Math.max(until, decision.reset) };
  };

  const failClosed = (c: Context<AppEnv>, tier: string, error: unknown): never => {
    if (error instanceof ApiError) throw error;
    c.get('logger')?.error('rate_limit.store_failed', { tier, error: String((error as Error)?.message ?? error) });
    throw new ApiError('SERVICE_UNAVAILABLE', 'Rate limiting is unavailable; try again shortly');
  };

  return async function rateLimitMiddleware(c, next) {
    const address = clientIp(c) ?? 'unknown';
    c.set('clientIp', address);
    if (!config.enabled || c.req.method === 'OPTIONS') return next();
    const ip = rateLimitIdentity(address, config.ipv6Prefix);

    const userId = identifyUser ? await identifyUser(c) : null;

    if (tierOf(c.req.path) === 'auth') {
      const identities = userId ? [`ip:${ip}`, `user:${userId}`] : [`ip:${ip}`];
      try {
        const refusals = (await Promise.all(identities.map(authRefusal))).filter((refusal) => refusal !== null);
        if (refusals.length > 0)
          throw tooMany({ ...refusals[0]!, reset: Math.max(...refusals.map((refusal) => refusal.reset)) }, clock());
      } catch (error) {
        failClosed(c, 'auth', error);
      }
    }

    let decision: RateLimitDecision | null = null;
    try {
      decision = await store.limit(globalTier, userId ? `user:${userId}` : `ip:${ip}`);
    } catch (error) {
      c.get('logger')?.error('rate_limit.store_failed', {
        tier: 'global',
        failOpen: true,
        error: String((error as Error)?.message ?? error),
      });
    }
    if (decision && !decision.success) throw tooMany(decision, clock());

    const email = c.req.method === 'POST' && namesAccount(c.req.path) ? await signInEmail(c) : null;
    if (!email) return next();
    await withAccountAttempt(
      { config, store, clock, logger: c.get('logger') },
      email,
      () => next(),
      () => c.res.status === 401,
    );
  };
}
