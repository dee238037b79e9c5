import type { Context, MiddlewareHandler, Next } from 'hono';
import { ApiError, type ErrorDetail } from '../shared/errors.js';
import { readWithoutBody } from './body-limit.js';

/** Deeper than any body the service or the auth library takes (organization metadata included). */
export const MAX_JSON_DEPTH = 32;

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * What every JSON body must be before any handler (ours or the auth
 * library's) sees it: valid UTF-8 (a lossy decode would store U+FFFD in
 * place of what the client sent), well-formed, at most MAX_JSON_DEPTH deep
 * (the library serializes what it is given recursively: a deep document
 * overflowed its stack, 500), and free of NUL characters, which PostgreSQL
 * text cannot hold (22021: every route answered 500). Anything else:
 * 400 VALIDATION_ERROR before a single query runs.
 *
 * Runs after the body limit, so it never reads more than 1 MiB. The bytes are
 * handed on unchanged as a fresh request body, for the routes that forward
 * the raw request to the library.
 */
export function jsonInput({ maxDepth = MAX_JSON_DEPTH }: { maxDepth?: number } = {}): MiddlewareHandler {
  // Requests that are not JSON pass straight on, with no async step (no promise) of their own.
  return function jsonInput(c, next) {
    if (readWithoutBody(c) || !JSON_TYPE.test(c.req.header('content-type') ?? '')) return next();
    return checked(c, next);
  };
  async function checked(c: Context, next: Next): Promise<void> {
    const raw = c.req.raw;
    if (!raw.body) return next();
    const bytes = new Uint8Array(await raw.arrayBuffer());
    c.req.raw = new Request(raw, { body: bytes });
    if (bytes.byteLength === 0) return next();
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
    } catch {
      throw invalid([{ path: '', message: 'body is not valid UTF-8' }]);
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw invalid([{ path: '', message: 'malformed JSON' }]);
    }
    const problem = inspect(value, maxDepth);
    if (problem) throw invalid([problem]);
    return next();
  }
}

function invalid(details: ErrorDetail[]): ApiError {
  return new ApiError('VALIDATION_ERROR', 'Request validation failed', { details });
}

/** The first NUL or over-deep spot, walked without recursion (a hostile document may be 500,000 levels deep). */
function inspect(root: unknown, maxDepth: number): ErrorDetail | null {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: root, path: '', depth: 0 }];
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return { path, message: 'must not contain NUL characters' };
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= maxDepth) return { path, message: `nested deeper than ${maxDepth} levels` };
    const entries: [string, unknown][] = Array.isArray(value)
      ? value.map((item, index) => [String(index), item])
      : Object.entries(value);
    for (const [key, inner] of entries) {
      const innerPath = path ? `${path}.${key}` : key;
      if (key.includes('\u0000'))
        return { path: innerPath.replaceAll('\u0000', '\\u0000'), message: 'keys must not contain NUL characters' };
      stack.push({ value: inner, path: innerPath, depth: depth + 1 });
    }
  }
  return null;
}
