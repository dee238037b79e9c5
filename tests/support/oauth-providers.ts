import { vi } from 'vitest';
import type { TestApp } from './app.js';
import { type CookieJar, call } from './http.js';

/**
 * GitHub and Google as the auth library talks to them, answered in-process:
 * the library's own outbound requests (token exchange, GitHub's /user and
 * /user/emails, Google's ID token) reach this stub instead of the network;
 * the library, the service and the database are real. Each authorization
 * code names one identity the test registered, so one stub serves an
 * attacker and a victim at once.
 */
export interface ProviderIdentity {
  provider: 'github' | 'google';
  /** The provider's account id (GitHub's numeric id, Google's `sub`). */
  id: string;
  email: string;
  /** What the provider asserts about `email`. */
  verified: boolean;
  name?: string;
}

/** From a random base: test files in other workers may share one PostgreSQL database. */
let providerIds = Math.floor(Math.random() * 1e12);
/** A provider-side account id no other test has used (the stub answers whatever identity it is given). */
export function nextProviderId(): string {
  providerIds += 1;
  return String(providerIds);
}

export interface ProviderStub {
  /** Registers an identity; the code to complete a sign-in as it. */
  identity(identity: ProviderIdentity): string;
  restore(): void;
}

export const OAUTH_ENV = {
  GITHUB_CLIENT_ID: 'github-id',
  GITHUB_CLIENT_SECRET: 'github-secret',
  GOOGLE_CLIENT_ID: 'google-id',
  GOOGLE_CLIENT_SECRET: 'google-secret',
} as const;

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function stubProviders(): ProviderStub {
  const identities = new Map<string, ProviderIdentity>();
  const byToken = (request: Request) =>
    identities.get((request.headers.get('authorization') ?? '').replace(/^Bearer\s+/i, '').replace(/^token-/, ''));

  const answer = async (url: URL, request: Request): Promise<Response> => {
    if (url.host === 'github.com' && url.pathname === '/login/oauth/access_token') {
      const code = new URLSearchParams(await request.text()).get('code') ?? '';
      if (!identities.has(code)) return json({ error: 'bad_verification_code' });
      return json({ access_token: `token-${code}`, token_type: 'bearer', scope: 'read:user,user:email' });
    }
    if (url.host === 'api.github.com' && url.pathname === '/user') {
      const who = byToken(request);
      if (!who) return json({ message: 'Bad credentials' }, 401);
      // A private address, as most GitHub users keep it: the library reads /user/emails.
      return json({ id: Number(who.id), login: `login-${who.id}`, name: who.name ?? 'Someone', email: null });
    }
    if (url.host === 'api.github.com' && url.pathname === '/user/emails') {
      const who = byToken(request);
      if (!who) return json({ message: 'Bad credentials' }, 401);
      return json([{ email: who.email, primary: true, verified: who.verified, visibility: 'private' }]);
    }
    if (url.host === 'oauth2.googleapis.com' && url.pathname === '/token') {
      const code = new URLSearchParams(await request.text()).get('code') ?? '';
      const who = identities.get(code);
      if (!who) return json({ error: 'invalid_grant' }, 400);
      const now = Math.floor(Date.now() / 1000);
      const claims = {
        iss: 'https://accounts.google.com',
        aud: OAUTH_ENV.GOOGLE_CLIENT_ID,
        sub: who.id,
        email: who.email,
        email_verified: who.verified,
        name: who.name ?? 'Someone',
        iat: now,
        exp: now + 3600,
      };
      const idToken = `${base64url({ alg: 'RS256', typ: 'JWT' })}.${base64url(claims)}.c2lnbmF0dXJl`;
      return json({ access_token: `token-${code}`, id_token: idToken, token_type: 'Bearer', expires_in: 3600 });
    }
    return json({ message: 'not stubbed' }, 404);
  };

  const realFetch = globalThis.fetch;
  vi.stubGlobal('fetch', async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    if (['github.com', 'api.github.com', 'oauth2.googleapis.com'].includes(url.host)) return answer(url, request);
    return realFetch(input, init);
  });

  let count = 0;
  return {
    identity(identity) {
      count += 1;
      const code = `code-${count}-${crypto.randomUUID().slice(0, 8)}`;
      identities.set(code, identity);
      return code;
    },
    restore: () => vi.unstubAllGlobals(),
  };
}

export interface OAuthOptions {
  jar: CookieJar;
  /** POST /api/auth/link-social from the jar's session instead of a sign-in. */
  link?: boolean;
  callbackURL?: string;
  errorCallbackURL?: string;
  ip?: string;
  userAgent?: string;
}

/**
 * A browser's round trip: the sign-in (or link) call, then the provider's
 * redirect back to the callback with the identity's code. The callback's answer.
 */
export async function completeOAuth(
  t: TestApp,
  identity: ProviderIdentity,
  stub: ProviderStub,
  { jar, link = false, callbackURL = '/app', errorCallbackURL, ip, userAgent }: OAuthOptions,
): Promise<Response> {
  const headers = userAgent ? { 'user-agent': userAgent } : undefined;
  const start = await call(t, link ? '/api/auth/link-social' : '/api/auth/sign-in/social', {
    body: { provider: identity.provider, callbackURL, ...(errorCallbackURL ? { errorCallbackURL } : {}) },
    jar,
    ip,
    headers,
  });
  if (start.status !== 200)
    throw new Error(`${link ? 'link-social' : 'sign-in/social'}: ${start.status} ${await start.text()}`);
  const { url } = (await start.json()) as { url: string };
  const state = new URL(url).searchParams.get('state');
  if (!state) throw new Error(`no state in ${url}`);
  const code = stub.identity(identity);
  return call(t, `/api/auth/callback/${identity.provider}?code=${code}&state=${encodeURIComponent(state)}`, {
    jar,
    ip,
    headers,
  });
}

/** Where a callback sent the browser: its path and its `error`, if any. */
export function redirectOf(response: Response): { url: URL; error: string | null } {
  const location = response.headers.get('location');
  if (response.status !== 302 || !location) throw new Error(`not a redirect: ${response.status}`);
  const url = new URL(location, 'http://relative.invalid');
  return { url, error: url.searchParams.get('error') };
}
