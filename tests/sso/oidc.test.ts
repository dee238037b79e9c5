import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SsoConfigError, SsoFlowError } from '../../src/sso/errors.js';
import type { SsoFetchPolicy } from '../../src/sso/fetch.js';
import {
  authorizationUrl,
  completeOidc,
  discoverOidc,
  newPkce,
  type OidcProviderMetadata,
  randomToken,
} from '../../src/sso/oidc.js';
import {
  createFakeIdp,
  createOidcProvider,
  type FakeIdp,
  type FakeSigning,
  type OidcTestProvider,
} from '../support/oidc-provider.js';

/**
 * docs/sso.md "Sign-in" and "Addresses", the OpenID Connect side: discovery,
 * the authorization request and the code exchange against panva's
 * oidc-provider on loopback, and every ID token a client must refuse,
 * answered by a fake token endpoint (a real provider would not sign them).
 */
const open: SsoFetchPolicy = { fetch, allowPrivateUrls: true, httpsOnly: false };
const closed: SsoFetchPolicy = { ...open, allowPrivateUrls: false };
const REDIRECT = 'http://localhost:3000/api/auth/sso/callback/connection-1';
/** Every character RFC 6749 section 2.3.1 form-encodes before Basic: the provider accepting it proves the encoding. */
const SECRET = 'se cr:et+/%&=?';

const configError = async (promise: Promise<unknown>) => {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(SsoConfigError);
  expect((error as SsoConfigError).field).toBe('issuer');
  return (error as SsoConfigError).message;
};

const flowError = async (promise: Promise<unknown>, code: SsoFlowError['code'], secrets: string[] = []) => {
  const outcome = await promise.then(
    (claims) => ({ claims }),
    (error: unknown) => ({ error }),
  );
  expect(outcome).not.toHaveProperty('claims');
  const { error } = outcome as { error: unknown };
  expect(error).toBeInstanceOf(SsoFlowError);
  expect((error as SsoFlowError).code).toBe(code);
  for (const secret of secrets) expect((error as SsoFlowError).message).not.toContain(secret);
  return (error as SsoFlowError).message;
};

