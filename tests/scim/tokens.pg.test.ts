import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey, lookupDigest } from '../../src/auth/api-key-material.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus, UUID_V4 } from '../support/http.js';
import {
  ALL_PERMISSIONS,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  newMember,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/scim.md, the tokens: created by a fresh session with
 * organizations:write (never an API key), shown once, stored as a salted
 * hash and a lookup digest, listed without the token, revoked at once;
 * audited without token material.
 */
describe('SCIM tokens', () => {
  let t: TestApp;
  let org: TestOrganization;
  let viewer: TestMember;
  let apiKey: string;

  const create = (name: string, jar = org.owner.jar) => call(t, '/api/scim/tokens', { body: { name }, jar });
  const stored = (id: string, tenantId = org.id) =>
    asOwnerInTenant(t, tenantId, (trx) =>
      trx.selectFrom('scim_tokens').selectAll().where('id', '=', id).executeTakeFirst(),
    );
  const scim = (token: string) =>
    call(t, '/api/scim/v2/ServiceProviderConfig', { headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    org = await createOrganization(t, await signedInUser(t));
    viewer = await newMember(t, org, 'viewer');
    const created = await call(t, '/api/api-keys', {
      body: { name: 'all', scopes: ALL_PERMISSIONS },
      jar: org.owner.jar,
    });
    apiKey = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers the token once; stores only its salted hash and digest; audits no token material', async () => {
    const created = await expectStatus<{ id: string; name: string; createdAt: string; token: string }>(
      await create('Okta'),
      201,
    );
    expect(created).toEqual({
      id: expect.stringMatching(UUID_V4),
      name: 'Okta',
      createdAt: expect.any(String),
      token: expect.stringMatching(/^scim_[0-9A-Za-z]{40}$/),
    });
    const row = await stored(created.id);
    expect(row).toMatchObject({ tenant_id: org.id, created_by: org.owner.id, name: 'Okta', revoked_at: null });
    expect(row!.token_salt).toMatch(/^[0-9a-f]{32}$/);
    expect(row!.token_hash).toBe(hashKey(created.token, row!.token_salt));
    expect(row!.lookup_digest).toBe(lookupDigest(created.token));
    expect(JSON.stringify(row)).not.toContain(created.token);

    const listed = await expectStatus<unknown[]>(await call(t, '/api/scim/tokens', { jar: org.owner.jar }), 200);
    expect(listed).toContainEqual({ id: created.id, name: 'Okta', createdAt: created.createdAt, lastUsedAt: null });
    expect(JSON.stringify(listed)).not.toContain('scim_');

    const [entry] = (await auditRows(t, org.id, 'scim.token_created')).filter((e) => e.metadata.tokenId === created.id);
    expect(entry).toMatchObject({ actor_id: org.owner.id, metadata: { tokenId: created.id, name: 'Okta' } });
    const audit = JSON.stringify(await auditRows(t, org.id));
    for (const secret of [created.token, row!.token_hash, row!.token_salt, row!.lookup_digest])
      expect(audit).not.toContain(secret);
  });

  it('stamps lastUsedAt on use; a revoked token is refused on the next request, and listed no more', async () => {
    const created = await expectStatus<{ id: string; token: string }>(await create('Entra'), 201);
    await expectStatus(await scim(created.token), 200);
    await expect.poll(async () => (await stored(created.id))?.last_used_at).not.toBeNull();

    const removed = await call(t, `/api/scim/tokens/${created.id}`, { method: 'DELETE', jar: org.owner.jar });
    expect(await expectStatus(removed, 200)).toEqual({ id: created.id, deleted: true });
    const refused = await scim(created.token);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('content-type')).toBe('application/scim+json');
    expect((await stored(created.id))?.revoked_at).not.toBeNull();
    const listed = await expectStatus<{ id: string }[]>(await call(t, '/api/scim/tokens', { jar: org.owner.jar }), 200);
    expect(listed.map((token) => token.id)).not.toContain(created.id);
    const [entry] = (await auditRows(t, org.id, 'scim.token_revoked')).filter((e) => e.metadata.tokenId === created.id);
    expect(entry).toMatchObject({ actor_id: org.owner.id, metadata: { tokenId: created.id, name: 'Entra' } });
    // Revoked already: nothing left to revoke, and no second entry.
    await expectError(
      await call(t, `/api/scim/tokens/${created.id}`, { method: 'DELETE', jar: org.owner.jar }),
      404,
      'NOT_FOUND',
    );
    expect(
      (await auditRows(t, org.id, 'scim.token_revoked')).filter((e) => e.metadata.tokenId === created.id),
    ).toHaveLength(1);
  });

  it("another organization's token is neither listed nor revoked", async () => {
    const other = await createOrganization(t, await signedInUser(t));
    const theirs = await expectStatus<{ id: string; token: string }>(await create('Theirs', other.owner.jar), 201);
    const listed = await expectStatus<{ id: string }[]>(await call(t, '/api/scim/tokens', { jar: org.owner.jar }), 200);
    expect(listed.map((token) => token.id)).not.toContain(theirs.id);
    await expectError(
      await call(t, `/api/scim/tokens/${theirs.id}`, { method: 'DELETE', jar: org.owner.jar }),
      404,
      'NOT_FOUND',
    );
    expect((await stored(theirs.id, other.id))?.revoked_at).toBeNull();
    await expectStatus(await scim(theirs.token), 200);
  });

  it('a Viewer lists but creates and revokes nothing; an API key does neither; a stale session must step up', async () => {
    const created = await expectStatus<{ id: string }>(await create('Kept'), 201);
    // organizations:read lists them (never the token); organizations:write changes them.
    const seen = await expectStatus<{ id: string }[]>(await call(t, '/api/scim/tokens', { jar: viewer.jar }), 200);
    expect(seen.map((token) => token.id)).toContain(created.id);
    await expectError(await create('x', viewer.jar), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectError(
      await call(t, `/api/scim/tokens/${created.id}`, { method: 'DELETE', jar: viewer.jar }),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    const keyed = { authorization: `Bearer ${apiKey}` };
    await expectError(await call(t, '/api/scim/tokens', { headers: keyed }), 403, 'FORBIDDEN');
    await expectError(await call(t, '/api/scim/tokens', { body: { name: 'k' }, headers: keyed }), 403, 'FORBIDDEN');
    await expectError(
      await call(t, `/api/scim/tokens/${created.id}`, { method: 'DELETE', headers: keyed }),
      403,
      'FORBIDDEN',
    );

    await t.database.withOwner((owner) =>
      owner
        .updateTable('sessions')
        .set({ step_up_at: new Date(t.clock().getTime() - (t.config.stepUp.maxAgeSeconds + 1) * 1000) })
        .where('user_id', '=', org.owner.id)
        .execute(),
    );
    await expectStatus(await call(t, '/api/scim/tokens', { jar: org.owner.jar }), 200);
    await expectError(await create('stale'), 403, 'STEP_UP_REQUIRED');
    await expectError(
      await call(t, `/api/scim/tokens/${created.id}`, { method: 'DELETE', jar: org.owner.jar }),
      403,
      'STEP_UP_REQUIRED',
    );
    expect((await stored(created.id))?.revoked_at).toBeNull();
  });

  it('refuses a name that is empty, too long or not text', async () => {
    const owner = await signedInUser(t);
    await createOrganization(t, owner);
    for (const name of ['', 'x'.repeat(101), 'a\u0000b'])
      await expectError(await create(name, owner.jar), 400, 'VALIDATION_ERROR');
    await expectError(
      await call(t, '/api/scim/tokens', { body: { name: 'n', token: 'scim_mine' }, jar: owner.jar }),
      400,
      'VALIDATION_ERROR',
    );
  });
});
