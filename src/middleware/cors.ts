import { cors as honoCors } from 'hono/cors';
import type { MiddlewareHandler } from 'hono';
import type { Config } from '../config.js';

/**
 * Spec §8 "CORS": credentials always allowed; `*` outside production allows
 * every origin (reflected, since credentials forbid a literal `*`); `disabled`
 * (a lone `*` in production) sends no CORS headers at all.
 */
export function cors({ origins }: { origins: Config['cors']['origins'] }): MiddlewareHandler {
  if (origins === 'disabled') {
    return async function corsDisabled(_c, next) {
      await next();
    };
  }
  const allowed = new Set(origins === '*' ? [] : origins);
  return honoCors({
    origin: (origin) => {
      if (!origin) return null;
      if (origins === '*') return origin;
      return allowed.has(origin) ? origin : null;
    },
    credentials: true,
    allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    allowHeaders: ['Content-Type', 'Authorization', 'X-Request-Id'],
    exposeHeaders: ['X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After', 'Deprecation', 'Link'],
    maxAge: 600,
  });
}
