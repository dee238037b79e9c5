import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../shared/logger.js';
import { runInRequestScope } from '../shared/request-scope.js';
import type { AppEnv } from '../shared/types.js';

const HEADER = 'X-Request-Id';
/** A client's id kept as it came: word characters, `-` and `=`, 1 to 128 of them. */
const WELL_FORMED = /^[\w\-=]{1,128}$/;

/**
 * `X-Request-Id` on every response: the client's when well-formed (word
 * characters, `-` and `=`, at most 128), a fresh UUID otherwise.
 *
 * The header is prepared before the handler runs (hono's own request-id
 * middleware does the same, in a second async step per request), which a
 * handler returning a Response of its own (the auth library's answers,
 * forwarded as they are) drops; so the header is set again on whatever
 * response comes back, on a copy when that response's headers are immutable.
 */
export function requestId(): MiddlewareHandler<AppEnv> {
  return async function requestId(c, next) {
    const sent = c.req.header(HEADER);
    const id = sent !== undefined && WELL_FORMED.test(sent) ? sent : crypto.randomUUID();
    c.set('requestId', id);
    c.header(HEADER, id);
    await next();
    if (c.res.headers.get(HEADER) === id) return;
    try {
      c.res.headers.set(HEADER, id);
    } catch {
      c.header(HEADER, id);
    }
  };
}

/**
 * A logger carrying the request id for everything downstream, and one access
 * line per request. The query string is never logged (it carries tokens:
 * verification and magic links).
 */
export function accessLog({
  logger,
  now = () => performance.now(),
}: {
  logger: Logger;
  now?: () => number;
}): MiddlewareHandler<AppEnv> {
  return async function accessLog(c, next) {
    const started = now();
    const requestLogger = logger.child({ requestId: c.get('requestId') });
    c.set('logger', requestLogger);
    try {
      await runInRequestScope({ requestId: c.get('requestId'), apiKeyId: null }, next);
    } catch (thrown) {
      // hono hands only Error instances to onError; anything else thrown would
      // reach the adapter raw (no contract body, no headers, no log line).
      throw thrown instanceof Error ? thrown : new Error(`Non-error thrown: ${String(thrown)}`);
    }
    requestLogger.info('request', {
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      durationMs: Math.round((now() - started) * 100) / 100,
    });
  };
}
