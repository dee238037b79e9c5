import type { MiddlewareHandler } from 'hono';
import { ApiError } from '../shared/errors.js';

export interface CsrfOptions {
  /** Origins allowed to make cookie-bearing state changes: APP_URL's, AUTH_URL's and CORS_ORIGIN's explicit entries (src/app.ts). */
  trustedOrigins: readonly string[];
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const AUTH_PATH = '/api/auth/';
/**
 * docs/sso.md "Sign-in": a SAML identity provider's page posts its response
 * to the connection's assertion consumer service, from the IdP's origin. The
 * one route exempted: it reads no session (its request reaches the auth
 * library without cookies, src/library/request.ts) and acts only on a signed
 * response, so a forged post has nothing of the browser's to abuse.
 */
export const SAML_ACS_PATH = /^\/api\/auth\/sso\/saml2\/callback\/[^/]+$/;

/** `scheme://host[:port]`, lower-case, no path or trailing slash; null when the value is not an http(s) origin. */
export function originOf(value: string): string | null {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin.toLowerCase() : null;
  } catch {
    return null;
  }
}

/**
 * docs/design.md "Decisions": a state change carried by the session cookie is accepted
 * only from the app's own origins, on every route (the service's and the
 * library's alike), instead of relying on SameSite=Lax alone (which lets a
 * same-site page, or a top-level POST in some browsers, through).
 *
 * For a method other than GET, HEAD or OPTIONS with a Cookie header:
 * - `Origin` present: it must be a trusted origin; `null` (a sandboxed frame,
 *   a redirect chain, a file) is refused.
 * - `Origin` absent, `Sec-Fetch-Site` present: only `same-origin` and `none`
 *   (a user-typed navigation) pass. `same-site` is refused: a sibling
 *   subdomain running the app sends Origin, which the first rule checks, so
 *   a same-site request without one is not the app.
 * - Neither: a client that is not a browser (curl, server to server), which
 *   no forged page can be; browsers send Origin on every non-GET request.
 *
 * Requests without cookies (API keys) are not this check's business: there is
 * no ambient credential to abuse. The one exception is the auth library's
 * routes, which refuse an untrusted Origin whatever the cookies (docs/api.md
 * "Sign-in": APP_URL is the trusted origin): that refusal is made here, before anything
 * reads the body, so a form-encoded sign-in from a foreign page is a 403 like
 * a JSON one, not a content-type error.
 */
export function csrf({ trustedOrigins }: CsrfOptions): MiddlewareHandler {
  const trusted = new Set(
    trustedOrigins.map((origin) => originOf(origin)).filter((origin): origin is string => origin !== null),
  );
  // Not async: a plain function adds no promise of its own per request (hono awaits what it returns, and catches what it throws).
  return function csrf(c, next) {
    if (SAFE_METHODS.has(c.req.method)) return next();
    if (c.req.method === 'POST' && SAML_ACS_PATH.test(c.req.path)) return next();
    const origin = c.req.header('origin');
    const cookie = c.req.header('cookie');
    if (!cookie && (origin === undefined || !c.req.path.startsWith(AUTH_PATH))) return next();
    if (origin !== undefined) {
      // Compared as sent (an Origin header is always `scheme://host[:port]`): no parsing to be fooled.
      if (!trusted.has(origin.trim().toLowerCase())) throw refused();
      return next();
    }
    const site = c.req.header('sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') throw refused();
    return next();
  };
}

/** docs/api.md "Errors", 403 FORBIDDEN: the request's origin, like a platform role, does not match what the route allows. */
function refused(): ApiError {
  return new ApiError('FORBIDDEN', 'Cross-site request refused');
}
