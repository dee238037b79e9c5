import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateScimToken } from '../../src/auth/scim-token-material.js';
import { insertScimToken } from '../../src/db/queries/scim-tokens.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus } from '../support/http.js';
import { ALL_PERMISSIONS, createOrganization, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/scim.md, the door: under /api/scim/v2 only a SCIM token in force
 * passes, and only for its organization; a session cookie or an API key is
 * 401 there; a SCIM token is nothing anywhere else. Every answer there is
 * SCIM's error shape as application/scim+json, and the SCIM tier counts
 * apart from the global one.
 */
const ERROR_URN = 'urn:ietf:params:scim:api:messages:2.0:Error';

async function expectScimError(response: Response, status: number, scimType?: string) {
  const body = await expectStatus<Record<string, unknown>>(response, status);
  expect(response.headers.get('content-type')).toBe('application/scim+json');
  expect(body).toEqual({
    schemas: [ERROR_URN],
    status: String(status),
    ...(scimType ? { scimType } : {}),
    detail: expect.any(String),
  });
  return body;
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A token of the organization, stored as POST /api/scim/tokens stores it. */
async function issueToken(t: Pick<TestApp, 'db'>, org: TestOrganization): Promise<string> {
  const material = generateScimToken();
  await insertScimToken(t.db, { tenantId: org.id, createdBy: org.owner.id, name: 'directory', material });
  return material.token;
}

describe('SCIM door', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let token: string;
  let otherToken: string;
  let apiKey: string;

  const newToken = (o: TestOrganization) => issueToken(t, o);

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    org = await createOrganization(t, await signedInUser(t));
    other = await createOrganization(t, await signedInUser(t));
    token = await newToken(org);
    otherToken = await newToken(other);
    const created = await call(t, '/api/api-keys', {
      body: { name: 'k', scopes: ALL_PERMISSIONS },
      jar: org.owner.jar,
    });
    apiKey = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('without a token, with a malformed, unknown or other bearer: 401 in SCIM shape, before any 404', async () => {
    for (const path of [
      '/api/scim/v2/ServiceProviderConfig',
      '/api/scim/v2/Users',
      '/api/scim/v2/Nope',
      '/api/scim/v2',
    ]) {
      const res = await call(t, path);
      await expectScimError(res, 401);
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
    const res = await call(t, '/api/scim/v2/Schemas');
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    for (const presented of ['scim_short', `scim_${'A'.repeat(40)}`, `${token}x`, token.toUpperCase(), apiKey])
      await expectScimError(await call(t, '/api/scim/v2/Schemas', { headers: bearer(presented) }), 401);
    // The scheme's name is case-insensitive (RFC 9110 §11.1); the token is not.
    await expectStatus(await call(t, '/api/scim/v2/Schemas', { headers: { authorization: `bearer ${token}` } }), 200);
  });

  it("a session cookie (an Owner's) is nothing under /api/scim/v2", async () => {
    await expectScimError(await call(t, '/api/scim/v2/ServiceProviderConfig', { jar: org.owner.jar }), 401);
    await expectScimError(await call(t, '/api/scim/v2/Users', { jar: org.owner.jar }), 401);
    // With the token too, the token alone counts: the answer is the token's.
    await expectStatus(
      await call(t, '/api/scim/v2/ServiceProviderConfig', { jar: org.owner.jar, headers: bearer(token) }),
      200,
    );
  });

  it('a SCIM token is nothing on any other route: never a session, never an API key', async () => {
    await expectError(await call(t, '/api/roles', { headers: bearer(token) }), 401, 'UNAUTHORIZED');
    await expectError(await call(t, '/api/members', { headers: bearer(token) }), 401, 'UNAUTHORIZED');
    await expectError(await call(t, '/api/api-keys', { headers: bearer(token) }), 401, 'UNAUTHORIZED');
    await expectError(await call(t, '/api/session', { headers: bearer(token) }), 401, 'UNAUTHORIZED');
    // Beside a valid session cookie too: the token is refused, not ignored.
    await expectError(await call(t, '/api/roles', { jar: org.owner.jar, headers: bearer(token) }), 401, 'UNAUTHORIZED');
    await expectError(
      await call(t, '/api/session', { jar: org.owner.jar, headers: bearer(token) }),
      401,
      'UNAUTHORIZED',
    );
    await expectError(await call(t, '/api/auth/get-session', { headers: bearer(token) }), 401, 'UNAUTHORIZED');
  });

  it('a token passes for its organization (and each its own); answers are application/scim+json, no-store', async () => {
    for (const presented of [token, otherToken]) {
      const res = await call(t, '/api/scim/v2/ServiceProviderConfig', { headers: bearer(presented) });
      await expectStatus(res, 200);
      expect(res.headers.get('content-type')).toBe('application/scim+json');
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
  });

  it('404, 405, 413 and 415 under /api/scim/v2 are SCIM errors', async () => {
    const headers = bearer(token);
    // Nothing under the prefix is cached: neither what the door answers nor the 413 and the body that is no JSON, refused before it.
    const missing = await call(t, '/api/scim/v2/Nope', { headers });
    await expectScimError(missing, 404);
    expect(missing.headers.get('cache-control')).toBe('no-store');
    await expectScimError(await call(t, '/api/scim/v2/ResourceTypes/Device', { headers }), 404);
    const notAllowed = await call(t, '/api/scim/v2/ServiceProviderConfig', { method: 'DELETE', headers });
    expect(notAllowed.headers.get('allow')).toBe('GET, HEAD');
    await expectScimError(notAllowed, 405);
    expect(notAllowed.headers.get('cache-control')).toBe('no-store');
    const big = await t.app.request('/api/scim/v2/Users', {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/scim+json', 'content-length': String(2 * 1024 * 1024) },
      body: 'x'.repeat(2 * 1024 * 1024),
    });
    await expectScimError(big, 413);
    expect(big.headers.get('cache-control')).toBe('no-store');
    const plain = await t.app.request('/api/scim/v2/Users', {
      method: 'POST',
      headers: { ...headers, 'content-type': 'text/plain' },
      body: 'userName=x',
    });
    await expectScimError(plain, 415);
    expect(plain.headers.get('cache-control')).toBe('no-store');
    const malformed = await t.app.request('/api/scim/v2/Users', {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/scim+json' },
      body: '{"userName":',
    });
    await expectScimError(malformed, 400, 'invalidSyntax');
    expect(malformed.headers.get('cache-control')).toBe('no-store');
    // Outside the prefix the service's own shape stays.
    await expectError(await call(t, '/api/scim/nope', { headers }), 404, 'NOT_FOUND');
  });
});

describe('SCIM rate-limit tier', () => {
  it('counts per token (or address) apart from the global tier, and answers 429 in SCIM shape', async () => {
    const setup = await createTestApp();
    const limited = await createTestApp({
      database: setup.database,
      env: { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_GLOBAL_LIMIT: '2', RATE_LIMIT_SCIM_LIMIT: '3' },
    });
    try {
      const owned = await createOrganization(setup, await signedInUser(setup));
      const tokens = [await issueToken(setup, owned), await issueToken(setup, owned)];
      const ip = '203.0.113.7';
      const scim = (headers: Record<string, string> = {}) =>
        call(limited, '/api/scim/v2/ServiceProviderConfig', { headers, ip });
      // Three for the first token: more than the global tier's two would allow.
      for (let i = 0; i < 3; i++) await expectStatus(await scim(bearer(tokens[0]!)), 200);
      const refused = await scim(bearer(tokens[0]!));
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(refused.headers.get('x-ratelimit-limit')).toBe('3');
      await expectScimError(refused, 429);
      // Another token from the same address has its own budget.
      await expectStatus(await scim(bearer(tokens[1]!)), 200);
      // Without a token, the address: three 401s, then 429.
      for (let i = 0; i < 3; i++) await expectScimError(await scim(), 401);
      await expectScimError(await scim(), 429);
      // The global tier of that address was not spent by any of it.
      for (let i = 0; i < 2; i++) await expectStatus(await call(limited, '/api/health', { ip }), 200);
      await expectError(await call(limited, '/api/health', { ip }), 429, 'RATE_LIMITED');
    } finally {
      await limited.close();
      await setup.close();
    }
  });
});
