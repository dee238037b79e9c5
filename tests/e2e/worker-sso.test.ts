import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { CookieJar } from '../support/http.js';
import { createSamlIdp, type TestSamlIdp } from '../support/saml-idp.js';
import { withDatabaseName } from '../support/servers.js';
import { PASSWORD } from '../support/users.js';
import { type SelfSigned, selfSignedCertificate } from '../support/webhooks.js';
import { type HttpsOidcProvider, startHttpsOidcProvider } from './support/oidc-https.js';
import { firstLink, startMailCapture } from './support/servers.js';
import {
  createMigratedDatabase,
  dropDatabase,
  type RateLimitStoreServer,
  requiredServers,
  startRateLimitStore,
} from './support/worker-env.js';
import { freePort, randomSecret, startWranglerDev, type WranglerDev } from './support/wrangler.js';

/**
 * Enterprise SSO in the deployment artifact (docs/sso.md, docs/workers.md):
 * src/entries/worker.ts in workerd (`wrangler dev --local`) with production
 * settings, on PostgreSQL through PgBouncer as tests/e2e/worker.test.ts
 * runs it, and everything through HTTP to the Worker. What only workerd can
 * show: the domain's TXT record read over DNS-over-TCP through
 * `connect()` of cloudflare:sockets (DNS_SERVERS names a dns2 server on
 * loopback; the Worker has no other way to reach it), the OIDC discovery,
 * token and JWKS requests made with workerd's fetch and the ID token
 * verified by jose on its WebCrypto, and a SAML response checked by
 * samlify, xmldom and xml-crypto at request time on nodejs_compat. Last, a
 * directory's SCIM sequence (docs/scim.md) through the Worker's SCIM door.
 *
 * Production takes only https:// issuers and endpoints, so the OpenID
 * Provider serves TLS with a certificate workerd trusts through
 * SSL_CERT_FILE; SSO_ALLOW_PRIVATE_URLS=true lets it be on loopback. The
 * SAML IdP is never reached by the Worker (the browser carries the
 * AuthnRequest and the response), so it needs no server here.
 */

const APP_ORIGIN = 'http://localhost:3000';
/** The IdP's page posts the SAML response from its own origin. */
const IDP_ORIGIN = 'https://idp.test';
/** A Redis database of its own (tests/e2e/worker.test.ts uses 15, the limits suite its own). */
const REDIS_DB = 13;
const SESSION_COOKIE = 'gatehouse.session_token';

interface SessionAnswer {
  user: { id: string; email: string; emailVerified: boolean };
  session: { activeOrganizationId: string | null };
}

