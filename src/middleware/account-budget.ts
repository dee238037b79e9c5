import type { Context } from 'hono';
import type { RateLimitDecision, RateLimitStore, RateLimitTier } from '../platform/rate-limit-store.js';
import type { Config } from '../shared/config.js';
import { ApiError, tooMany } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { AppEnv, Clock } from '../shared/types.js';

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
export async function signInEmail(c: Context<AppEnv>): Promise<string | null> {
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
 * Reserves one attempt in the account tier (docs/api.md "Rate limiting"): wrong
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
