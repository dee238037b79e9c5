import type { Context, MiddlewareHandler } from 'hono';
import type { ApiKeyResolver } from '../auth/api-key-auth.js';
import { COOKIE_PREFIX } from '../auth/auth.js';
import { mayWriteSessionState } from '../auth/session-state-cache.js';
import { ApiError } from '../shared/errors.js';
import type { AppEnv, EnrichedSession, SessionResolver } from '../shared/types.js';

/**
 * docs/api.md "Access": the session and its permissions are resolved once per request.
 * This installs a memoized loader instead of resolving eagerly, so public
 * routes (and requests the rate limiter refused) never touch the session store.
 */
export function session({ resolve }: { resolve: SessionResolver }): MiddlewareHandler<AppEnv> {
  // Not async: nothing runs after the handler, so the chain's own promise is handed back as it is.
  return function sessionMiddleware(c, next) {
    let pending: Promise<EnrichedSession | null> | undefined;
    c.set('session', null);
    c.set('loadSession', () => {
      pending ??= resolve(c).then((resolved) => {
        c.set('session', resolved);
        return resolved;
      });
      return pending;
    });
    return next();
  };
}

/** Clears the session-state cache after every request that may have written what it holds (auth/session-state-cache.ts). */
export function clearSessionStates({ cache }: { cache: { clear(): void } }): MiddlewareHandler<AppEnv> {
  return function clearSessionStates(c, next) {
    // Method and path are fixed for the request: one that cannot write passes straight on, with no async step of its own.
    if (!mayWriteSessionState(c.req.method, c.req.path)) return next();
    return cleared(next);
  };
  async function cleared(next: () => Promise<void>): Promise<void> {
    try {
      await next();
    } finally {
      cache.clear();
    }
  }
}

/** `Bearer sk_live_…` from the Authorization header, if the request presents one. */
export function presentedKey(c: Context<AppEnv>): string | null {
  const match = /^Bearer\s+(sk_live_\S*)$/i.exec(c.req.header('authorization') ?? '');
  return match?.[1] ?? null;
}

function hasSessionCookie(c: Context<AppEnv>): boolean {
  return (c.req.header('cookie') ?? '').includes(`${COOKIE_PREFIX}.session_token=`);
}

/**
 * Which credential a request authenticates with: a key when one is presented
 * and keys are on (`key` given), a session cookie otherwise; both at once is
 * refused. Keys never authenticate the library's routes (docs/api.md "API keys").
 */
export function credentialResolver({
  cookie,
  key,
}: {
  cookie: SessionResolver;
  key: ApiKeyResolver | null;
}): SessionResolver {
  return async (c) => {
    // docs/scim.md "Tokens": a directory's token authenticates nothing outside /api/scim/v2, not even beside a cookie.
    if (/^Bearer\s+scim_/i.test(c.req.header('authorization') ?? ''))
      throw new ApiError('UNAUTHORIZED', 'A SCIM token is valid under /api/scim/v2 only');
    const presented = key && !c.req.path.startsWith('/api/auth/') ? presentedKey(c) : null;
    if (!key || !presented) return cookie(c);
    if (hasSessionCookie(c)) throw new ApiError('VALIDATION_ERROR', 'Send a session cookie or an API key, not both');
    return key(presented, c.get('logger'));
  };
}
