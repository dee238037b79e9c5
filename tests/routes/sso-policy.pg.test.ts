import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ssoSecretBox } from '../../src/sso/connection-settings.js';
import { walkRoutes } from '../security/routes.js';
import { createTestApp, TEST_SECRET, type TestApp } from '../support/app.js';
import { CookieJar, call, expectError, expectStatus, PASSWORD, pathOf } from '../support/http.js';
import { createOidcProvider, type OidcTestProvider } from '../support/oidc-provider.js';
import {
  type Actor,
  addMember,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  newMember,
  setActive,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

/**
 * docs/sso.md "Policy": while `requireSso` is on, a member whose email is at
 * a verified domain of the organization gets 403 SSO_REQUIRED there (service
 * routes and the library's organization routes alike) unless the session came
 * through one of its connections; Owners pass as break-glass, audited
 * `sso.bypassed` once per session; members at other domains, platform admins
 * who are not members and API keys are not bound; GET/PATCH
 * /api/organization/security carry both policies.
 */
const SSO_REQUIRED = { code: 'SSO_REQUIRED', message: 'Single sign-on required' };
const ORG = '/api/auth/organization';

describe('organization single sign-on policy', () => {
  let t: TestApp;
  let idp: OidcTestProvider;
  const accounts: Record<string, Record<string, unknown>> = {};
  const domain = `acme-${crypto.randomUUID().slice(0, 8)}.test`;
  let owner: SignedInUser;
  let org: TestOrganization;
  /** A member (Admin) at the verified domain, signed in with a password. */
  let bound: Actor;
  /** A member (Admin) whose email is at another domain. */
  let outsider: TestMember;
  let other: TestOrganization;
  let connectionId: string;
  let otherConnectionId: string;
  let boundKey: string;

  const security = (jar: CookieJar, body?: unknown) =>
    call(t, '/api/organization/security', body === undefined ? { jar } : { method: 'PATCH', body, jar });
  const listMembersIn = (jar: CookieJar, organizationId?: string) =>
    call(t, `${ORG}/list-members${organizationId ? `?organizationId=${organizationId}` : ''}`, { jar });

  /** A password sign-in through the library's route, the organization made active. */
  async function passwordSession(user: { id: string; email: string }, organizationId: string): Promise<Actor> {
    const jar = new CookieJar();
    const res = await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, jar });
    expect(res.status).toBe(200);
    const actor = { id: user.id, email: user.email, jar };
    await setActive(t, actor, organizationId);
    return actor;
  }

  /** An OIDC connection of the organization at the test IdP, as the connection routes store one. */
  async function insertOidcConnection(organizationId: string): Promise<string> {
    const meta = await (await fetch(`${idp.issuer}/.well-known/openid-configuration`)).json();
    const clientId = `client-${crypto.randomUUID()}`;
    const clientSecret = `secret-${crypto.randomUUID()}`;
    const secrets = ssoSecretBox(TEST_SECRET);
    const id = await asOwnerInTenant(t, organizationId, async (trx) => {
      const row = await trx
        .insertInto('sso_connections')
        .values({
          tenant_id: organizationId,
          type: 'oidc',
          name: 'Test OIDC',
          oidc_issuer: idp.issuer,
          oidc_client_id: clientId,
          oidc_client_secret: await secrets.seal(clientSecret),
          oidc_scopes: ['openid', 'email', 'profile'],
          // As text cast by the server: postgres.js would bind a string to jsonb as a JSON string scalar.
          oidc_metadata: sql<string>`${JSON.stringify({
            issuer: meta.issuer,
            authorization_endpoint: meta.authorization_endpoint,
            token_endpoint: meta.token_endpoint,
            jwks_uri: meta.jwks_uri,
          })}::text::jsonb`,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id as string;
    });
    idp.addClient({
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [`${t.config.auth.url}/api/auth/sso/callback/${id}`],
    });
    return id;
  }

  /** A SAML connection of another organization (the smallest valid row: nobody signs in through it here). */
  function insertSamlConnection(organizationId: string): Promise<string> {
    return asOwnerInTenant(t, organizationId, async (trx) => {
      const row = await trx
        .insertInto('sso_connections')
        .values({
          tenant_id: organizationId,
          type: 'saml',
          name: 'Test IdP',
          saml_idp_entity_id: `https://idp.${domain}/saml`,
          saml_entry_point: `https://idp.${domain}/sso`,
          saml_certificates: ['MIIB'],
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id as string;
    });
  }

  /** The whole SSO sign-in of an account through the organization's IdP (docs/sso.md "Sign-in"): a new session. */
  async function ssoSession(email: string): Promise<CookieJar> {
    const sub = `idp-${crypto.randomUUID().slice(0, 8)}`;
    accounts[sub] = { email, email_verified: true, name: 'Signed in at the IdP' };
    const jar = new CookieJar();
    const started = await call(t, '/api/auth/sign-in/sso', { body: { email, callbackURL: '/app' }, jar });
    const { url } = await expectStatus<{ url: string }>(started, 200);
    const back = await call(t, pathOf(await idp.signIn(url, { sub })), { jar });
    expect(back.status).toBe(302);
    expect(back.headers.get('location')).toBe('/app');
    return jar;
  }

  /** Marks the session as created by `connection` (null: by a password), as the SSO sign-in stores it. */
  async function sessionCameThrough(jar: CookieJar, connection: string | null): Promise<void> {
    const { session } = await expectStatus<{ session: { id: string } }>(await call(t, '/api/session', { jar }), 200);
    await t.database.withOwner((db) =>
      db.updateTable('sessions').set({ sso_connection_id: connection }).where('id', '=', session.id).execute(),
    );
  }

  beforeAll(async () => {
    idp = await createOidcProvider({ accounts });
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled', SSO_ALLOW_PRIVATE_URLS: 'true' } });
    owner = await signedInUser(t, { email: `owner@${domain}` });
    org = await createOrganization(t, owner);
    const boundUser = await signedInUser(t, { email: `bound@${domain}` });
    await addMember(t, org, boundUser, 'admin');
    outsider = await newMember(t, org, 'admin');
    // The bound member belongs to a second organization, which has no policy.
    other = await createOrganization(t, await signedInUser(t));
    await addMember(t, other, boundUser, 'member', other.owner);
    bound = await passwordSession(boundUser, org.id);

    // The domain as POST /api/sso/domains and its verify step leave it; those
    // routes are being built beside this policy, so the row is written here.
    await asOwnerInTenant(t, org.id, (trx) =>
      trx
        .insertInto('sso_domains')
        .values({ tenant_id: org.id, domain, txt_value: 'test', verified_at: new Date() })
        .execute(),
    );
    connectionId = await insertOidcConnection(org.id);
    otherConnectionId = await insertSamlConnection(other.id);

    // A key the bound member made before the policy (a password sign-in is fresh for step-up).
    const created = await call(t, '/api/api-keys', { body: { name: 'ci', scopes: ['members:read'] }, jar: bound.jar });
    boundKey = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('GET answers both policies; PATCH takes either or both, nothing else, and is audited with what it was given', async () => {
    expect(await expectStatus(await security(owner.jar), 200)).toEqual({ requireMfa: false, requireSso: false });
    for (const body of [{}, { requireSso: 'yes' }, { requireSso: true, extra: 1 }, { requireSso: null }]) {
      await expectError(await security(owner.jar, body), 400, 'VALIDATION_ERROR');
    }
    expect(await expectStatus(await security(owner.jar, { requireMfa: false, requireSso: false }), 200)).toEqual({
      requireMfa: false,
      requireSso: false,
    });
    // Nothing bound yet: the bound member works as before.
    expect((await call(t, '/api/members', { jar: bound.jar })).status).toBe(200);

    // Turning it on needs nothing more than the route's own rules (an MFA-free, fresh session).
    expect(await expectStatus(await security(owner.jar, { requireSso: true }), 200)).toEqual({
      requireMfa: false,
      requireSso: true,
    });
    expect(await expectStatus(await security(outsider.jar), 200)).toEqual({ requireMfa: false, requireSso: true });
    const entries = await auditRows(t, org.id, 'organization.security_updated');
    expect(entries.map((entry) => [entry.actor_id, entry.metadata])).toEqual([
      [owner.id, { requireMfa: false, requireSso: false, previous: { requireMfa: false, requireSso: false } }],
      [owner.id, { requireSso: true, previous: { requireSso: false } }],
    ]);
  });

  it('refuses a member at the verified domain on service routes and the library organization routes', async () => {
    expect(await expectStatus(await call(t, '/api/members', { jar: bound.jar }), 403)).toEqual(SSO_REQUIRED);
    expect(await expectStatus(await security(bound.jar), 403)).toEqual(SSO_REQUIRED);
    expect(await expectStatus(await listMembersIn(bound.jar), 403)).toEqual(SSO_REQUIRED);
    expect(await expectStatus(await listMembersIn(bound.jar, org.id), 403)).toEqual(SSO_REQUIRED);
    expect(
      await expectStatus(
        await call(t, `${ORG}/get-full-organization?organizationId=${org.id}`, { jar: bound.jar }),
        403,
      ),
    ).toEqual(SSO_REQUIRED);
    // Account routes and the session stay open.
    expect(await expectStatus(await call(t, '/api/session', { jar: bound.jar }), 200)).toMatchObject({
      session: { activeOrganizationId: org.id },
    });
    expect((await call(t, '/api/users/me', { jar: bound.jar })).status).toBe(200);
    // Only in that organization: the other one (active) answers, and still refuses when named from there.
    await setActive(t, bound, other.id);
    expect((await call(t, '/api/members', { jar: bound.jar })).status).toBe(200);
    expect((await listMembersIn(bound.jar)).status).toBe(200);
    expect(await expectStatus(await listMembersIn(bound.jar, org.id), 403)).toEqual(SSO_REQUIRED);
    await setActive(t, bound, org.id);
    expect(await auditRows(t, org.id, 'sso.bypassed')).toEqual([]);
  });

  it('every service route that needs the active organization refuses that member (walked from the OpenAPI document)', async () => {
    const { operations } = await walkRoutes(t);
    const tenantRoutes = operations.filter(
      (op) =>
        !op.library && typeof op.access === 'object' && (op.access.activeOrganization || op.access.permissions?.length),
    );
    expect(tenantRoutes.length).toBeGreaterThan(10);
    for (const op of tenantRoutes) {
      const path = op.path.replace(/\{\w+\}/g, crypto.randomUUID());
      const body = ['POST', 'PATCH', 'PUT'].includes(op.method) ? {} : undefined;
      const response = await call(t, path, { method: op.method, body, jar: bound.jar });
      expect(await expectStatus(response, 403), op.key).toEqual(SSO_REQUIRED);
    }
  });

  it('leaves members at other domains, platform admins who are not members, and API keys alone', async () => {
    expect((await call(t, '/api/members', { jar: outsider.jar })).status).toBe(200);
    expect((await listMembersIn(outsider.jar, org.id)).status).toBe(200);

    // At the domain, but no member: the policy binds members only.
    const admin = await signedInUser(t, { email: `platform@${domain}` });
    await t.database.withOwner((db) =>
      db.updateTable('users').set({ role: 'superadmin' }).where('id', '=', admin.id).execute(),
    );
    const asked = await call(t, `${ORG}/has-permission`, {
      body: { organizationId: org.id, permissions: { members: ['read'] } },
      jar: admin.jar,
    });
    expect(await expectStatus(asked, 200)).toMatchObject({ success: true });

    const keyed = await call(t, '/api/members', { headers: { authorization: `Bearer ${boundKey}` } });
    expect(keyed.status).toBe(200);
  });

  it('lets an Owner in as break-glass, audited once per session and organization', async () => {
    expect((await call(t, '/api/members', { jar: owner.jar })).status).toBe(200);
    expect((await listMembersIn(owner.jar, org.id)).status).toBe(200);
    // Another instance over the same database: the stored row, not memory, decides.
    const second = await createTestApp({ database: t.database, env: { API_KEY_AUTH: 'enabled' } });
    try {
      expect((await call(second, '/api/members', { jar: owner.jar })).status).toBe(200);
    } finally {
      await second.close();
    }
    const once = await auditRows(t, org.id, 'sso.bypassed');
    expect(once.map((entry) => [entry.actor_id, entry.metadata])).toEqual([[owner.id, { userId: owner.id }]]);

    // A new sign-in is a new session: its first use is audited too.
    const again = await passwordSession(owner, org.id);
    expect((await call(t, '/api/roles', { jar: again.jar })).status).toBe(200);
    expect((await call(t, '/api/roles', { jar: again.jar })).status).toBe(200);
    expect(await auditRows(t, org.id, 'sso.bypassed')).toHaveLength(2);
  });

  it("passes a session that came through the organization's single sign-on, not another organization's", async () => {
    // The same account signs in through the organization's IdP: that session
    // works there, while its password session is still refused.
    const viaSso = await ssoSession(bound.email);
    expect(await expectStatus(await call(t, '/api/session', { jar: viaSso }), 200)).toMatchObject({
      user: { id: bound.id },
      session: { activeOrganizationId: org.id },
    });
    expect((await call(t, '/api/members', { jar: viaSso })).status).toBe(200);
    expect((await listMembersIn(viaSso, org.id)).status).toBe(200);
    expect(await expectStatus(await call(t, '/api/members', { jar: bound.jar }), 403)).toEqual(SSO_REQUIRED);
    const stored = await t.database.withOwner((db) =>
      db.selectFrom('sessions').select('sso_connection_id').where('user_id', '=', bound.id).execute(),
    );
    expect(stored.map((row) => row.sso_connection_id)).toContain(connectionId);

    // No sign-in can give this member a session from another organization's
    // connection (a verified domain belongs to one organization, and only its
    // addresses sign in there), so the column is set here: still refused.
    await sessionCameThrough(bound.jar, otherConnectionId);
    expect(await expectStatus(await call(t, '/api/members', { jar: bound.jar }), 403)).toEqual(SSO_REQUIRED);
    expect(await expectStatus(await listMembersIn(bound.jar, org.id), 403)).toEqual(SSO_REQUIRED);
    await sessionCameThrough(bound.jar, null);
  });

  it('turned off, the policy lifts on the next request', async () => {
    // The refused state is read (and cached, on the embedded engine) first.
    expect(await expectStatus(await call(t, '/api/members', { jar: bound.jar }), 403)).toEqual(SSO_REQUIRED);
    expect(await expectStatus(await security(owner.jar, { requireSso: false }), 200)).toEqual({
      requireMfa: false,
      requireSso: false,
    });
    expect((await call(t, '/api/members', { jar: bound.jar })).status).toBe(200);
    expect((await listMembersIn(bound.jar, org.id)).status).toBe(200);
    expect((await call(t, '/api/members', { jar: owner.jar })).status).toBe(200);
    expect(await auditRows(t, org.id, 'sso.bypassed')).toHaveLength(2);
  });
});
