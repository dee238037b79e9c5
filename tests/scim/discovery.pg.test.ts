import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateScimToken } from '../../src/auth/scim-token-material.js';
import { insertScimToken } from '../../src/db/queries/scim-tokens.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { createOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * RFC 7643 §5-7, RFC 7644 §4: what the SCIM service says of itself, behind
 * the same door as every SCIM endpoint, stating exactly what it supports.
 */
const CORE = 'urn:ietf:params:scim:schemas:core:2.0';
type Json = Record<string, any>;

describe('SCIM discovery', () => {
  let t: TestApp;
  let headers: Record<string, string>;
  let base: string;
  const get = async (path: string) => {
    const res = await call(t, `/api/scim/v2${path}`, { headers });
    const body = await expectStatus<Json>(res, 200);
    expect(res.headers.get('content-type')).toBe('application/scim+json');
    return body;
  };

  beforeAll(async () => {
    t = await createTestApp();
    const org = await createOrganization(t, await signedInUser(t));
    const material = generateScimToken();
    await insertScimToken(t.db, { tenantId: org.id, createdBy: org.owner.id, name: 'discovery', material });
    headers = { authorization: `Bearer ${material.token}` };
    base = `${t.config.auth.url.replace(/\/+$/, '')}/api/scim/v2`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('every discovery endpoint needs a token', async () => {
    for (const path of ['/ServiceProviderConfig', '/ResourceTypes', '/ResourceTypes/User', '/Schemas'])
      expect((await call(t, `/api/scim/v2${path}`)).status).toBe(401);
  });

  it('ServiceProviderConfig: patch, filter (200 at most) and ETags; no bulk, sort or password change', async () => {
    expect(await get('/ServiceProviderConfig')).toEqual({
      schemas: [`${CORE}:ServiceProviderConfig`],
      patch: { supported: true },
      bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
      filter: { supported: true, maxResults: 200 },
      changePassword: { supported: false },
      sort: { supported: false },
      etag: { supported: true },
      authenticationSchemes: [
        expect.objectContaining({ type: 'oauthbearertoken', name: 'OAuth Bearer Token', primary: true }),
      ],
      meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
    });
  });

  it('ResourceTypes: User and Group, as a list and one by one', async () => {
    const list = await get('/ResourceTypes');
    expect(list).toMatchObject({
      schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
      totalResults: 2,
      itemsPerPage: 2,
      startIndex: 1,
    });
    expect(list.Resources).toEqual([
      {
        schemas: [`${CORE}:ResourceType`],
        id: 'User',
        name: 'User',
        endpoint: '/Users',
        description: expect.any(String),
        schema: `${CORE}:User`,
        meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` },
      },
      expect.objectContaining({ id: 'Group', endpoint: '/Groups', schema: `${CORE}:Group` }),
    ]);
    expect(await get('/ResourceTypes/Group')).toEqual(list.Resources[1]);
    const unknown = await call(t, '/api/scim/v2/ResourceTypes/Device', { headers });
    expect(unknown.status).toBe(404);
  });

  it('Schemas: the User and Group attributes served, with mutability, returned and uniqueness', async () => {
    const list = await get('/Schemas');
    expect(list.totalResults).toBe(2);
    const [user, group] = list.Resources as Json[];
    expect(user).toMatchObject({
      schemas: [`${CORE}:Schema`],
      id: `${CORE}:User`,
      name: 'User',
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${CORE}:User` },
    });
    const byName = (schema: Json) => Object.fromEntries(schema.attributes.map((a: Json) => [a.name, a]));
    const users = byName(user!);
    expect(Object.keys(users).sort()).toEqual(['active', 'displayName', 'emails', 'groups', 'name', 'userName']);
    expect(users.userName).toMatchObject({ type: 'string', required: true, caseExact: false, uniqueness: 'server' });
    expect(users.active).toMatchObject({ type: 'boolean', mutability: 'readWrite' });
    expect(users.groups).toMatchObject({ multiValued: true, mutability: 'readOnly' });
    expect(users.name.subAttributes.map((a: Json) => a.name).sort()).toEqual(['familyName', 'formatted', 'givenName']);
    const groups = byName(group!);
    expect(Object.keys(groups).sort()).toEqual(['displayName', 'members']);
    expect(groups.displayName).toMatchObject({ required: true, uniqueness: 'server' });
    expect(groups.members.subAttributes.map((a: Json) => a.name).sort()).toEqual(['$ref', 'display', 'value']);
    // Every attribute states the characteristics RFC 7643 §7 gives each.
    const every = (attributes: Json[]): Json[] => attributes.flatMap((a) => [a, ...every(a.subAttributes ?? [])]);
    for (const attribute of every([...user!.attributes, ...group!.attributes]))
      expect(Object.keys(attribute)).toEqual(
        expect.arrayContaining(['name', 'type', 'multiValued', 'required', 'mutability', 'returned', 'uniqueness']),
      );
    expect(await get(`/Schemas/${CORE}:Group`)).toEqual(group);
    expect((await call(t, '/api/scim/v2/Schemas/urn:example:Device', { headers })).status).toBe(404);
  });

  it('refuses a filter on the discovery lists rather than ignore it (RFC 7644 §4)', async () => {
    for (const path of ['/Schemas', '/ResourceTypes']) {
      const res = await call(t, `/api/scim/v2${path}?filter=${encodeURIComponent('id eq "User"')}`, { headers });
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toBe('application/scim+json');
    }
  });
});