describe('enterprise SSO in workerd (wrangler dev): DNS over TCP, OIDC and SAML through the Worker', () => {
  const servers = requiredServers();
  const databaseName = `gatehouse_e2e_${crypto.randomUUID().replaceAll('-', '')}`;
  const domain = `acme-${crypto.randomUUID().slice(0, 8)}.test`;
  const ownerEmail = `owner@${domain}`;
  const accounts: Record<string, Record<string, unknown>> = {};
  let upstash: RateLimitStoreServer;
  let mail: Awaited<ReturnType<typeof startMailCapture>>;
  let dns: TestDnsServer;
  let tls: SelfSigned;
  let oidc: HttpsOidcProvider;
  let saml: TestSamlIdp;
  let worker: WranglerDev;
  const owner = new CookieJar();
  let organizationId: string;
  let oidcConnectionId: string;
  let oidcPerson: CookieJar;

  beforeAll(async () => {
    await createMigratedDatabase(servers, databaseName);
    upstash = await startRateLimitStore(servers, REDIS_DB);
    mail = await startMailCapture();
    dns = await startDnsServer();
    tls = selfSignedCertificate();
    oidc = await startHttpsOidcProvider({ tls, accounts });
    saml = await createSamlIdp({ ssoUrl: `${IDP_ORIGIN}/sso` });
    worker = await startWranglerDev({
      port: await freePort(),
      vars: (p) => ({
        NODE_ENV: 'production',
        AUTH_SECRET: randomSecret(40),
        AUTH_URL: `http://127.0.0.1:${p}`,
        APP_URL: APP_ORIGIN,
        CORS_ORIGIN: APP_ORIGIN,
        // Unused: the Hyperdrive binding wins.
        DATABASE_URL: withDatabaseName(servers.pgAppUrl.replace(':runtime@', ':not-the-password@'), databaseName),
        KV_REST_API_URL: upstash.url,
        KV_REST_API_TOKEN: upstash.token,
        RATE_LIMIT_AUTH_LIMIT: '100',
        RATE_LIMIT_GLOBAL_LIMIT: '1000',
        EMAIL_API_KEY: `re_e2e_${randomSecret(24)}`,
        EMAIL_API_URL: mail.url,
        EMAIL_FROM: 'Gatehouse <no-reply@gatehouse.test>',
        CRON_SECRET: randomSecret(32),
        SSO_ALLOW_PRIVATE_URLS: 'true',
        DNS_SERVERS: dns.address,
      }),
      env: {
        CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: withDatabaseName(servers.poolerAppUrl, databaseName),
        SSL_CERT_FILE: tls.certFile,
      },
    });
  });

  afterAll(async () => {
    await worker?.stop();
    if (upstash) await upstash.flush();
    await Promise.all([upstash?.close(), mail?.close(), dns?.close(), oidc?.close()]);
    await dropDatabase(servers, databaseName);
  });

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => console.error(`----- wrangler dev output (tail) -----\n${worker?.log().slice(-8_000)}`));
  });

  /** A request as the SPA on APP_URL sends it (JSON, its Origin, the jar's cookies); redirects are not followed. */
  async function call(path: string, options: { method?: string; body?: unknown; jar?: CookieJar } = {}) {
    const headers: Record<string, string> = { origin: APP_ORIGIN };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const cookie = options.jar?.header();
    if (cookie) headers.cookie = cookie;
    const res = await fetch(`${worker.url}${path}`, {
      method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      redirect: 'manual',
    });
    options.jar?.store(res);
    return res;
  }

  async function json<T = any>(res: Response, status: number): Promise<T> {
    const text = await res.text();
    expect(res.status, `${res.status} ${text}`).toBe(status);
    return (text ? JSON.parse(text) : null) as T;
  }

  /** The IdP's page posting the SAML response to the ACS, from its own origin, as a browser carries it. */
  async function postToAcs(connectionId: string, form: Record<string, string>, jar: CookieJar) {
    const res = await fetch(`${worker.url}/api/auth/sso/saml2/callback/${connectionId}`, {
      method: 'POST',
      headers: {
        origin: IDP_ORIGIN,
        'content-type': 'application/x-www-form-urlencoded',
        'sec-fetch-site': 'cross-site',
        'sec-fetch-mode': 'navigate',
      },
      body: new URLSearchParams(form).toString(),
      redirect: 'manual',
    });
    jar.store(res);
    return res;
  }

  it('an Owner signs up through the mailed link, creates the organization and proves the password again', async () => {
    await json(
      await call('/api/auth/sign-up/email', { body: { email: ownerEmail, password: PASSWORD, name: 'Olga Owner' } }),
      200,
    );
    await expect
      .poll(() => mail.emails.some((m) => [m.to].flat().includes(ownerEmail)), { timeout: 10_000 })
      .toBe(true);
    const link = new URL(firstLink(mail.emails.find((m) => [m.to].flat().includes(ownerEmail))!.text ?? ''));
    expect([200, 302]).toContain((await call(link.pathname + link.search)).status);
    await json(
      await call('/api/auth/sign-in/email', { body: { email: ownerEmail, password: PASSWORD }, jar: owner }),
      200,
    );
    const org = await json<{ id: string }>(
      await call('/api/auth/organization/create', {
        body: { name: 'Acme SSO', slug: `acme-${crypto.randomUUID().slice(0, 8)}` },
        jar: owner,
      }),
      200,
    );
    organizationId = org.id;
    await json(await call('/api/auth/organization/set-active', { body: { organizationId }, jar: owner }), 200);
    // The SSO management routes are sensitive (docs/security.md "Sensitive actions and step-up").
    await json(await call('/api/session/step-up', { body: { password: PASSWORD }, jar: owner }), 200);
  });

  it('verifies the domain by its TXT record, read over TCP through cloudflare:sockets from the DNS_SERVERS server', async () => {
    const claimed = await json<{ id: string; txtName: string; txtValue: string; status: string }>(
      await call('/api/sso/domains', { body: { domain }, jar: owner }),
      201,
    );
    expect(claimed).toMatchObject({ status: 'pending', txtName: `_gatehouse-challenge.${domain}` });
    // Not published yet: the server answers NXDOMAIN. The Worker asked it over TCP, the only transport
    // connect() offers (with DNS_SERVERS set it asks nobody else).
    const early = await json(await call(`/api/sso/domains/${claimed.id}/verify`, { method: 'POST', jar: owner }), 409);
    expect(early.code).toBe('DOMAIN_NOT_VERIFIED');
    expect(dns.questions).toContain(`${claimed.txtName} 16`);
    // Published as resolvers see long values: the token split into two character-strings, beside another record.
    dns.records.set(claimed.txtName, [['unrelated=1'], [claimed.txtValue.slice(0, 10), claimed.txtValue.slice(10)]]);
    const verified = await json(
      await call(`/api/sso/domains/${claimed.id}/verify`, { method: 'POST', jar: owner }),
      200,
    );
    expect(verified).toMatchObject({ id: claimed.id, domain, status: 'verified' });
  });

  it('creates the OIDC connection; the Worker fetches the discovery document over https, and refuses an http:// issuer', async () => {
    const clientId = `client-${crypto.randomUUID()}`;
    const clientSecret = `secret-${randomSecret(32)}`;
    const plain = await json(
      await call('/api/sso/connections', {
        body: { type: 'oidc', name: 'Plain', issuer: oidc.issuer.replace('https:', 'http:'), clientId, clientSecret },
        jar: owner,
      }),
      400,
    );
    expect(plain).toMatchObject({ code: 'VALIDATION_ERROR', details: [expect.objectContaining({ path: 'issuer' })] });
    const before = oidc.requests.length;
    const created = await json<{ id: string; type: string; sp: { redirectUri: string } }>(
      await call('/api/sso/connections', {
        body: { type: 'oidc', name: 'Acme IdP', issuer: oidc.issuer, clientId, clientSecret },
        jar: owner,
      }),
      201,
    );
    expect(oidc.requests.slice(before)).toEqual(['GET /.well-known/openid-configuration']);
    expect(created.sp.redirectUri).toBe(`${worker.url}/api/auth/sso/callback/${created.id}`);
    expect(JSON.stringify(created)).not.toContain(clientSecret);
    oidc.addClient({ client_id: clientId, client_secret: clientSecret, redirect_uris: [created.sp.redirectUri] });
    oidcConnectionId = created.id;
  });

  it('signs in through the OpenID Provider: its login, the Worker callback, a session in the organization', async () => {
    const sub = `oscar-${crypto.randomUUID().slice(0, 8)}`;
    const email = `${sub}@${domain}`;
    accounts[sub] = { email, email_verified: true, name: 'Oscar Oidc' };
    const browser = new CookieJar();
    const { url } = await json<{ url: string }>(
      await call('/api/auth/sign-in/sso', { body: { email, callbackURL: '/app' }, jar: browser }),
      200,
    );
    expect(url.startsWith(`${oidc.issuer}/auth?`), url).toBe(true);
    expect(new URL(url).searchParams.get('code_challenge_method')).toBe('S256');
    const callback = await oidc.signIn(url, sub);
    expect(callback.startsWith(`${worker.url}/api/auth/sso/callback/${oidcConnectionId}?`), callback).toBe(true);
    const before = oidc.requests.length;
    const answer = await call(callback.slice(worker.url.length), { jar: browser });
    expect(answer.status, await answer.text()).toBe(302);
    expect(answer.headers.get('location')).toBe('/app');
    // The code exchanged and the ID token's key fetched by the Worker (the JWKS is cached per isolate after this).
    expect(oidc.requests.slice(before)).toEqual(expect.arrayContaining(['POST /token', 'GET /jwks']));
    expect(browser.get(SESSION_COOKIE)).toBeDefined();
    const session = await json<SessionAnswer>(await call('/api/session', { jar: browser }), 200);
    expect(session.user).toMatchObject({ email, emailVerified: true });
    expect(session.session.activeOrganizationId).toBe(organizationId);
    // The same code again: the flow's state is spent.
    const replay = await call(callback.slice(worker.url.length), { jar: new CookieJar() });
    expect(replay.status).toBe(302);
    expect(new URL(replay.headers.get('location')!, APP_ORIGIN).searchParams.get('error')).toBe('invalid_state');
    oidcPerson = browser;
  });

  it('disabling the OIDC connection ends its sessions; a SAML connection signs in, samlify and xml-crypto at request time', async () => {
    await json(
      await call(`/api/sso/connections/${oidcConnectionId}`, { method: 'PATCH', body: { enabled: false }, jar: owner }),
      200,
    );
    expect(await json(await call('/api/session', { jar: oidcPerson }), 200)).toBeNull();
    const created = await json<{ id: string; sp: { acsUrl: string; entityId: string } }>(
      await call('/api/sso/connections', {
        body: { type: 'saml', name: 'Acme SAML', metadataXml: saml.metadataXml },
        jar: owner,
      }),
      201,
    );
    expect(created.sp.acsUrl).toBe(`${worker.url}/api/auth/sso/saml2/callback/${created.id}`);

    const email = `sara-${crypto.randomUUID().slice(0, 8)}@${domain}`;
    const start = async (errorCallbackURL?: string) => {
      const { url } = await json<{ url: string }>(
        await call('/api/auth/sign-in/sso', { body: { email, callbackURL: '/app', errorCallbackURL } }),
        200,
      );
      expect(url.startsWith(`${saml.ssoUrl}?SAMLRequest=`), url).toBe(true);
      return { url, relayState: new URL(url).searchParams.get('RelayState')! };
    };

    // Tampered: the signed assertion's NameID changed after signing; the digest no longer matches.
    const tampered = await start('/login');
    const genuine = Buffer.from(await saml.respond({ authnRequestUrl: tampered.url, email }), 'base64').toString();
    const forged = genuine.replace(`>${email}</saml:NameID>`, `>${ownerEmail}</saml:NameID>`);
    expect(forged).not.toBe(genuine);
    const refusedJar = new CookieJar();
    const refused = await postToAcs(
      created.id,
      { SAMLResponse: Buffer.from(forged).toString('base64'), RelayState: tampered.relayState },
      refusedJar,
    );
    expect(refused.status, await refused.text()).toBe(302);
    expect(refused.headers.get('location')).toBe('/login?error=invalid_response');
    expect(refusedJar.get(SESSION_COOKIE)).toBeUndefined();
    expect(await json(await call('/api/session', { jar: refusedJar }), 200)).toBeNull();

    const { url, relayState } = await start();
    const browser = new CookieJar();
    const answer = await postToAcs(
      created.id,
      { SAMLResponse: await saml.respond({ authnRequestUrl: url, email }), RelayState: relayState },
      browser,
    );
    expect(answer.status, await answer.text()).toBe(302);
    expect(answer.headers.get('location')).toBe('/app');
    const session = await json<SessionAnswer>(await call('/api/session', { jar: browser }), 200);
    expect(session.user).toMatchObject({ email, emailVerified: true });
    expect(session.session.activeOrganizationId).toBe(organizationId);
  });

  it('provisions over SCIM through the Worker: a token, a User found by filter, deactivated, deleted', async () => {
    const { token } = await json<{ token: string }>(
      await call('/api/scim/tokens', { body: { name: 'directory' }, jar: owner }),
      201,
    );
    const scim = (path: string, init: { method?: string; body?: unknown; token?: string } = {}) =>
      fetch(`${worker.url}/api/scim/v2${path}`, {
        method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
        headers: {
          ...(init.token === '' ? {} : { authorization: `Bearer ${init.token ?? token}` }),
          ...(init.body === undefined ? {} : { 'content-type': 'application/scim+json' }),
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
    const memberEmails = async () =>
      (await json<{ email: string }[]>(await call('/api/members', { jar: owner }), 200)).map((m) => m.email);
    const email = `provisioned-${crypto.randomUUID().slice(0, 8)}@${domain}`;

    const created = await json<{ id: string }>(
      await scim('/Users', {
        body: {
          schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
          userName: email,
          name: { givenName: 'Sam', familyName: 'Provisioned' },
          active: true,
        },
      }),
      201,
    );
    expect(created).toMatchObject({ userName: email, active: true, meta: { resourceType: 'User' } });
    expect(await memberEmails()).toContain(email);
    const found = await json<{ totalResults: number }>(
      await scim(`/Users?filter=${encodeURIComponent(`userName eq "${email.toUpperCase()}"`)}`),
      200,
    );
    expect(found.totalResults).toBe(1);

    await json(
      await scim(`/Users/${created.id}`, {
        method: 'PATCH',
        body: {
          schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
          Operations: [{ op: 'Replace', path: 'active', value: 'False' }],
        },
      }),
      200,
    );
    expect(await memberEmails()).not.toContain(email);
    expect((await scim(`/Users/${created.id}`, { method: 'DELETE' })).status).toBe(204);
    const gone = await scim(`/Users/${created.id}`);
    expect(gone.status).toBe(404);
    expect(gone.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    // Without the token: SCIM's error shape, from the Worker too.
    const refused = await scim('/Users', { token: '' });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'],
      status: '401',
    });
  });
});
