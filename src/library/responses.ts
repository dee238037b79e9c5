import type { Context } from 'hono';
import { type Auth, COOKIE_PREFIX } from '../auth/auth.js';
import type { Config } from '../shared/config.js';
import { ApiError } from '../shared/errors.js';
import type { AppEnv } from '../shared/types.js';
import { withoutTokens } from './answers.js';
import type { JsonObject } from './row.js';

/** A JSON answer with the library's status (unless given) and headers (its Set-Cookie included) and our body. */
export function reply(response: Response, body: unknown, status?: number): Response {
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  headers.set('content-type', 'application/json');
  return new Response(JSON.stringify(body), {
    status: status ?? response.status,
    statusText: status ? '' : response.statusText,
    headers,
  });
}

const FAILED_REGISTRATION = {
  code: 'FAILED_TO_VERIFY_REGISTRATION',
  message: 'The passkey registration could not be verified',
};

/** The `code` of a library answer's JSON body, if any. */
async function libraryCode(response: Response): Promise<unknown> {
  const body = await response
    .clone()
    .json()
    .catch(() => null);
  return body && typeof body === 'object' ? (body as { code?: unknown }).code : undefined;
}

/**
 * docs/api.md "Errors": one shape, `{ code, message }`. Most library errors carry
 * a code; the few that carry only a message get the one the library would
 * derive (upper snake case of it).
 */
function withErrorCode(response: Response, body: { code?: unknown; message?: unknown } | null): Response {
  if (!body || typeof body !== 'object' || typeof body.code === 'string' || typeof body.message !== 'string')
    return response;
  const code =
    body.message
      .toUpperCase()
      .replace(/[^A-Z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '') || `HTTP_${response.status}`;
  return reply(response, { code, message: body.message });
}

/** The library's answer as the service answers it: errors in the contract's shape, no session token in JSON. */
export function finish(response: Response, body: unknown): Response {
  if (body === undefined) return response;
  if (response.status >= 400) return withErrorCode(response, body as JsonObject);
  return reply(response, withoutTokens(body));
}

/**
 * The session token a library answer sets in the session cookie, when it
 * issued one (better-call's signed value `<token>.<signature>`, URI-encoded);
 * null when the answer sets none or expires it.
 */
export function issuedSessionToken(response: Response, config: Config): string | null {
  const name = `${config.auth.secureCookies ? '__Secure-' : ''}${COOKIE_PREFIX}.session_token=`;
  const header = response.headers.getSetCookie().findLast((cookie) => cookie.startsWith(name));
  const value = decodeURIComponent(header?.slice(name.length).split(';')[0] ?? '');
  const dot = value.lastIndexOf('.');
  return dot > 0 ? value.slice(0, dot) : null;
}

/** The library's answer to the forwarded request, and its JSON body (undefined when it has none). */
export async function forwardToLibrary(
  auth: Auth,
  c: Context<AppEnv>,
  request: Request,
): Promise<{ response: Response; body: unknown }> {
  const response = await auth.handler(request);
  // The passkey plugin answers 500 to any credential its verifier cannot
  // parse: a malformed registration is the client's error (the plugin logs the cause).
  if (response.status === 500 && (await libraryCode(response)) === 'FAILED_TO_VERIFY_REGISTRATION')
    return { response: reply(response, FAILED_REGISTRATION, 400), body: FAILED_REGISTRATION };
  // The library's own 5xx answers carry no contract body: ours does, with the
  // request id, and throwing rolls back an ambient transaction.
  if (response.status >= 500) {
    throw new ApiError('INTERNAL_ERROR', 'Internal server error', {
      cause: new Error(`auth library answered ${response.status} on ${c.req.path}`),
    });
  }
  if (response.status === 404 && !response.headers.get('content-type')?.includes('json'))
    throw new ApiError('NOT_FOUND', 'Not found');
  const isJson = response.headers.get('content-type')?.includes('json') ?? false;
  const body = isJson
    ? await response
        .clone()
        .json()
        .catch(() => undefined)
    : undefined;
  return { response, body };
}
