import type { Context, MiddlewareHandler } from 'hono';
import type { ScimTokenResolver } from '../auth/scim-auth.js';
import { scimTokenDigest } from '../auth/scim-token-material.js';
import type { RateLimitStore, RateLimitTier } from '../platform/rate-limit-store.js';
import { clientIpFromForwardedFor, rateLimitIdentity } from '../shared/client-address.js';
import type { Config } from '../shared/config.js';
import { ApiError, describeError, tooMany } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { isScimPath, SCIM_MEDIA_TYPE } from '../shared/scim-error.js';
import type { AppEnv, Clock, ScimCaller } from '../shared/types.js';
import { scimRateIdentity } from './rate-limit-tiers.js';
import { renderError } from './render-error.js';

export { ScimError, type ScimErrorType } from '../scim/errors.js';
export { SCIM_MEDIA_TYPE, SCIM_PREFIX } from '../shared/scim-error.js';

/** What the door hands to SCIM's router with the request (the router answers with a context of its own). */
interface Handover {
  requestId: string;
  logger: Logger;
  clientIp: string;
  scim: ScimCaller;
}
const handovers = new WeakMap<Request, Handover>();

/** The router that serves /api/scim/v2 behind the door: `fetch` is all the door needs of it. */
export interface ScimService {
  fetch: (request: Request, env?: unknown, executionCtx?: never) => Response | Promise<Response>;
}

/** `Bearer scim_…` from the Authorization header, if the request presents one. */
export function presentedScimToken(c: Context<AppEnv>): string | null {
  return /^Bearer\s+(scim_\S*)$/i.exec(c.req.header('authorization') ?? '')?.[1] ?? null;
}

// Rendered in SCIM's shape under /api/scim/v2 (render-error.ts), with the header RFC 6750 §3 asks for.
const refused = () =>
  new ApiError('UNAUTHORIZED', 'A valid SCIM bearer token is required', {
    headers: { 'WWW-Authenticate': 'Bearer realm="scim"' },
  });

/**
 * SCIM's door (docs/scim.md): every request under /api/scim/v2 is answered
 * here, by SCIM's own router, and goes no further down the service's chain:
 * no session is ever read for it, and the guard, the session resolver and
 * the global rate-limit tier never see it. It needs `Authorization: Bearer
 * scim_…` with a token in force (else 401 in SCIM's shape), and acts only in
 * that token's organization. The SCIM tier (RATE_LIMIT_SCIM_*) counts the
 * presented token, or the address without one, before any lookup; when the
 * store does not answer it fails open with an error log, as the global tier.
 * Every answer, errors included, is `Cache-Control: no-store`.
 */
export function scimDoor({
  service,
  resolve,
  config,
  store,
  clientIp = (c) => clientIpFromForwardedFor(c.req.header('x-forwarded-for'), config.trustedProxyHops),
  clock = () => new Date(),
}: {
  service: ScimService;
  resolve: ScimTokenResolver;
  config: Config['rateLimit'];
  store: RateLimitStore;
  clientIp?: (c: Context<AppEnv>) => string | null | undefined;
  clock?: Clock;
}): MiddlewareHandler<AppEnv> {
  const tier: RateLimitTier = { name: 'scim', limit: config.scim.limit, window: config.scim.ttl };

  const limit = async (c: Context<AppEnv>, presented: string | null) => {
    const identity = scimRateIdentity(
      presented ? scimTokenDigest(presented) : null,
      rateLimitIdentity(c.get('clientIp'), config.ipv6Prefix),
    );
    const decision = await store.limit(tier, identity).catch((error) => {
      c.get('logger')?.error('rate_limit.store_failed', { tier: 'scim', failOpen: true, error: describeError(error) });
      return null;
    });
    if (decision && !decision.success) throw tooMany(decision, clock());
  };

  return async function scimDoor(c, next) {
    if (!isScimPath(c.req.path)) return next();
    const response = await serve(c).catch((error: unknown) => renderError(error, c));
    // People, their addresses and groups, read with a token: no cache keeps a copy (RFC 9111 section 5.2.2.5).
    response.headers.set('Cache-Control', 'no-store');
    return response;
  };

  async function serve(c: Context<AppEnv>): Promise<Response> {
    c.set('clientIp', clientIp(c) ?? 'unknown');
    const presented = presentedScimToken(c);
    if (config.enabled && c.req.method !== 'OPTIONS') await limit(c, presented);
    const caller = presented ? await resolve(presented, c.get('logger')) : null;
    if (!caller) throw refused();
    const request = c.req.raw;
    handovers.set(request, {
      requestId: c.get('requestId'),
      logger: c.get('logger'),
      clientIp: c.get('clientIp'),
      scim: caller,
    });
    return service.fetch(request, c.env);
  }
}

/**
 * The first middleware of SCIM's router: the request's id, logger, address
 * and caller, as the door found them. A request that did not come through
 * the door has none, and is refused.
 */
export function scimHandover(): MiddlewareHandler<AppEnv> {
  return function scimHandover(c, next) {
    const handover = handovers.get(c.req.raw);
    if (!handover) throw refused();
    c.set('requestId', handover.requestId);
    c.set('logger', handover.logger);
    c.set('clientIp', handover.clientIp);
    c.set('scim', handover.scim);
    c.set('tenantId', handover.scim.tenantId);
    return next();
  };
}

/**
 * The global middleware the door replaces under /api/scim/v2 (the global
 * rate-limit tier: SCIM's door counts its own).
 */
export function outsideScim(middleware: MiddlewareHandler<AppEnv>): MiddlewareHandler<AppEnv> {
  return function outsideScim(c, next) {
    return isScimPath(c.req.path) ? next() : middleware(c, next);
  };
}

/** The caller of a route under /api/scim/v2: its token, organization and the token's creator, as the door resolved them. */
export function scimOf(c: Context<AppEnv>): ScimCaller {
  const scim = c.get('scim');
  if (!scim) throw refused();
  return scim;
}

/** A SCIM answer (RFC 7644 §3.1): JSON as `application/scim+json`, with the headers given (`ETag`, `Location`). */
export function scimJson(
  c: Context<AppEnv>,
  body: unknown,
  status: 200 | 201 = 200,
  headers: Record<string, string> = {},
): Response {
  return c.body(JSON.stringify(body), status, { ...headers, 'Content-Type': SCIM_MEDIA_TYPE });
}

/** 204 No Content (a DELETE, RFC 7644 §3.6). */
export function scimNoContent(c: Context<AppEnv>): Response {
  return c.body(null, 204);
}
