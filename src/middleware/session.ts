import type { MiddlewareHandler } from 'hono';
import { mayWriteSessionState } from '../auth/session-state-cache.js';
import type { AppEnv, EnrichedSession, SessionResolver } from '../types.js';

/**
 * Spec §4: the session and its permissions are resolved once per request.
 * This installs a memoized loader instead of resolving eagerly, so public
 * routes (and requests the rate limiter refused) never touch the session store.
 */
export function session({ resolve }: { resolve: SessionResolver }): MiddlewareHandler<AppEnv> {
  return async function sessionMiddleware(c, next) {
    let pending: Promise<EnrichedSession | null> | undefined;
    c.set('session', null);
    c.set('loadSession', () => {
      pending ??= resolve(c).then((resolved) => {
        c.set('session', resolved);
        return resolved;
      });
      return pending;
    });
    await next();
  };
}

/** Clears the session-state cache after every request that may have written what it holds (auth/session-state-cache.ts). */
export function clearSessionStates({ cache }: { cache: { clear(): void } }): MiddlewareHandler<AppEnv> {
  return async function clearSessionStates(c, next) {
    try {
      await next();
    } finally {
      if (mayWriteSessionState(c.req.method, c.req.path)) cache.clear();
    }
  };
}