describe('OIDC against a real provider', () => {
  let idp: OidcTestProvider;
  let strict: OidcTestProvider;
  let meta: OidcProviderMetadata;

  beforeAll(async () => {
    const accounts = {
      alice: { email: ' Alice@Example.COM ', email_verified: true, name: 'Alice Example', groups: ['eng', 'admins'] },
      bob: { email: 'bob@example.com', email_verified: false },
      nomail: { name: 'No Mail' },
    };
    idp = await createOidcProvider({
      clients: [{ client_id: 'gatehouse', client_secret: SECRET, redirect_uris: [REDIRECT] }],
      accounts,
    });
    strict = await createOidcProvider({ accounts, claimsInIdToken: false });
    strict.addClient({ client_id: 'late', client_secret: 'late-secret', redirect_uris: [REDIRECT] });
    meta = await discoverOidc(idp.issuer, open);
  });
  afterAll(async () => {
    await idp.close();
    await strict.close();
  });

  /** A sign-in as `sub` up to the callback: what the caller keeps, and the code the provider sent back. */
  async function authorize(sub: string, on = idp, discovered = meta, clientId = 'gatehouse') {
    const pkce = await newPkce();
    const state = randomToken();
    const nonce = randomToken();
    const url = authorizationUrl(discovered, {
      clientId,
      redirectUri: REDIRECT,
      scopes: ['email', 'profile', 'groups'],
      state,
      nonce,
      codeChallenge: pkce.challenge,
      loginHint: `${sub}@example.com`,
    });
    const back = new URL(await on.signIn(url, { sub }));
    expect(back.searchParams.get('state')).toBe(state);
    const code = back.searchParams.get('code');
    expect(code).toBeTruthy();
    return { code: code!, verifier: pkce.verifier, nonce };
  }

  const complete = (flow: { code: string; verifier: string; nonce: string }, overrides = {}) =>
    completeOidc({
      meta,
      clientId: 'gatehouse',
      clientSecret: SECRET,
      redirectUri: REDIRECT,
      code: flow.code,
      codeVerifier: flow.verifier,
      nonce: flow.nonce,
      policy: open,
      ...overrides,
    });

  it('discovers the endpoints under the issuer', () => {
    expect(meta).toEqual({
      issuer: idp.issuer,
      authorization_endpoint: `${idp.issuer}/auth`,
      token_endpoint: `${idp.issuer}/token`,
      jwks_uri: `${idp.issuer}/jwks`,
      userinfo_endpoint: `${idp.issuer}/me`,
    });
  });

  it('refuses an issuer the document does not name exactly', async () => {
    // Same document (the slash is removed before the well-known suffix), but it names the issuer without one.
    expect(await configError(discoverOidc(`${idp.issuer}/`, open))).toMatch(/another issuer/);
    expect(await configError(discoverOidc(`${idp.issuer}?x=1`, open))).toMatch(/no query/);
    expect(await configError(discoverOidc('not a url', open))).toMatch(/absolute URL/);
  });

  it('refuses an issuer at a loopback address unless private URLs are allowed', async () => {
    expect(await configError(discoverOidc(idp.issuer, closed))).toMatch(/private address/);
    expect(await configError(discoverOidc(idp.issuer, { ...open, httpsOnly: true }))).toMatch(/https/);
  });

  it('builds the authorization request: code, query mode, S256, state, nonce, openid once', async () => {
    const url = new URL(
      authorizationUrl(meta, {
        clientId: 'gatehouse',
        redirectUri: REDIRECT,
        scopes: ['openid', 'email'],
        state: 's',
        nonce: 'n',
        codeChallenge: 'c',
      }),
    );
    expect(`${url.origin}${url.pathname}`).toBe(meta.authorization_endpoint);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      response_type: 'code',
      response_mode: 'query',
      client_id: 'gatehouse',
      redirect_uri: REDIRECT,
      scope: 'openid email',
      state: 's',
      nonce: 'n',
      code_challenge: 'c',
      code_challenge_method: 'S256',
    });
    const { verifier, challenge } = await newPkce();
    expect(verifier).toMatch(/^[\w-]{43}$/);
    const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
    expect(challenge).toBe(Buffer.from(digest).toString('base64url'));
    expect(randomToken()).not.toBe(randomToken());
  });

  it('exchanges the code and answers the verified claims', async () => {
    const identity = await complete(await authorize('alice'));
    expect(identity).toMatchObject({
      subject: 'alice',
      email: 'alice@example.com',
      emailVerified: true,
      name: 'Alice Example',
    });
    expect(identity.claims).toMatchObject({ iss: idp.issuer, aud: 'gatehouse', groups: ['eng', 'admins'] });
    const bob = await complete(await authorize('bob'));
    expect(bob).toMatchObject({ subject: 'bob', email: 'bob@example.com', emailVerified: false });
    expect(bob).not.toHaveProperty('name');
  });

  it('reads the email from the userinfo endpoint when the ID token has none', async () => {
    const discovered = await discoverOidc(strict.issuer, open);
    const flow = await authorize('alice', strict, discovered, 'late');
    const identity = await completeOidc({
      meta: discovered,
      clientId: 'late',
      clientSecret: 'late-secret',
      redirectUri: REDIRECT,
      code: flow.code,
      codeVerifier: flow.verifier,
      nonce: flow.nonce,
      policy: open,
    });
    expect(identity).toMatchObject({ subject: 'alice', email: 'alice@example.com', emailVerified: true });
    expect(identity.claims.groups).toEqual(['eng', 'admins']);
  });

  it('refuses an account without an email', async () => {
    expect(await flowError(complete(await authorize('nomail')), 'invalid_response')).toMatch(/no email/);
  });

  it('refuses the ID token of another sign-in (nonce)', async () => {
    const flow = await authorize('alice');
    await flowError(complete({ ...flow, nonce: randomToken() }), 'invalid_response', [flow.code]);
  });

  it('the provider refuses a wrong verifier, a used code and a wrong secret; nothing of them in the message', async () => {
    const flow = await authorize('alice');
    expect(await flowError(complete({ ...flow, verifier: randomToken() }), 'idp_error', [flow.code])).toMatch(
      /400: invalid_grant/,
    );
    const again = await authorize('alice');
    await complete(again);
    await flowError(complete(again), 'idp_error', [again.code]);
    const third = await authorize('alice');
    const wrong = 'wrong-secret-value';
    expect(await flowError(complete(third, { clientSecret: wrong }), 'idp_error', [wrong, SECRET, third.code])).toMatch(
      /401: invalid_client/,
    );
  });

  it('refuses a token endpoint at a loopback address unless private URLs are allowed', async () => {
    const flow = await authorize('alice');
    expect(await flowError(complete(flow, { policy: closed }), 'idp_error', [flow.code])).toMatch(/private address/);
  });
});

