import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeTxtResolver } from '../../src/platform/dns-txt.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { APP_ORIGIN, CookieJar, call, expectError, expectStatus } from '../support/http.js';
import { completeWithTotp, enableTotp } from '../support/mfa.js';
import { auditRows, createOrganization, roleBySlug, type TestOrganization, uniqueSlug } from '../support/orgs.js';
import { createSamlIdp, createSigningKey, type RespondOptions, type TestSamlIdp } from '../support/saml-idp.js';
import { claimDomain, errorOf, sessionOf as sessionAnswer, userRow as storedUser } from '../support/sso.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/sso.md "Sign-in" over SAML 2.0, end to end: the service's routes, the
 * auth library, a real database, and an identity provider signing real
 * responses (samlify, its own key pair) to the AuthnRequests the service
 * sends; connections and domains set up through their routes. The IdP's page posts the response from its own origin, as a
 * browser would carry it: the one cross-origin form the service takes.
 */

const IDP_ORIGIN = 'https://idp.test';

describe('single sign-on over SAML', () => {
  let t: TestApp;
  let idp: TestSamlIdp;
  let org: TestOrganization;
  let domain: string;
  let connectionId: string;
  let dns: TestDnsServer;

  /** A connection through POST /api/sso/connections, with the IdP's entity id, sign-in URL and certificate. */
  async function insertConnection(
    organization: TestOrganization,
    options: { allowIdpInitiated?: boolean; roleMappings?: unknown[] } = {},
  ): Promise<string> {
    const body = {
      type: 'saml',
      name: 'Test SAML',
      idpEntityId: idp.entityId,
      entryPoint: idp.ssoUrl,
      idpCertificate: idp.certificate,
      ...options,
    };
    const created = await call(t, '/api/sso/connections', { body, jar: organization.owner.jar });
    const { id, sp: provider } = await expectStatus<{ id: string; sp: { acsUrl: string; entityId: string } }>(
      created,
      201,
    );
    expect(provider).toMatchObject({ acsUrl: sp(id).acsUrl, entityId: sp(id).spEntityId });
    return id;
  }

  const removeConnection = async (organization: TestOrganization, id: string) =>
    expectStatus(await call(t, `/api/sso/connections/${id}`, { method: 'DELETE', jar: organization.owner.jar }), 200);

  /** A domain claimed through POST /api/sso/domains and verified by its TXT record. */
  const verifyDomain = (organization: TestOrganization, name: string, verified = true) =>
    claimDomain(t, dns, organization, name, verified);

  const acsPath = (id: string) => `/api/auth/sso/saml2/callback/${id}`;
  const sp = (id: string) => ({
    acsUrl: `${t.config.auth.url}${acsPath(id)}`,
    spEntityId: `${t.config.auth.url}/api/sso/connections/${id}/saml-metadata`,
  });

  /** The IdP's page posting its form to the ACS, from its own origin (the browser's other cookies come along). */
  async function post(id: string, form: Record<string, string>, jar = new CookieJar()) {
    const headers: Record<string, string> = {
      origin: IDP_ORIGIN,
      'content-type': 'application/x-www-form-urlencoded',
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'navigate',
    };
    if (jar.header()) headers.cookie = jar.header();
    const response = await t.app.request(acsPath(id), {
      method: 'POST',
      headers,
      body: new URLSearchParams(form).toString(),
    });
    jar.store(response);
    return { response, jar, location: response.headers.get('location') ?? '' };
  }

  /** POST /sign-in/sso, then the IdP answering its AuthnRequest for `email`, posted back with the RelayState. */
  async function signIn(
    email: string,
    respond: Partial<RespondOptions> = {},
    start: Record<string, unknown> = {},
    jar = new CookieJar(),
  ) {
    const { url } = await expectStatus<{ url: string }>(
      await call(t, '/api/auth/sign-in/sso', { body: { email, callbackURL: '/app', ...start } }),
      200,
    );
    const relayState = new URL(url).searchParams.get('RelayState')!;
    const samlResponse = await idp.respond({ authnRequestUrl: url, email, ...respond });
    // The organization's oldest enabled connection serves the sign-in: the suite's own.
    return post(connectionId, { SAMLResponse: samlResponse, RelayState: relayState }, jar);
  }

  const sessionOf = (jar: CookieJar) => sessionAnswer(t, jar);
  const userRow = (email: string) => storedUser(t, email);
  const accountsOf = (userId: string) =>
    t.database.withOwner((owner) =>
      owner.selectFrom('accounts').select(['provider_id', 'account_id']).where('user_id', '=', userId).execute(),
    );

  async function refused(result: { response: Response; jar: CookieJar; location: string }, code: string) {
    expect(result.response.status).toBe(302);
    expect(errorOf(result.location), result.location).toBe(code);
    expect(result.jar.get('gatehouse.session_token')).toBeUndefined();
    expect(await sessionOf(result.jar)).toBeNull();
  }

  beforeAll(async () => {
    idp = await createSamlIdp({ ssoUrl: `${IDP_ORIGIN}/sso` });
    dns = await startDnsServer();
    const resolveTxt = createNodeTxtResolver([dns.address], { timeoutMs: 500, tries: 1 });
    t = await createTestApp({ resolveTxt });
    domain = `${uniqueSlug('corp')}.test`;
    org = await createOrganization(t, await signedInUser(t, { email: `owner@${domain}` }));
    await verifyDomain(org, domain);
    connectionId = await insertConnection(org);
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it("a new person: the IdP's cross-origin form post signs them in, joined as Member, linked by NameID", async () => {
    const email = `new-${crypto.randomUUID().slice(0, 8)}@${domain}`;
    const nameId = `employee-${crypto.randomUUID()}`;
    const { response, jar, location } = await signIn(email, {
      nameId,
      attributes: { email, displayName: 'Grace Hopper' },
    });
    expect(response.status).toBe(302);
    expect(location).toBe('/app');
    const session = await sessionOf(jar);
    expect(session).toMatchObject({ user: { email }, session: { activeOrganizationId: org.id, mfa: false } });
    const user = (await userRow(email))!;
    expect(user).toMatchObject({ email_verified: true, name: 'Grace Hopper' });
    expect(await accountsOf(user.id)).toEqual([{ provider_id: `sso:${connectionId}`, account_id: nameId }]);
    const member = await roleBySlug(t, org.owner, 'member');
    const added = (await auditRows(t, org.id, 'member.added')).filter((row) => row.metadata.userId === user.id);
    expect(added.map((row) => [row.metadata.via, row.metadata.roleId])).toEqual([['sso', member.id]]);
  });

  it('a transient NameID (new at every sign-in): linked by the address, the same account and one link each time', async () => {
    const email = `transient-${crypto.randomUUID().slice(0, 8)}@${domain}`;
    const transient = 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient';
    for (let i = 0; i < 2; i += 1) {
      const { location, jar } = await signIn(email, {
        nameId: `_${crypto.randomUUID()}`,
        nameIdFormat: transient,
        attributes: { email },
      });
      expect(location).toBe('/app');
      expect((await sessionOf(jar))?.user.email).toBe(email);
    }
    const user = (await userRow(email))!;
    expect(await accountsOf(user.id)).toEqual([{ provider_id: `sso:${connectionId}`, account_id: email }]);
  });

  it('an existing password account is linked; a mapped attribute sets the role', async () => {
    const existing = await signedInUser(t, { email: `${crypto.randomUUID().slice(0, 8)}@${domain}` });
    const mappedDomain = `${uniqueSlug('mapped')}.test`;
    const mappedOrg = await createOrganization(t, await signedInUser(t, { email: `owner@${mappedDomain}` }));
    await verifyDomain(mappedOrg, mappedDomain);
    const admin = await roleBySlug(t, mappedOrg.owner, 'admin');
    const mapped = await insertConnection(mappedOrg, {
      roleMappings: [{ claim: 'groups', value: 'it-admins', roleId: admin.id }],
    });

    const { response, jar } = await signIn(existing.email);
    expect(response.status).toBe(302);
    expect((await sessionOf(jar))?.user.id).toBe(existing.id);
    expect((await accountsOf(existing.id)).map((row) => row.provider_id).sort()).toEqual([
      'credential',
      `sso:${connectionId}`,
    ]);

    const email = `admin-${crypto.randomUUID().slice(0, 8)}@${mappedDomain}`;
    const started = await expectStatus<{ url: string }>(
      await call(t, '/api/auth/sign-in/sso', { body: { email, callbackURL: '/app' } }),
      200,
    );
    const samlResponse = await idp.respond({
      authnRequestUrl: started.url,
      email,
      attributes: { email, groups: ['everyone', 'it-admins'] },
    });
    const relayState = new URL(started.url).searchParams.get('RelayState')!;
    const result = await post(mapped, { SAMLResponse: samlResponse, RelayState: relayState });
    expect(result.location).toBe('/app');
    const user = (await userRow(email))!;
    const row = await t.database.withOwner((owner) =>
      owner
        .selectFrom('members')
        .select(['role_id', 'role'])
        .where('organization_id', '=', mappedOrg.id)
        .where('user_id', '=', user.id)
        .executeTakeFirst(),
    );
    expect(row).toEqual({ role_id: admin.id, role: 'admin' });
  });

  it('a two-factor user is held back from the cross-site post, and completes with a code', async () => {
    const user = await signedInUser(t, { email: `${crypto.randomUUID().slice(0, 8)}@${domain}` });
    const factor = await enableTotp(t, user.jar);
    const { response, jar, location } = await signIn(user.email);
    expect(response.status).toBe(302);
    const target = new URL(location, 'http://x');
    expect([target.pathname, target.searchParams.get('twoFactorRedirect')]).toEqual(['/app', 'true']);
    expect(jar.get('gatehouse.session_token')).toBeUndefined();
    expect(await sessionOf(jar)).toBeNull();
    await completeWithTotp(t, jar, factor.authenticator);
    expect(await sessionOf(jar)).toMatchObject({
      user: { id: user.id },
      session: { mfa: true, activeOrganizationId: org.id },
    });
  });

  describe('refusals', () => {
    it('a response signed with another key, or a signature-wrapping forgery: invalid_response, nothing written', async () => {
      const stranger = await createSigningKey('Someone else');
      const email = `forged-${crypto.randomUUID().slice(0, 8)}@${domain}`;
      await refused(await signIn(email, { signingKey: stranger }, { errorCallbackURL: '/login' }), 'invalid_response');
      const victim = `victim-${crypto.randomUUID().slice(0, 8)}@${domain}`;
      await refused(await signIn(email, { attack: 'xsw-extensions', forgedEmail: victim }), 'invalid_response');
      expect(await userRow(email)).toBeUndefined();
      expect(await userRow(victim)).toBeUndefined();
    });

    const past = (seconds: number) => new Date(Date.now() - seconds * 1000);
    const forgeries: [string, Partial<RespondOptions>][] = [
      ['unsigned', { sign: 'none' }],
      ['for another audience', { audience: 'https://another-sp.example/metadata' }],
      ['for another destination', { destination: 'https://another-sp.example/acs' }],
      ['for another recipient', { recipient: 'https://another-sp.example/acs' }],
      ['from another issuer', { issuer: 'https://another-idp.example' }],
      ['expired', { notOnOrAfter: past(600), subjectNotOnOrAfter: past(600), issueInstant: past(900) }],
      ['answering another request (a foreign InResponseTo)', { inResponseTo: '_someone-elses-request' }],
      ['with its assertion moved into a signed ds:Object', { attack: 'xsw-object' }],
      ['with a second, unsigned assertion before the signed one', { attack: 'xsw-two-assertions' }],
      ['wrapped in a forged Response', { attack: 'xsw-response' }],
      ['with a comment cut into the NameID', { attack: 'comment-injection' }],
    ];
    for (const [what, options] of forgeries) {
      it(`a response ${what}: invalid_response, nothing written`, async () => {
        const email = `${what.replace(/\W+/g, '-')}-${crypto.randomUUID().slice(0, 6)}@${domain}`.toLowerCase();
        const forgedEmail = `victim-${crypto.randomUUID().slice(0, 8)}@${domain}`;
        await refused(await signIn(email, { forgedEmail, ...options }), 'invalid_response');
        expect(await userRow(email)).toBeUndefined();
        expect(await userRow(forgedEmail)).toBeUndefined();
      });
    }

    it('an address at a domain the organization has not verified', async () => {
      const email = `someone-${crypto.randomUUID().slice(0, 8)}@elsewhere-${uniqueSlug()}.test`;
      const { url } = await expectStatus<{ url: string }>(
        await call(t, '/api/auth/sign-in/sso', {
          body: { organizationSlug: org.slug, callbackURL: '/app', errorCallbackURL: '/login' },
        }),
        200,
      );
      const samlResponse = await idp.respond({ authnRequestUrl: url, email });
      const result = await post(connectionId, {
        SAMLResponse: samlResponse,
        RelayState: new URL(url).searchParams.get('RelayState')!,
      });
      await refused(result, 'domain_not_allowed');
      expect(new URL(result.location, 'http://x').pathname).toBe('/login');
      expect(await userRow(email)).toBeUndefined();
    });

    it('a RelayState used twice, unknown, or of another connection: invalid_state', async () => {
      const email = `state-${crypto.randomUUID().slice(0, 8)}@${domain}`;
      const { url } = await expectStatus<{ url: string }>(
        await call(t, '/api/auth/sign-in/sso', { body: { email, callbackURL: '/app' } }),
        200,
      );
      const form = {
        SAMLResponse: await idp.respond({ authnRequestUrl: url, email }),
        RelayState: new URL(url).searchParams.get('RelayState')!,
      };
      const other = await insertConnection(org);
      await refused(await post(other, form), 'invalid_state');
      // The refusal consumed it.
      await refused(await post(connectionId, form), 'invalid_state');
      await refused(await post(connectionId, { ...form, RelayState: 'y'.repeat(43) }), 'invalid_state');
      await removeConnection(org, other);
    });

    it('IdP-initiated: refused unless the connection allows it; allowed, it lands on APP_URL, once per assertion', async () => {
      const email = `idp-${crypto.randomUUID().slice(0, 8)}@${domain}`;
      const unsolicited = (id: string) => idp.respond({ ...sp(id), requestId: null, email });
      const first = await post(connectionId, { SAMLResponse: await unsolicited(connectionId) });
      await refused(first, 'idp_initiated_refused');
      expect(`${new URL(first.location).origin}/`).toBe(new URL(t.config.auth.appUrl).href);

      const allowing = await insertConnection(org, { allowIdpInitiated: true });
      const samlResponse = await unsolicited(allowing);
      const accepted = await post(allowing, { SAMLResponse: samlResponse });
      expect(accepted.response.status).toBe(302);
      expect(accepted.location).toBe(t.config.auth.appUrl);
      expect((await sessionOf(accepted.jar))?.user.email).toBe(email);
      // The same assertion again: a replay.
      await refused(await post(allowing, { SAMLResponse: samlResponse }), 'replayed');
      // A solicited flow's answer without InResponseTo is refused as an unsolicited one would be.
      const { url } = await expectStatus<{ url: string }>(
        await call(t, '/api/auth/sign-in/sso', { body: { email, callbackURL: '/app' } }),
        200,
      );
      const stripped = await idp.respond({ authnRequestUrl: url, email, inResponseTo: null });
      await refused(
        await post(connectionId, { SAMLResponse: stripped, RelayState: new URL(url).searchParams.get('RelayState')! }),
        'idp_initiated_refused',
      );
      await removeConnection(org, allowing);
    });

    it('a form without SAMLResponse: invalid_request; a body that is not a form: 415', async () => {
      await refused(await post(connectionId, {}), 'invalid_request');
      const json = await t.app.request(acsPath(connectionId), {
        method: 'POST',
        headers: { origin: IDP_ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ SAMLResponse: 'x' }),
      });
      await expectError(json, 415, 'UNSUPPORTED_MEDIA_TYPE');
    });
  });

  describe('cross-site requests', () => {
    it('the ACS takes a foreign form with cookies; every other POST under /api/auth still refuses a foreign Origin', async () => {
      const user = await signedInUser(t);
      const email = `csrf-${crypto.randomUUID().slice(0, 8)}@${domain}`;
      // The browser holds someone's session: the post neither reads nor needs it, and signs the IdP's person in.
      const result = await signIn(email, {}, {}, user.jar);
      expect(result.location).toBe('/app');
      expect((await sessionOf(result.jar))?.user.email).toBe(email);

      const foreign = { origin: IDP_ORIGIN, cookie: user.jar.header() };
      for (const [path, body] of [
        ['/api/auth/sign-in/sso', { organizationSlug: org.slug, callbackURL: '/app' }],
        ['/api/auth/sign-out', {}],
        [`${acsPath(connectionId)}/x`, {}],
        [`/api/auth/sso/callback/${connectionId}`, {}],
      ] as const) {
        const response = await call(t, path, { body, headers: foreign });
        await expectError(response, 403, 'FORBIDDEN');
      }
      // Without cookies too, for the library's routes.
      const noCookie = await t.app.request('/api/auth/sign-in/sso', {
        method: 'POST',
        headers: { origin: IDP_ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ organizationSlug: org.slug, callbackURL: '/app' }),
      });
      await expectError(noCookie, 403, 'FORBIDDEN');
      // The app's own origin is fine.
      const own = await call(t, '/api/auth/sign-in/sso', {
        body: { organizationSlug: org.slug, callbackURL: '/app' },
        headers: { origin: APP_ORIGIN },
      });
      expect(own.status).toBe(200);
    });
  });
});
