import type { Context, MiddlewareHandler } from 'hono';
import { ApiError } from '../errors.js';
import type { Config } from '../config.js';
import type { AppEnv, Clock } from '../types.js';
import type { RateLimitDecision, RateLimitStore, RateLimitTier } from './rate-limit-store.js';

/** Spec §8: the auth-sensitive paths (each also covers the paths below it). */
export const AUTH_SENSITIVE_PATHS = [
  '/api/auth/sign-in',
  '/api/auth/sign-up',
  '/api/auth/request-password-reset',
  '/api/auth/reset-password',
  '/api/auth/magic-link',
  '/api/auth/change-password',
  '/api/auth/verify-email',
  '/api/auth/send-verification-email',
  '/api/users/me/purge',
] as const;

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

/**
 * Spec §8 rule 2: one trusted proxy hop, so the right-most x-forwarded-for
 * entry (the one our proxy appended) is the client; entries to its left are
 * whatever the client chose to send.
 */
export function clientIpFromForwardedFor(header: string | undefined): string | null {
  if (!header) return null;
  const entries = header.split(',').map((entry) => entry.trim()).filter(Boolean);
  return entries.at(-1) ?? null;
}

export interface RateLimitOptions {
  config: Config['rateLimit'];
  store: RateLimitStore;
  /** The client address; by default the right-most x-forwarded-for entry (the entry passes one that knows its platform). */
  clientIp?: (c: Context<AppEnv>) => string | null | undefined;
  /** The signed-in user's id, when it can be known without touching the database. */
  identifyUser?: (c: Context<AppEnv>) => Promise<string | null> | string | null;
  clock?: Clock;
}

/**
 * Spec §8 "Rate limiting": the global tier on every route, the auth tier
 * (with its block) on the auth-sensitive paths. Headers on 429 only. When the
 * store does not answer, the auth tier fails closed (503) and the global tier
 * fails open with an error log (README "Rate limiting").
 */
export function rateLimit({ config, store, clientIp = (c) => clientIpFromForwardedFor(c.req.header('x-forwarded-for')), identifyUser, clock = () => new Date() }: RateLimitOptions): MiddlewareHandler<AppEnv> {
  const globalTier: RateLimitTier = { name: 'global', limit: config.global.limit, window: config.global.ttl };
  const authTier: RateLimitTier = { name: 'auth', limit: config.auth.limit, window: config.auth.ttl };

  return async function rateLimitMiddleware(c, next) {
    const ip = clientIp(c) ?? 'unknown';
    c.set('clientIp', ip);
    if (!config.enabled || c.req.method === 'OPTIONS') return next();

    const userId = identifyUser ? await identifyUser(c) : null;
    const identity = userId ? `user:${userId}` : `ip:${ip}`;
    const logger = c.get('logger');

    if (isAuthSensitive(c.req.path)) {
      try {
        const blockedUntil = await store.blockedUntil(authTier, identity);
        if (blockedUntil !== null) throw tooMany({ limit: authTier.limit, remaining: 0, reset: blockedUntil }, clock());
        const decision = await store.limit(authTier, identity);
        if (!decision.success) {
          const until = clock().getTime() + config.auth.blockDuration * 1000;
          if (config.auth.blockDuration > 0) await store.block(authTier, identity, until);
          throw tooMany({ ...decision, reset: Math.max(until, decision.reset) }, clock());
        }
      } catch (error) {
        if (error instanceof ApiError) throw error;
        logger?.error('rate_limit.store_failed', { tier: 'auth', error: String((error as Error)?.message ?? error) });
        throw new ApiError('SERVICE_UNAVAILABLE', 'Rate limiting is unavailable; try again shortly');
      }
    }

    let decision: RateLimitDecision | null = null;
    try {
      decision = await store.limit(globalTier, identity);
    } catch (error) {
      logger?.error('rate_limit.store_failed', { tier: 'global', failOpen: true, error: String((error as Error)?.message ?? error) });
    }
    if (decision && !decision.success) throw tooMany(decision, clock());
    return next();
  };
}

/** 429 RATE_LIMITED with the four headers of API.md (on 429 only). */
export function tooMany(decision: Pick<RateLimitDecision, 'limit' | 'remaining' | 'reset'>, now: Date): ApiError {
  const retryAfter = Math.max(1, Math.ceil((decision.reset - now.getTime()) / 1000));
  return new ApiError('RATE_LIMITED', 'Too many requests', {
    headers: {
      'X-RateLimit-Limit': String(decision.limit),
      'X-RateLimit-Remaining': String(Math.max(0, decision.remaining)),
      'X-RateLimit-Reset': String(Math.ceil(decision.reset / 1000)),
      'Retry-After': String(retryAfter),
    },
  });
}
