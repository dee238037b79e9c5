import type { MiddlewareHandler } from 'hono';
import { cors as honoCors } from 'hono/cors';
import type { Config } from '../shared/config.js';

/**
 * docs/api.md "CORS": credentials always allowed; `*` outside production allows
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
  const library = honoCors({
    origin: (origin) => {
      if (!origin) return null;
      if (origins === '*') return origin;
      return allowed.has(origin) ? origin : null;
    },
    credentials: true,
    allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    allowHeaders: ['Content-Type', 'Authorization', 'X-Request-Id'],
    exposeHeaders: [
      'X-Request-Id',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'Retry-After',
      'Deprecation',
      'Link',
    ],
    maxAge: 600,
  });
  // A request without Origin is not a CORS request: no Access-Control header
  // applies to it, only `Vary: Origin` (the answer to one with Origin would
  // differ). hono's cors touches the response before the handler runs, which
  // on Node turns every answer into a full web Response built twice; reads
  // that no browser sent cross-origin skip that.
  return async function cors(c, next) {
    if (c.req.method === 'OPTIONS' || c.req.header('origin') !== undefined) return library(c, next);
    await next();
    try {
      c.res.headers.append('Vary', 'Origin');
    } catch {
      // An immutable response (one fetched from elsewhere): hono copies it.
      c.header('Vary', 'Origin', { append: true });
    }
  };
}
