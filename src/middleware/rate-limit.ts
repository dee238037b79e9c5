import type { Context, MiddlewareHandler } from 'hono';
import type { RateLimitDecision, RateLimitStore, RateLimitTier } from '../platform/rate-limit-store.js';
import { clientIpFromForwardedFor, rateLimitIdentity } from '../shared/client-address.js';
import type { Config } from '../shared/config.js';
import { ApiError, tooMany } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { AppEnv, Clock } from '../shared/types.js';

/**
 * Spec §8: the auth-sensitive paths (each also covers the paths below it),
 * plus the password oracle and the second-factor routes: guessing a password or a code is what the tier limits.
 */
export const AUTH_SENSITIVE_PATHS = [
  '/api/auth/sign-in',
  '/api/auth/sign-up',
  '/api/auth/request-password-reset',
  '/api/auth/reset-password',
  '/api/auth/magic-link',
  '/api/auth/change-password',
  '/api/auth/verify-email',
  '/api/auth/send-verification-email',
  '/api/auth/verify-password',
  '/api/auth/two-factor',
  '/api/auth/passkey',
  '/api/users/me/purge',
  '/api/session/step-up',
] as const;

/** The one route that takes a password for an email: its failures count per account. */
export const PASSWORD_SIGN_IN_PATH = '/api/auth/sign-in/email';

/** Letter case, repeated slashes, `.` segments and a trailing slash never buy a fresh budget. */
export function normalizePath(path: string): string {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // keep the raw path: a malformed escape is not a way around the limiter
  }
  const segments = decoded
    .toLowerCase()
    .split('/')
    .filter((segment) => segment !== '' && segment !== '.');
  return `/${segments.join('/')}`;
}

export function isAuthSensitive(path: string): boolean {
  const normalized = normalizePath(path);
  return AUTH_SENSITIVE_PATHS.some((prefix) => normalized === prefix || normalized.startsWith(`${prefix}/`));
}

/** SHA-256 hex of the trimmed, lower-cased email: the store never holds an address. */
export async function accountKey(email: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(email.trim().toLowerCase()));
  return `email:${[...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * The email a password sign-in names, read from a copy of the body (the
 * limiter runs before the JSON checks: anything malformed is no email, and
 * the request is refused further on).
 */
async function signInEmail(c: Context<AppEnv>): Promise<string | null> {
  let text: string;
  try {
    text = await c.req.raw.clone().text();
  } catch {
    return null;
  }
  let email: unknown;
  try {
    email = (JSON.parse(text) as { email?: unknown } | null)?.email;
  } catch {
    // A form body, should anything in front of the library ever accept one.
    if (/^application\/x-www-form-urlencoded/i.test(c.req.header('content-type') ?? ''))
      email = new URLSearchParams(text).get('email');
  }
  return typeof email === 'string' && email.trim() !== '' ? email : null;
}

/** One reserved attempt of an account's failure budget. */
interface AccountAttempt {
  /** Gives the attempt back unless it `failed`; a lost refund is logged and errs on the side of the account. */
  settle(failed: boolean): Promise<void>;
}

/**
 * Reserves one attempt in the account tier (README "Rate limiting"): wrong
 * passwords for one account, from any number of addresses, stop at the
 * limit until the window ends. Password sign-in and step-up
 * (routes/session.ts) spend the same budget. 429 when it is spent, 503 when
 * the store does not answer (fail closed).
 */
async function reserveAccountAttempt(
  {
    config,
    store,
    clock = () => new Date(),
    logger,
  }: { config: Config['rateLimit']; store: RateLimitStore; clock?: Clock; logger?: Logger },
  email: string,
): Promise<AccountAttempt> {
  const tier: RateLimitTier = { name: 'account', limit: config.account.limit, window: config.account.ttl };
  const account = await accountKey(email);
  let reservation: RateLimitDecision;
  try {
    reservation = await store.limit(tier, account);
  } catch (error) {
    logger?.error('rate_limit.store_failed', { tier: 'account', error: String((error as Error)?.message ?? error) });
    throw new ApiError('SERVICE_UNAVAILABLE', 'Rate limiting is unavailable; try again shortly');
  }
  if (!reservation.success) throw tooMany(reservation, clock());
  return {
    async settle(failed) {
      if (failed) return;
      await store.refund(tier, account, reservation.reset).catch((error: unknown) => {
        logger?.error('rate_limit.store_failed', {
          tier: 'account',
          refund: true,
          error: String((error as Error)?.message ?? error),
        });
      });
    },
  };
}

/**
 * Runs `run` with one attempt of the account tier reserved for `email`,
 * given back when it did not fail (`failed` of its result; a throw counts as
 * a failure): the one spelling of password sign-in, step-up and
 * verify-password's budget.
 */
export async function withAccountAttempt<T>(
  deps: Parameters<typeof reserveAccountAttempt>[0],
  email: string,
  run: () => Promise<T>,
  failed: (result: T) => boolean,
): Promise<T> {
  const attempt = await reserveAccountAttempt(deps, email);
  let outcome: { result: T } | null = null;
  try {
    outcome = { result: await run() };
    return outcome.result;
  } finally {
    await attempt.settle(outcome === null || failed(outcome.result));
  }
}

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
  clock?: Clock;
}

/**
 * Spec §8 "Rate limiting": the global tier on every route (keyed by user when
 * signed in, else by address: an IPv6 client by its RATE_LIMIT_IPV6_PREFIX, see
 * `rateLimitIdentity`), the auth tier (with its block) on the
 * auth-sensitive paths, and per-account failures of password sign-in.
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
 * (README "Rate limiting").
 */
export function rateLimit({
  config,
  store,
  clientIp = (c) => clientIpFromForwardedFor(c.req.header('x-forwarded-for'), config.trustedProxyHops),
  identifyUser,
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

    if (isAuthSensitive(c.req.path)) {
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

    const email =
      c.req.method === 'POST' && normalizePath(c.req.path) === PASSWORD_SIGN_IN_PATH ? await signInEmail(c) : null;
    if (!email) return next();
    await withAccountAttempt(
      { config, store, clock, logger: c.get('logger') },
      email,
      () => next(),
      () => c.res.status === 401,
    );
  };
}
