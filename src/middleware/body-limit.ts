import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit as honoBodyLimit } from 'hono/body-limit';
import { ApiError } from '../errors.js';

export const MAX_BODY_BYTES = 1_048_576;

/**
 * Spec §8 "Other limits": 413 before any handler runs. hono's bodyLimit checks
 * an announced Content-Length up front and counts a chunked body as it
 * streams; the runtime's HTTP parser never hands over more bytes than a
 * Content-Length announces, so a lying header cannot smuggle a larger body.
 */
export function bodyLimit({ maxSize = MAX_BODY_BYTES }: { maxSize?: number } = {}): MiddlewareHandler {
  const limit = honoBodyLimit({
    maxSize,
    // The rest of the body is never read: on a keep-alive connection its bytes
    // would be parsed as the next request, so the answer closes the
    // connection, and says so, so that a client's pool does not reuse it
    // (Node ends the socket after a response carrying `Connection: close`).
    onError: () => {
      throw new ApiError('PAYLOAD_TOO_LARGE', `Request body exceeds ${maxSize} bytes`, {
        headers: { Connection: 'close' },
      });
    },
  });
  return async function bodyLimit(c, next) {
    if (readWithoutBody(c)) return next();
    return limit(c, next);
  };
}

/**
 * A GET or HEAD without Content-Length or Transfer-Encoding has no body (RFC
 * 9112 §6.3). Middleware asks this before touching `c.req.raw.body`, which
 * makes the Node adapter build a whole web Request (and its AbortSignal) for
 * every read. Other methods always count as having one: a web Request built
 * in-process carries a body without announcing its length.
 */
export function readWithoutBody(c: Context): boolean {
  const method = c.req.method;
  return (
    (method === 'GET' || method === 'HEAD') && !c.req.header('content-length') && !c.req.header('transfer-encoding')
  );
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * API.md "Conventions": a JSON route given another content type answers 415.
 * A request with a body must say it is JSON; one without a body passes.
 */
export function requireJson(): MiddlewareHandler {
  return async function requireJson(c, next) {
    const method = c.req.method;
    if (method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS' && hasBody(c.req.raw)) {
      const type = c.req.header('content-type') ?? '';
      if (!JSON_TYPE.test(type)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
    }
    await next();
  };
}

function hasBody(request: Request): boolean {
  if (request.headers.has('transfer-encoding')) return true;
  const length = request.headers.get('content-length');
  if (length !== null) return length.trim() !== '0';
  return request.body !== null;
}
