import type { Context, MiddlewareHandler } from 'hono';
import type { AppEnv, EnrichedSession } from '../types.js';

export type SessionResolver = (c: Context<AppEnv>) => Promise<EnrichedSession | null>;

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