describe('ID tokens a client must refuse', () => {
  const clientId = 'gatehouse';
  const nonce = randomToken();
  let fake: FakeIdp;
  let meta: OidcProviderMetadata;

  beforeAll(async () => {
    fake = await createFakeIdp({ clientId, nonce });
    meta = await discoverOidc(fake.issuer, open);
  });
  afterAll(() => fake.close());

  const now = () => Math.floor(Date.now() / 1000);
  async function answeredWith(claims: Record<string, unknown>, signing?: FakeSigning, at?: Date) {
    const token = await fake.mint(claims, signing);
    fake.answer(token);
    const promise = completeOidc({
      meta,
      clientId,
      clientSecret: 'the-client-secret',
      redirectUri: REDIRECT,
      code: 'the-code',
      codeVerifier: 'the-verifier',
      nonce,
      policy: open,
      now: at,
    });
    return { promise, token };
  }
  const refused = async (claims: Record<string, unknown>, signing?: FakeSigning, at?: Date) => {
    const { promise, token } = await answeredWith(claims, signing, at);
    return flowError(promise, 'invalid_response', [token, 'the-client-secret', 'the-code']);
  };

  it('accepts the well-formed token (the control for every refusal below)', async () => {
    const { promise } = await answeredWith({ sub: 'someone', groups: ['eng'] });
    expect(await promise).toMatchObject({ subject: 'someone', email: 'person@example.com', emailVerified: true });
    const request = fake.lastTokenRequest()!;
    expect(request.authorization).toBe(`Basic ${btoa('gatehouse:the-client-secret')}`);
    expect(Object.fromEntries(request.body)).toEqual({
      grant_type: 'authorization_code',
      code: 'the-code',
      redirect_uri: REDIRECT,
      code_verifier: 'the-verifier',
    });
  });

  it('accepts a clock 60 seconds off, not more', async () => {
    await expect((await answeredWith({ exp: now() - 50 })).promise).resolves.toBeTruthy();
    await expect((await answeredWith({ iat: now() + 50, nbf: now() + 50 })).promise).resolves.toBeTruthy();
    expect(await refused({ exp: now() - 70 })).toMatch(/ERR_JWT_EXPIRED/);
    expect(await refused({ nbf: now() + 120 })).toMatch(/nbf/);
    expect(await refused({ iat: now() + 120 })).toMatch(/iat/);
    expect(await refused({ iat: now() - 3600, exp: now() + 3600 })).toMatch(/iat/);
    // The injected time decides, not the machine's.
    expect(await refused({}, 'jwks', new Date(Date.now() + 10 * 60_000))).toMatch(/ERR_JWT_EXPIRED/);
  });

  it('refuses another nonce, or none', async () => {
    expect(await refused({ nonce: randomToken() })).toMatch(/nonce/);
    expect(await refused({ nonce: undefined })).toMatch(/nonce/);
  });

  it('refuses a token from another issuer', async () => {
    expect(await refused({ iss: 'https://attacker.example' })).toMatch(/iss/);
  });

  it('refuses a token for another audience, or for several without azp naming this client', async () => {
    expect(await refused({ aud: 'another-client' })).toMatch(/aud/);
    expect(await refused({ aud: [clientId, 'another-client'] })).toMatch(/azp/);
    expect(await refused({ aud: [clientId, 'another-client'], azp: 'another-client' })).toMatch(/azp/);
    expect(await refused({ azp: 'another-client' })).toMatch(/azp/);
    const { promise } = await answeredWith({ aud: [clientId, 'another-client'], azp: clientId });
    await expect(promise).resolves.toBeTruthy();
  });

  it('refuses an unsigned token (alg none)', async () => {
    expect(await refused({}, 'none')).toMatch(/ERR_JOSE_ALG_NOT_ALLOWED/);
  });

  it('refuses a token signed by a key the JWKS does not publish', async () => {
    expect(await refused({}, 'unknown-kid')).toMatch(/ERR_JWKS_NO_MATCHING_KEY/);
    expect(await refused({}, 'same-kid-other-key')).toMatch(/ERR_JWS_SIGNATURE_VERIFICATION_FAILED/);
  });

  it('refuses HS256 keyed with the client secret', async () => {
    expect(await refused({}, { hs256: 'the-client-secret' })).toMatch(/ERR_JOSE_ALG_NOT_ALLOWED/);
  });

  it('believes a userinfo answer only about the subject of the ID token', async () => {
    fake.answerUserinfo({ sub: 'victim', email: 'victim@example.com', email_verified: true });
    expect(await refused({ sub: 'attacker', email: undefined })).toMatch(/another subject/);
    fake.answerUserinfo({ sub: 'someone', email: 'Someone@Example.com', email_verified: 'false' });
    const { promise } = await answeredWith({ sub: 'someone', email: undefined, email_verified: undefined });
    expect(await promise).toMatchObject({ subject: 'someone', email: 'someone@example.com', emailVerified: false });
  });

  it('refuses a token without a subject, or a token response without an ID token', async () => {
    expect(await refused({ sub: undefined })).toMatch(/sub/);
    fake.answer('');
    const promise = completeOidc({
      meta,
      clientId,
      clientSecret: 'the-client-secret',
      redirectUri: REDIRECT,
      code: 'the-code',
      codeVerifier: 'the-verifier',
      nonce,
      policy: open,
    });
    await flowError(promise, 'invalid_response');
  });
});

