import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../src/shared/secret-box.js';
import { createTestApp, TEST_SECRET, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus, UUID_V4 } from '../support/http.js';
import { createOidcProvider, type OidcTestProvider } from '../support/oidc-provider.js';
import {
  type Actor,
  ALL_PERMISSIONS,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  createRole,
  newMember,
  type RoleRecord,
  roleBySlug,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { createSamlIdp, type TestSamlIdp } from '../support/saml-idp.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/sso.md "Connections", over HTTP: an organization's identity
 * providers, OIDC (discovered from a real provider on loopback,
 * oidc-provider) and SAML 2.0 (a samlify IdP's metadata, or its fields). The
 * client secret is sealed and never answered nor audited; roles handed out
 * are the organization's and the caller's to grant; disabling or deleting a
 * connection ends its sessions; organizations:read to read,
 * organizations:write and a fresh session to change, never an API key; the
 * service provider's SAML metadata is public.
 */
interface Connection {
  id: string;
  type: 'oidc' | 'saml';
  name: string;
  enabled: boolean;
  defaultRoleId: string | null;
  roleMappings: { claim: string; value: string; roleId: string }[];
  mfaAtIdp: boolean;
  createdAt: string;
  updatedAt: string;
  issuer?: string;
  clientId?: string;
  scopes?: string[];
  idpEntityId?: string;
  entryPoint?: string;
  allowIdpInitiated?: boolean;
  sp: { redirectUri?: string; entityId?: string; acsUrl?: string; metadataUrl?: string };
}

const SECRET = `client-secret-${crypto.randomUUID()}`;
const box = createSecretBox(TEST_SECRET, 'gatehouse sso client secrets v1');

describe('SSO connections', () => {
  let t: TestApp;
  let provider: OidcTestProvider;
  let idp: TestSamlIdp;
  let org: TestOrganization;
  let other: TestOrganization;
  let admin: TestMember;
  let viewer: TestMember;
  let roles: Record<'owner' | 'admin' | 'member' | 'viewer', RoleRecord>;
  let key: string;

  const post = (body: unknown, actor: Actor = org.owner) => call(t, '/api/sso/connections', { body, jar: actor.jar });
  const patch = (id: string, body: unknown, actor: Actor = org.owner) =>
    call(t, `/api/sso/connections/${id}`, { method: 'PATCH', body, jar: actor.jar });
  const remove = (id: string, actor: Actor = org.owner) =>
    call(t, `/api/sso/connections/${id}`, { method: 'DELETE', jar: actor.jar });
  const oidc = (extra: Record<string, unknown> = {}) => ({
    type: 'oidc',
    name: 'Okta',
    issuer: provider.issuer,
    clientId: 'gatehouse',
    clientSecret: SECRET,
    ...extra,
  });
  /** The stored row, read as the schema owner in the organization (row-level security binds the owner on PostgreSQL). */
  const stored = (id: string, tenantId = org.id) =>
    asOwnerInTenant(t, tenantId, (trx) =>
      trx.selectFrom('sso_connections').selectAll().where('id', '=', id).executeTakeFirst(),
    );
  /** Everything the service wrote about connections: answers and audit entries must never hold the secret. */
  const expectNoSecret = async (...texts: string[]) => {
    const audit = await auditRows(t, org.id);
    for (const text of [...texts, JSON.stringify(audit)]) expect(text).not.toContain(SECRET);
  };
  /**
   * A session of `user` marked as created by `connectionId`. Only the sign-in
   * flow creates such sessions (its own suite covers that end to end); here
   * the one column is set in the test database as setup, so the management
   * routes' effect on those sessions can be tested over HTTP.
   */
  const ssoSession = async (connectionId: string) => {
    const user = await signedInUser(t);
    await t.database.withOwner((owner) =>
      owner.updateTable('sessions').set({ sso_connection_id: connectionId }).where('user_id', '=', user.id).execute(),
    );
    expect(await expectStatus(await call(t, '/api/session', { jar: user.jar }), 200)).not.toBeNull();
    return user;
  };
  const signedOut = async (user: Actor) => {
    const res = await call(t, '/api/session', { jar: user.jar });
    return res.status === 401 || (res.status === 200 && (await res.json()) === null);
  };
  const makeStale = (userId: string) =>
    t.database.withOwner((owner) =>
      owner
        .updateTable('sessions')
        .set({ step_up_at: new Date(t.clock().getTime() - (t.config.stepUp.maxAgeSeconds + 1) * 1000) })
        .where('user_id', '=', userId)
        .execute(),
    );

  beforeAll(async () => {
    provider = await createOidcProvider({ accounts: {} });
    idp = await createSamlIdp({ ssoUrl: 'https://idp.example.com/sso/saml' });
    // The provider is on loopback: allowed here, refused by the strict app below.
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled', SSO_ALLOW_PRIVATE_URLS: 'true' } });
    org = await createOrganization(t, await signedInUser(t));
    other = await createOrganization(t, await signedInUser(t));
    admin = await newMember(t, org, 'admin');
    viewer = await newMember(t, org, 'viewer');
    roles = {
      owner: await roleBySlug(t, org.owner, 'owner'),
      admin: await roleBySlug(t, org.owner, 'admin'),
      member: await roleBySlug(t, org.owner, 'member'),
      viewer: await roleBySlug(t, org.owner, 'viewer'),
    };
    const created = await call(t, '/api/api-keys', {
      body: { name: 'every permission', scopes: ALL_PERMISSIONS },
      jar: org.owner.jar,
    });
    key = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(async () => {
    await t?.close();
    await provider?.close();
  });

  it('creates an OIDC connection from the discovered issuer; the secret is sealed, never answered nor audited', async () => {
    const res = await post(oidc({ roleMappings: [{ claim: 'groups', value: 'admins', roleId: roles.admin.id }] }));
    const created = await expectStatus<Connection>(res, 201);
    expect(created).toEqual({
      id: expect.stringMatching(UUID_V4),
      type: 'oidc',
      name: 'Okta',
      enabled: true,
      defaultRoleId: null,
      roleMappings: [{ claim: 'groups', value: 'admins', roleId: roles.admin.id }],
      mfaAtIdp: false,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      issuer: provider.issuer,
      clientId: 'gatehouse',
      scopes: ['openid', 'email', 'profile'],
      sp: { redirectUri: `${t.config.auth.url}/api/auth/sso/callback/${created.id}` },
    });
    const row = await stored(created.id);
    expect(row?.oidc_client_secret).toMatch(/^v1:/);
    expect(await box.open(row!.oidc_client_secret!)).toBe(SECRET);
    // The endpoints are the provider's own, as its discovery document names them.
    const discovery = await (await fetch(`${provider.issuer}/.well-known/openid-configuration`)).json();
    expect(row?.oidc_metadata).toMatchObject({
      issuer: provider.issuer,
      authorization_endpoint: discovery.authorization_endpoint,
      token_endpoint: discovery.token_endpoint,
      jwks_uri: discovery.jwks_uri,
    });
    const [entry] = (await auditRows(t, org.id, 'sso.connection_created')).filter(
      (e) => e.metadata.connectionId === created.id,
    );
    expect(entry?.metadata).toEqual({ connectionId: created.id, type: 'oidc', name: 'Okta' });
    const listed = await call(t, '/api/sso/connections', { jar: org.owner.jar });
    const text = await listed.text();
    expect(JSON.parse(text).find((c: Connection) => c.id === created.id)).toEqual(created);
    await expectNoSecret(JSON.stringify(created), text);
  });

  it('refuses an issuer whose discovery fails, naming `issuer` (400), and keeps nothing', async () => {
    const before = (await auditRows(t, org.id, 'sso.connection_created')).length;
    const silent: Server = createServer((_req, res) => res.writeHead(200).end('{"issuer":"https://elsewhere.test"}'));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const other = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      for (const [issuer, reason] of [
        [`${provider.issuer}/nothing-here`, /404/],
        [other, /another issuer/],
        ['not a url', /absolute URL/],
      ] as const) {
        const error = await expectError(await post(oidc({ issuer })), 400, 'VALIDATION_ERROR');
        expect(error.details, issuer).toEqual([{ path: 'issuer', message: expect.stringMatching(reason) }]);
      }
    } finally {
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
    expect(await auditRows(t, org.id, 'sso.connection_created')).toHaveLength(before);
  });

  it('refuses an issuer at a private address when SSO_ALLOW_PRIVATE_URLS=false', async () => {
    const strict = await createTestApp({ env: { SSO_ALLOW_PRIVATE_URLS: 'false' }, database: t.database });
    try {
      for (const issuer of [provider.issuer, 'http://10.0.0.7/idp', 'http://169.254.169.254', 'http://localhost:9/x']) {
        const error = await expectError(
          await call(strict, '/api/sso/connections', { body: oidc({ issuer }), jar: org.owner.jar }),
          400,
          'VALIDATION_ERROR',
        );
        expect(error.details, issuer).toEqual([{ path: 'issuer', message: expect.stringMatching(/private/) }]);
      }
    } finally {
      await strict.close();
    }
  });

  it('creates a SAML connection from the IdP metadata or its fields; its SP metadata is public', async () => {
    const fromXml = await expectStatus<Connection>(
      await post({ type: 'saml', name: 'Entra ID', metadataXml: idp.metadataXml, allowIdpInitiated: true }),
      201,
    );
    const metadataUrl = `${t.config.auth.url}/api/sso/connections/${fromXml.id}/saml-metadata`;
    expect(fromXml).toMatchObject({
      type: 'saml',
      idpEntityId: idp.entityId,
      entryPoint: 'https://idp.example.com/sso/saml',
      allowIdpInitiated: true,
      sp: {
        entityId: metadataUrl,
        acsUrl: `${t.config.auth.url}/api/auth/sso/saml2/callback/${fromXml.id}`,
        metadataUrl,
      },
    });
    expect((await stored(fromXml.id))?.saml_certificates).toEqual([idp.certificate]);

    const byHand = await expectStatus<Connection>(
      await post({
        type: 'saml',
        name: 'Google',
        entryPoint: 'https://accounts.example.com/o/saml2/idp?idpid=x',
        idpEntityId: 'https://accounts.example.com/o/saml2?idpid=x',
        idpCertificate: idp.key.certificatePem,
      }),
      201,
    );
    expect(byHand).toMatchObject({
      idpEntityId: 'https://accounts.example.com/o/saml2?idpid=x',
      allowIdpInitiated: false,
    });
    expect((await stored(byHand.id))?.saml_certificates).toEqual([idp.key.certificate]);
    const entries = (await auditRows(t, org.id, 'sso.connection_created')).filter((e) =>
      [fromXml.id, byHand.id].includes(e.metadata.connectionId),
    );
    expect(entries.map((e) => e.metadata.type)).toEqual(['saml', 'saml']);
    expect(JSON.stringify(entries)).not.toContain(idp.certificate.slice(0, 40));

    // Public: the IdP (and its admin) fetch it without a session.
    const xml = await call(t, `/api/sso/connections/${fromXml.id}/saml-metadata`);
    expect(xml.status).toBe(200);
    expect(xml.headers.get('content-type')).toMatch(/^application\/samlmetadata\+xml/);
    const body = await xml.text();
    expect(body).toContain(`entityID="${metadataUrl}"`);
    expect(body).toContain(`Location="${fromXml.sp.acsUrl}"`);
    expect(body).toContain('WantAssertionsSigned="true"');
    const oidcId = (await expectStatus<Connection>(await post(oidc({ name: 'Not SAML' })), 201)).id;
    for (const id of [oidcId, crypto.randomUUID()])
      await expectError(await call(t, `/api/sso/connections/${id}/saml-metadata`), 404, 'NOT_FOUND');
    await expectError(await call(t, '/api/sso/connections/nope/saml-metadata'), 400, 'VALIDATION_ERROR');
  });

  it('refuses SAML settings it cannot use, naming the field (400)', async () => {
    const hand = {
      entryPoint: 'https://idp.example.com/sso',
      idpEntityId: 'https://idp.example.com',
      idpCertificate: idp.key.certificatePem,
    };
    const refusals: [Record<string, unknown>, string][] = [
      [{ metadataXml: '<not-metadata/>' }, 'metadataXml'],
      [{ metadataXml: 'no xml at all' }, 'metadataXml'],
      [{ ...hand, idpCertificate: 'not a certificate' }, 'idpCertificate'],
      [{ ...hand, entryPoint: 'ftp://idp.example.com/sso' }, 'entryPoint'],
      [{ ...hand, entryPoint: 'not a url' }, 'entryPoint'],
      [{ entryPoint: hand.entryPoint, idpEntityId: hand.idpEntityId }, 'idpCertificate'],
      [{ ...hand, metadataXml: idp.metadataXml }, 'entryPoint'],
      [{ ...hand, clientSecret: SECRET }, ''],
    ];
    for (const [fields, path] of refusals) {
      const error = await expectError(await post({ type: 'saml', name: 'Bad', ...fields }), 400, 'VALIDATION_ERROR');
      expect(
        error.details?.some((d) => d.path === path || (path === '' && d.path !== undefined)),
        `${path} ${JSON.stringify(error)}`,
      ).toBe(true);
    }
    for (const body of [
      { type: 'ldap', name: 'x' },
      oidc({ scopes: ['email'] }),
      oidc({ name: '' }),
      oidc({ tenantId: other.id }),
      // The first mapping of a claim and value wins: a second one would never apply.
      oidc({
        roleMappings: [
          { claim: 'groups', value: 'a', roleId: roles.member.id },
          { claim: 'groups', value: 'a', roleId: roles.admin.id },
        ],
      }),
    ])
      await expectError(await post(body), 400, 'VALIDATION_ERROR');
  });

  it("hands out only the organization's roles, and only those the caller may grant (Owner by an Owner)", async () => {
    const foreign = await roleBySlug(t, other.owner, 'member');
    let error = await expectError(await post(oidc({ defaultRoleId: foreign.id })), 400, 'VALIDATION_ERROR');
    expect(error.details).toEqual([{ path: 'defaultRoleId', message: expect.any(String) }]);
    const mappings = [
      { claim: 'groups', value: 'a', roleId: roles.member.id },
      { claim: 'groups', value: 'b', roleId: crypto.randomUUID() },
    ];
    error = await expectError(await post(oidc({ roleMappings: mappings })), 400, 'VALIDATION_ERROR');
    expect(error.details?.map((d) => d.path)).toEqual(['roleMappings.1.roleId']);

    // An Admin maps to what Admin holds, never to Owner nor to a role with a permission it lacks.
    await expectStatus(await post(oidc({ defaultRoleId: roles.viewer.id }), admin), 201);
    const wider = await createRole(t, org.owner, { name: 'Deleter', permissions: ['organizations:delete'] });
    for (const body of [
      oidc({ defaultRoleId: roles.owner.id }),
      oidc({ roleMappings: [{ claim: 'groups', value: 'x', roleId: wider.id }] }),
    ]) {
      error = await expectError(await post(body, admin), 403, 'INSUFFICIENT_PERMISSIONS');
      expect(error.details?.[0]?.path).toMatch(/^(defaultRoleId|roleMappings\.0\.roleId)$/);
    }
    // A member holding every permission, but not an Owner, still maps nobody to Owner.
    await createRole(t, org.owner, { name: 'Deputy', permissions: ALL_PERMISSIONS });
    const deputy = await newMember(t, org, 'deputy');
    error = await expectError(
      await post(oidc({ defaultRoleId: roles.owner.id }), deputy),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    expect(error.details).toEqual([{ path: 'defaultRoleId', message: expect.stringMatching(/Owner/) }]);
    // The Owner may; then the Admin can neither take that mapping away nor change the default it sets.
    const owned = await expectStatus<Connection>(
      await post(oidc({ roleMappings: [{ claim: 'groups', value: 'owners', roleId: roles.owner.id }] })),
      201,
    );
    await expectError(await patch(owned.id, { roleMappings: [] }, admin), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectStatus(await patch(owned.id, { defaultRoleId: roles.viewer.id }, admin), 200);
    expect((await expectStatus<Connection>(await patch(owned.id, { roleMappings: [] }), 200)).roleMappings).toEqual([]);
  });

  it('changes settings (a new issuer is discovered again, a new secret sealed), audited by field name', async () => {
    const created = await expectStatus<Connection>(await post(oidc({ name: 'Before' })), 201);
    const secret = `rotated-${crypto.randomUUID()}`;
    const res = await patch(created.id, {
      name: 'After',
      mfaAtIdp: true,
      clientSecret: secret,
      scopes: ['openid', 'email', 'groups'],
    });
    const changed = await expectStatus<Connection>(res, 200);
    expect(changed).toMatchObject({
      id: created.id,
      name: 'After',
      mfaAtIdp: true,
      scopes: ['openid', 'email', 'groups'],
    });
    expect(await box.open((await stored(created.id))!.oidc_client_secret!)).toBe(secret);
    const [entry] = (await auditRows(t, org.id, 'sso.connection_updated')).filter(
      (e) => e.metadata.connectionId === created.id,
    );
    expect(entry?.metadata).toEqual({
      connectionId: created.id,
      type: 'oidc',
      name: 'After',
      fields: ['clientSecret', 'mfaAtIdp', 'name', 'scopes'],
      sessionsEnded: 0,
    });
    expect(JSON.stringify(await auditRows(t, org.id))).not.toContain(secret);

    // A new issuer is discovered; one that fails changes nothing.
    const second = await createOidcProvider({ accounts: {} });
    try {
      await expectStatus(await patch(created.id, { issuer: second.issuer }), 200);
      const discovered = (await stored(created.id))?.oidc_metadata as { token_endpoint: string };
      expect(discovered.token_endpoint.startsWith(second.issuer)).toBe(true);
    } finally {
      await second.close();
    }
    const error = await expectError(
      await patch(created.id, { issuer: `${provider.issuer}/gone`, name: 'Never' }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details?.[0]?.path).toBe('issuer');
    expect((await stored(created.id))?.name).toBe('After');

    // The type stays; the other type's settings are refused.
    await expectError(await patch(created.id, { type: 'saml' }), 400, 'VALIDATION_ERROR');
    const wrong = await expectError(await patch(created.id, { metadataXml: idp.metadataXml }), 400, 'VALIDATION_ERROR');
    expect(wrong.details?.[0]?.path).toBe('metadataXml');
    await expectError(await patch(created.id, {}), 400, 'VALIDATION_ERROR');
    const saml = await expectStatus<Connection>(
      await post({ type: 'saml', name: 'S', metadataXml: idp.metadataXml }),
      201,
    );
    expect(
      (await expectError(await patch(saml.id, { clientId: 'x' }), 400, 'VALIDATION_ERROR')).details?.[0]?.path,
    ).toBe('clientId');
    const moved = await expectStatus<Connection>(
      await patch(saml.id, { entryPoint: 'https://idp2.example.com/sso' }),
      200,
    );
    expect(moved.entryPoint).toBe('https://idp2.example.com/sso');
  });

  it('disabling ends the sessions the connection created, in the same change; others stay', async () => {
    const created = await expectStatus<Connection>(await post(oidc({ name: 'Disable me' })), 201);
    const through = await ssoSession(created.id);
    const bystander = await signedInUser(t);
    const disabled = await expectStatus<Connection>(await patch(created.id, { enabled: false }), 200);
    expect(disabled.enabled).toBe(false);
    expect(await signedOut(through)).toBe(true);
    expect(await signedOut(bystander)).toBe(false);
    expect(await signedOut(org.owner)).toBe(false);
    const [entry] = (await auditRows(t, org.id, 'sso.connection_updated')).filter(
      (e) => e.metadata.connectionId === created.id,
    );
    expect(entry?.metadata).toMatchObject({ fields: ['enabled'], sessionsEnded: 1 });
    expect((await expectStatus<Connection>(await patch(created.id, { enabled: true }), 200)).enabled).toBe(true);
  });

  it('deleting removes the connection and its sessions: { id, deleted: true }, audited', async () => {
    const created = await expectStatus<Connection>(await post(oidc({ name: 'Delete me' })), 201);
    const through = await ssoSession(created.id);
    await expectError(await remove(created.id, other.owner), 404, 'NOT_FOUND');
    expect(await signedOut(through)).toBe(false);
    expect(await expectStatus(await remove(created.id), 200)).toEqual({ id: created.id, deleted: true });
    expect(await signedOut(through)).toBe(true);
    expect(await stored(created.id)).toBeUndefined();
    const [entry] = (await auditRows(t, org.id, 'sso.connection_deleted')).filter(
      (e) => e.metadata.connectionId === created.id,
    );
    expect(entry?.metadata).toEqual({ connectionId: created.id, type: 'oidc', name: 'Delete me' });
    await expectError(await remove(created.id), 404, 'NOT_FOUND');
    await expectError(await patch(created.id, { name: 'x' }), 404, 'NOT_FOUND');
  });

  it("another organization's connection is 404 and absent from its list", async () => {
    const mine = await expectStatus<Connection>(await post(oidc({ name: 'Mine' })), 201);
    await expectError(await patch(mine.id, { name: 'Theirs now' }, other.owner), 404, 'NOT_FOUND');
    await expectError(await remove(mine.id, other.owner), 404, 'NOT_FOUND');
    const theirs = await expectStatus<Connection[]>(
      await call(t, '/api/sso/connections', { jar: other.owner.jar }),
      200,
    );
    expect(theirs.map((c) => c.id)).not.toContain(mine.id);
    expect((await stored(mine.id))?.name).toBe('Mine');
  });

  it('a Viewer reads but changes nothing; an API key does neither; a stale session must step up', async () => {
    const created = await expectStatus<Connection>(await post(oidc({ name: 'Access' })), 201);
    const listed = await expectStatus<Connection[]>(await call(t, '/api/sso/connections', { jar: viewer.jar }), 200);
    expect(listed.map((c) => c.id)).toContain(created.id);
    await expectError(await post(oidc(), viewer), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectError(await patch(created.id, { name: 'x' }, viewer), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectError(await remove(created.id, viewer), 403, 'INSUFFICIENT_PERMISSIONS');
    const keyed = { authorization: `Bearer ${key}` };
    await expectError(await call(t, '/api/sso/connections', { headers: keyed }), 403, 'FORBIDDEN');
    await expectError(await call(t, '/api/sso/connections', { body: oidc(), headers: keyed }), 403, 'FORBIDDEN');
    await expectError(
      await call(t, `/api/sso/connections/${created.id}`, { method: 'DELETE', headers: keyed }),
      403,
      'FORBIDDEN',
    );

    const stale = await signedInUser(t);
    const staleOrg = await createOrganization(t, stale);
    const own = await expectStatus<Connection>(await post(oidc({ name: 'Stale' }), stale), 201);
    await makeStale(stale.id);
    await expectStatus(await call(t, '/api/sso/connections', { jar: stale.jar }), 200);
    await expectError(await post(oidc(), stale), 403, 'STEP_UP_REQUIRED');
    await expectError(await patch(own.id, { enabled: false }, stale), 403, 'STEP_UP_REQUIRED');
    await expectError(await remove(own.id, stale), 403, 'STEP_UP_REQUIRED');
    expect((await stored(own.id, staleOrg.id))?.enabled).toBe(true);
  });
});
