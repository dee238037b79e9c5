import type { Context, MiddlewareHandler, Next } from 'hono';
import { ApiError } from '../shared/errors.js';

export const MAX_BODY_BYTES = 1_048_576;

/** How much of a refused chunked body is read and thrown away before the 413, and for how long at most. */
export const REFUSED_BODY_DRAIN = { bytes: 8 * MAX_BODY_BYTES, ms: 2_000 } as const;

/**
 * docs/api.md "Bodies": 413 before any handler runs. An announced
 * Content-Length over the limit is refused up front, its body left unread; a
 * chunked body is counted as it streams and handed on buffered. The runtime's
 * HTTP parser never hands over more bytes than a Content-Length announces, so
 * a lying header cannot smuggle a larger body.
 *
 * A chunked body over the limit is read to its end and thrown away before
 * the answer (up to `REFUSED_BODY_DRAIN`, then cancelled): a stream left half
 * read after the answer makes workerd drop the connection under the client's
 * upload (ECONNRESET instead of the 413), and under `wrangler dev` the dev
 * proxy in front of the Worker then loses the next request too (its own
 * workaround drains only a body nobody has started reading). A refused
 * Content-Length body is left untouched for the same reason.
 *
 * On Node the rest of a body is never read after the answer: on a keep-alive
 * connection its bytes would be parsed as the next request, so the answer
 * closes the connection, and says so, so that a client's pool does not reuse
 * it (Node ends the socket after a response carrying `Connection: close`).
 */
export function bodyLimit({
  maxSize = MAX_BODY_BYTES,
  drain = REFUSED_BODY_DRAIN,
}: {
  maxSize?: number;
  drain?: { bytes: number; ms: number };
} = {}): MiddlewareHandler {
  const tooLarge = () =>
    new ApiError('PAYLOAD_TOO_LARGE', `Request body exceeds ${maxSize} bytes`, { headers: { Connection: 'close' } });
  // A read without a body passes straight on, with no async step (no promise) of its own.
  return function bodyLimit(c, next) {
    const body = readWithoutBody(c) ? null : c.req.raw.body;
    return body ? limited(c, body, next) : next();
  };
  async function limited(c: Context, body: ReadableStream<Uint8Array>, next: Next): Promise<void> {
    const length = c.req.header('content-length');
    if (length !== undefined && !c.req.header('transfer-encoding')) {
      if (Number.parseInt(length, 10) > maxSize) throw tooLarge();
      return next();
    }
    const reader = body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxSize) {
        await discardRest(reader, drain);
        throw tooLarge();
      }
      chunks.push(value);
    }
    const buffer = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      buffer.set(chunk, offset);
      offset += chunk.byteLength;
    }
    c.req.raw = new Request(c.req.raw, { body: buffer });
    return next();
  }
}

/** Reads and drops the rest of a body until it ends, `bytes` have come or `ms` have passed; then cancels what is left. */
async function discardRest(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  { bytes, ms }: { bytes: number; ms: number },
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<'expired'>((resolve) => {
    timer = setTimeout(() => resolve('expired'), ms);
  });
  let read = 0;
  try {
    while (read <= bytes) {
      const step = await Promise.race([reader.read(), expired]);
      if (step === 'expired' || step.done) break;
      read += step.value.byteLength;
    }
  } catch {
    // the client went away: nothing left to read
  } finally {
    clearTimeout(timer);
  }
  await reader.cancel().catch(() => {});
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
 * docs/api.md "Conventions": a JSON route given another content type answers 415.
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
