import type { MiddlewareHandler } from 'hono';
import { currentRequestScope } from '../shared/request-scope.js';
import type { AppEnv } from '../shared/types.js';

/**
 * After a request whose writes queued webhook deliveries, starts sending
 * them in the background (Workers: within the request's `waitUntil`, on its
 * connection). Nothing depends on it: what it does not finish, the cron
 * trigger sends. The answer is not held for it.
 */
export function deliverAfterResponse(
  deliver: () => Promise<unknown>,
  background: (task: Promise<unknown>) => void,
): MiddlewareHandler<AppEnv> {
  return async function deliverAfterResponse(_c, next) {
    await next();
    if (currentRequestScope()?.webhooksQueued) background(deliver());
  };
}
