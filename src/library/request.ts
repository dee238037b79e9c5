import type { Context } from 'hono';
import { COOKIE_PREFIX } from '../auth/auth.js';
import type { RateLimitDecision, RateLimitStore, RateLimitTier } from '../platform/rate-limit-store.js';
import type { Config } from '../shared/config.js';
import { ApiError, tooMany } from '../shared/errors.js';
import type { AppEnv, Clock } from '../shared/types.js';
import type { LibraryInput } from './input.js';
import type { LibraryRoute } from './row.js';

/**
 * The request the library gets: the route's own path (whatever spelling
 * matched), the validated query and body as the service understood them, and
 * no cookie cache unless asked, so the library reads the session, its user
 * and its active organization from the database, exactly as the service's
 * resolver did (a replayed cookie cache cannot make it act elsewhere), and
 * the client address the service resolved.
 */
export async function forwardedRequest(
  c: Context<AppEnv>,
  route: LibraryRoute,
  input: LibraryInput,
  { keepCookieCache, config }: { keepCookieCache: boolean; config: Config },
): Promise<Request> {
  const raw = c.req.raw;
  const url = new URL(raw.url);
  url.pathname = `/api/auth${route.path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(c.req.param(name) ?? ''))}`;
  if (route.query || route.organization === 'query') url.search = new URLSearchParams(input.query).toString();
  const headers = new Headers(raw.headers);
  headers.delete('content-length');
  // The library reads the client's address from X-Forwarded-For's first entry
  // (sessions' ip_address, security notices): hand it the one address the
  // service resolved behind TRUSTED_PROXY_HOPS, never what the client wrote.
  const clientIp = c.get('clientIp');
  // ('unknown' when the entry could not tell: then the library sees none.)
  if (clientIp && /^[\da-f.:]+$/i.test(clientIp)) headers.set('x-forwarded-for', clientIp);
  else headers.delete('x-forwarded-for');
  // A form another site posted acts with no credential of the browser's (src/library/row.ts `foreignForm`).
  if (route.foreignForm) headers.delete('cookie');
  else if (!keepCookieCache) {
    const cookie = withoutCookieCache(headers.get('cookie'), config);
    if (cookie === null) headers.delete('cookie');
    else headers.set('cookie', cookie);
  }
  let body: BodyInit | null = null;
  if (route.method === 'POST') {
    if (input.body && route.foreignForm) {
      body = new URLSearchParams(input.body as Record<string, string>).toString();
      headers.set('content-type', 'application/x-www-form-urlencoded');
    } else if (input.body) {
      body = JSON.stringify(input.body);
      headers.set('content-type', 'application/json');
    } else if (raw.body) {
      // A listener hands every POST a body stream, an empty one included: an
      // empty body stays none, so the library does not ask it for a Content-Type.
      const bytes = await raw.arrayBuffer();
      if (bytes.byteLength > 0) body = bytes;
    }
  }
  return new Request(url, { method: route.method, headers, body });
}

function withoutCookieCache(cookie: string | null, config: Config): string | null {
  if (!cookie) return null;
  const name = `${config.auth.secureCookies ? '__Secure-' : ''}${COOKIE_PREFIX}.session_data`;
  // The cache may be split in chunks (`session_data.0`, `.1`, ...).
  const kept = cookie
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part !== '' && !part.startsWith(`${name}=`) && !part.startsWith(`${name}.`));
  return kept.length > 0 ? kept.join('; ') : null;
}

/**
 * Invitations send mail, so each inviter and each
 * organization has a budget of them per hour (a resend counts too), kept in
 * the rate-limit store so every instance shares it. 429 with the usual headers.
 */
export const INVITATION_BUDGET = { perUser: 20, perOrganization: 50, windowSeconds: 3600 } as const;

export async function spendInvitationBudget(
  store: RateLimitStore,
  clock: Clock,
  userId: string,
  organizationId: string,
): Promise<void> {
  const tiers: [RateLimitTier, string][] = [
    [
      { name: 'invitations', limit: INVITATION_BUDGET.perUser, window: INVITATION_BUDGET.windowSeconds },
      `user:${userId}`,
    ],
    [
      { name: 'invitations', limit: INVITATION_BUDGET.perOrganization, window: INVITATION_BUDGET.windowSeconds },
      `org:${organizationId}`,
    ],
  ];
  for (const [tier, identity] of tiers) {
    let decision: RateLimitDecision;
    try {
      decision = await store.limit(tier, identity);
    } catch (error) {
      // Like the auth tier: no mail budget, no mail.
      throw new ApiError('SERVICE_UNAVAILABLE', 'Rate limiting is unavailable; try again shortly', { cause: error });
    }
    if (!decision.success) throw tooMany(decision, clock());
  }
}
