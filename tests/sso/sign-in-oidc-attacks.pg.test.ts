import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeTxtResolver } from '../../src/platform/dns-txt.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { CookieJar, call, expectStatus } from '../support/http.js';
import { createFakeIdp, type FakeIdp, type FakeSigning } from '../support/oidc-provider.js';
import { createOrganization, uniqueSlug } from '../support/orgs.js';
import { claimDomain, errorOf, sessionOf, userRow } from '../support/sso.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/sso.md "Sign-in": the ID token attacks, each through the whole HTTP
 * flow (sign-in, the browser's state cookie, the callback, the code
 * exchanged at the provider's token endpoint), each refused with
 * `?error=invalid_response`, no session and no account. The provider is a
 * small one on loopback that answers the token request with the token the
 * test minted (tests/support/oidc-provider.ts createFakeIdp); the nonce is
 * the one the service put in its authorization request.
 */
describe('single sign-on over OIDC: forged and misdirected ID tokens', () => {
  let t: TestApp;
  let idp: FakeIdp;
  let dns: TestDnsServer;
  let domain: string;
  let connectionId: string;
  const clientSecret = `secret-${crypto.randomUUID()}`;

  beforeAll(async () => {
    idp = await createFakeIdp({ clientId: `client-${crypto.randomUUID()}`, nonce: 'replaced per flow' });
    dns = await startDnsServer();
    const resolveTxt = createNodeTxtResolver([dns.address], { timeoutMs: 500, tries: 1 });
    t = await createTestApp({ env: { SSO_ALLOW_PRIVATE_URLS: 'true' }, resolveTxt });
    domain = `${uniqueSlug('forged')}.test`;
    const org = await createOrganization(t, await signedInUser(t, { email: `owner@${domain}` }));
    await claimDomain(t, dns, org, domain);
    const body = { type: 'oidc', name: 'Fake', issuer: idp.issuer, clientId: idp.clientId, clientSecret };
    connectionId = (
      await expectStatus<{ id: string }>(await call(t, '/api/sso/connections', { body, jar: org.owner.jar }), 201)
    ).id;
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
    await dns?.close();
  });

  /** Starts a sign-in for `email`, has the provider answer the code with the token `forge` mints, follows the callback. */
  async function attempt(
    email: string,
    forge: (nonce: string) => Promise<string>,
  ): Promise<{ location: string; jar: CookieJar }> {
    const jar = new CookieJar();
    const { url } = await expectStatus<{ url: string }>(
      await call(t, '/api/auth/sign-in/sso', { body: { email, callbackURL: '/app' }, jar }),
      200,
    );
    const request = new URL(url);
    idp.answer(await forge(request.searchParams.get('nonce')!));
    const state = request.searchParams.get('state')!;
    const answer = await call(t, `/api/auth/sso/callback/${connectionId}?code=any-code&state=${state}`, { jar });
    expect(answer.status).toBe(302);
    return { location: answer.headers.get('location') ?? '', jar };
  }

  const mint = (email: string, claims: Record<string, unknown>, signing?: FakeSigning) => (nonce: string) =>
    idp.mint({ sub: `sub-${email}`, email, nonce, ...claims }, signing);

  it('signs in with a token that holds (the control: the forgeries below differ from it in one thing each)', async () => {
    const email = `control@${domain}`;
    const { location, jar } = await attempt(email, mint(email, {}));
    expect(location).toBe('/app');
    expect((await sessionOf(t, jar))?.user.email).toBe(email);
  });

  const now = () => Math.floor(Date.now() / 1000);
  const forgeries: [string, (email: string) => (nonce: string) => Promise<string>][] = [
    ['from another issuer', (email) => mint(email, { iss: 'https://attacker.example' })],
    ['for another audience', (email) => mint(email, { aud: 'another-client' })],
    ['expired', (email) => mint(email, { iat: now() - 900, exp: now() - 600 })],
    ['with alg none', (email) => mint(email, {}, 'none')],
    ['signed by another key under an unknown kid', (email) => mint(email, {}, 'unknown-kid')],
    ['signed by another key under the published kid', (email) => mint(email, {}, 'same-kid-other-key')],
    ['HS256 keyed with the client secret', (email) => mint(email, {}, { hs256: clientSecret })],
    [
      'for another flow (wrong nonce)',
      (email) => () => idp.mint({ sub: `sub-${email}`, email, nonce: 'not-this-one' }),
    ],
  ];

  for (const [what, forge] of forgeries) {
    it(`refuses an ID token ${what}: invalid_response, no session, no account`, async () => {
      const email = `${what.replace(/\W+/g, '-')}@${domain}`.toLowerCase();
      const { location, jar } = await attempt(email, forge(email));
      expect(errorOf(location), location).toBe('invalid_response');
      expect(jar.get('gatehouse.session_token')).toBeUndefined();
      expect(await sessionOf(t, jar)).toBeNull();
      expect(await userRow(t, email)).toBeUndefined();
    });
  }
});
