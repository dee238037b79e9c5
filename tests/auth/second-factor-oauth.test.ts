import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus } from '../support/http.js';
import { completeWithTotp, enableTotp, type TwoFactorUser } from '../support/mfa.js';
import { signedInUser } from '../support/users.js';

/**
 * README "Multi-factor authentication": an OAuth sign-in of a user with
 * two-factor is held back like a password sign-in. The provider is a local
 * HTTP server standing in for GitHub's token and user endpoints (the
 * library's outbound requests to github.com are sent there); the library
 * and the database are real.
 */
describe('OAuth sign-in with two-factor enabled', () => {
  let t: TestApp;
  let provider: Server;
  let providerUrl: string;
  let user: Awaited<ReturnType<typeof signedInUser>>;
  let factor: TwoFactorUser;

  beforeAll(async () => {
    provider = createServer((request, response) => {
      response.setHeader('content-type', 'application/json');
      if (request.url?.startsWith('/login/oauth/access_token')) {
        response.end(JSON.stringify({ access_token: 'gho_test', token_type: 'bearer', scope: 'user:email' }));
      } else if (request.url === '/user') {
        response.end(JSON.stringify({ id: 4242, login: 'ada', name: 'Ada', email: user.email, avatar_url: null }));
      } else if (request.url === '/user/emails') {
        response.end(JSON.stringify([{ email: user.email, primary: true, verified: true }]));
      } else {
        response.statusCode = 404;
        response.end('{}');
      }
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
    const realFetch = globalThis.fetch;
    vi.stubGlobal('fetch', (input: RequestInfo | URL, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (url.host === 'github.com' || url.host === 'api.github.com')
        return realFetch(`${providerUrl}${url.pathname}${url.search}`, init);
      return realFetch(input, init);
    });
    t = await createTestApp({ env: { GITHUB_CLIENT_ID: 'github-id', GITHUB_CLIENT_SECRET: 'github-secret' } });
    user = await signedInUser(t);
    factor = await enableTotp(t, user.jar);
  });
  afterAll(async () => {
    vi.unstubAllGlobals();
    await t?.close();
    await new Promise((resolve) => provider?.close(resolve));
  });

  it('the callback redirects to its target told ?twoFactorRedirect=true, with no session; verify-totp completes it', async () => {
    const jar = new CookieJar();
    const start = await call(t, '/api/auth/sign-in/social', {
      body: { provider: 'github', callbackURL: '/app' },
      jar,
    });
    const { url } = await expectStatus<{ url: string }>(start, 200);
    const state = new URL(url).searchParams.get('state')!;
    const sessionsBefore = await t.database.withOwner((owner) =>
      owner.selectFrom('sessions').select('id').where('user_id', '=', user.id).execute(),
    );

    const callback = await call(t, `/api/auth/callback/github?code=test-code&state=${encodeURIComponent(state)}`, {
      jar,
    });
    expect(callback.status).toBe(302);
    const location = new URL(callback.headers.get('location')!, 'http://x');
    expect(location.pathname).toBe('/app');
    expect(location.searchParams.get('twoFactorRedirect')).toBe('true');
    for (const header of callback.headers.getSetCookie()) {
      const [name = '', value = ''] = header.split(';')[0]!.split('=');
      if (name.includes('session_token') || name.includes('session_data')) expect(value).toBe('');
    }
    expect(jar.get('gatehouse.session_token')).toBeUndefined();
    expect(jar.get('gatehouse.two_factor')).toBeDefined();
    const sessionsAfter = await t.database.withOwner((owner) =>
      owner.selectFrom('sessions').select('id').where('user_id', '=', user.id).execute(),
    );
    expect(sessionsAfter.length).toBe(sessionsBefore.length);
    expect(await expectStatus(await call(t, '/api/session', { jar }), 200)).toBeNull();
    expect((await call(t, '/api/auth/list-sessions', { jar })).status).toBe(401);

    await completeWithTotp(t, jar, factor.authenticator);
    expect(await expectStatus(await call(t, '/api/session', { jar }), 200)).toMatchObject({
      user: { id: user.id },
      session: { mfa: true },
    });
  });
});