describe('discovery documents that point inward', () => {
  let server: Server;
  let base = '';
  let document: Record<string, unknown> = {};

  beforeAll(async () => {
    server = createServer((request, response) => {
      if (request.url === '/moved/.well-known/openid-configuration') {
        response.writeHead(302, { location: `${base}/.well-known/openid-configuration` });
        return response.end();
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(document));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /**
   * A public issuer (its name resolves to a public address) whose requests
   * arrive at this server, as a pinned fetch would connect them.
   */
  const publicIssuer = 'https://idp.example.com';
  const pinnedHere: SsoFetchPolicy = {
    allowPrivateUrls: false,
    httpsOnly: true,
    resolve: async (host) => (host === 'idp.example.com' ? ['93.184.215.14'] : ['10.0.0.8']),
    fetch: (input, init) => fetch(`${base}${new URL(String(input)).pathname}`, init),
  };

  const endpoints = (overrides: Record<string, unknown>) => ({
    issuer: publicIssuer,
    authorization_endpoint: `${publicIssuer}/authorize`,
    token_endpoint: `${publicIssuer}/token`,
    jwks_uri: `${publicIssuer}/jwks`,
    ...overrides,
  });

  it('accepts public endpoints (the control)', async () => {
    document = endpoints({});
    expect(await discoverOidc(publicIssuer, pinnedHere)).toMatchObject(endpoints({}));
  });

  it('refuses endpoints at private addresses, by literal or by name', async () => {
    for (const jwks of [
      'https://169.254.169.254/keys',
      'https://internal.example.com/keys',
      'http://idp.example.com/k',
    ]) {
      document = endpoints({ jwks_uri: jwks });
      expect(await configError(discoverOidc(publicIssuer, pinnedHere))).toMatch(/^jwks_uri: /);
    }
    document = endpoints({ token_endpoint: 'https://[fd00::1]/token' });
    expect(await configError(discoverOidc(publicIssuer, pinnedHere))).toMatch(/^token_endpoint: .*private address/);
    document = endpoints({ token_endpoint: undefined });
    expect(await configError(discoverOidc(publicIssuer, pinnedHere))).toMatch(/no token_endpoint/);
  });

  it('refuses a discovery document that redirects', async () => {
    document = endpoints({ issuer: `${base}/moved` });
    expect(await configError(discoverOidc(`${base}/moved`, open))).toMatch(/redirect/);
  });
});
