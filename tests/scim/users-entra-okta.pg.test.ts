import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { createOrganization, listMembers, type TestOrganization } from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';
import { expectScim, LIST, mintToken, PATCH, type Scim, scimClient, USER } from './users-client.js';

/**
 * The request sequences of the two directories' provisioning clients,
 * replayed as they send them (Microsoft's "Develop a SCIM endpoint" request
 * examples and SCIM validator; Okta's SCIM 2.0 test plan and its
 * provisioning of an app with Push Profile Updates and Deactivate): each
 * ends in the membership and role the directory meant.
 */
const ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';

describe('SCIM Users as Entra ID and Okta provision them', () => {
  let t: TestApp;
  let org: TestOrganization;
  let scim: Scim;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    scim = scimClient(t, (await mintToken(t, org)).token);
  });
  afterAll(async () => {
    await t?.close();
  });

  const memberRole = async (userId: string) =>
    (await listMembers(t, org.owner)).find((m) => m.userId === userId)?.roleSlug ?? null;
  const byUserName = async (userName: string) =>
    expectScim(await scim(`/Users?filter=${encodeURIComponent(`userName eq "${userName}"`)}`), 200);

  it('Entra ID: query, create, get, update, disable, enable, delete', async () => {
    const userName = `Test_User_${crypto.randomUUID().slice(0, 8)}@Contoso.example`;
    expect(await byUserName(userName)).toEqual({
      schemas: [LIST],
      totalResults: 0,
      startIndex: 1,
      itemsPerPage: 0,
      Resources: [],
    });
    const created = await expectScim(
      await scim('/Users', {
        body: {
          schemas: [USER, ENTERPRISE],
          externalId: '0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef',
          userName,
          active: true,
          emails: [{ primary: true, type: 'work', value: `Test_User_mail@contoso.example` }],
          meta: { resourceType: 'User' },
          name: { formatted: 'givenName familyName', familyName: 'familyName', givenName: 'givenName' },
          roles: [],
          [ENTERPRISE]: { department: 'Sales', manager: { value: 'someone' } },
        },
      }),
      201,
    );
    expect(created).toMatchObject({
      userName: userName.toLowerCase(),
      displayName: 'givenName familyName',
      active: true,
    });
    expect(await memberRole(created.id)).toBe('member');
    expect(await expectScim(await scim(`/Users/${created.id}`), 200)).toEqual(created);
    const found = await byUserName(userName);
    expect(found.Resources.map((u: any) => u.id)).toEqual([created.id]);
    // The attribute update: capitalised ops, value filters, the extension (ignored).
    const updated = await expectScim(
      await scim(`/Users/${created.id}`, {
        method: 'PATCH',
        body: {
          schemas: [PATCH],
          Operations: [
            { op: 'Replace', path: 'emails[type eq "work"].value', value: 'updatedEmail@contoso.example' },
            { op: 'Replace', path: 'name.familyName', value: 'updatedFamilyName' },
            { op: 'Add', path: `${ENTERPRISE}:department`, value: 'Marketing' },
            { op: 'Replace', path: 'externalId', value: '0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef' },
          ],
        },
      }),
      200,
    );
    expect(updated).toMatchObject({ name: { formatted: 'givenName updatedFamilyName' }, userName: created.userName });
    // Unassigned: PATCH active "False" (a string, as Entra sends it).
    const disabled = { schemas: [PATCH], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] };
    expect(
      await expectScim(await scim(`/Users/${created.id}`, { method: 'PATCH', body: disabled }), 200),
    ).toMatchObject({
      active: false,
    });
    expect(await memberRole(created.id)).toBeNull();
    expect((await byUserName(userName)).Resources[0].active).toBe(false);
    // Assigned again: the same resource, PATCH active "True".
    const enabled = { schemas: [PATCH], Operations: [{ op: 'Replace', path: 'active', value: 'True' }] };
    expect(await expectScim(await scim(`/Users/${created.id}`, { method: 'PATCH', body: enabled }), 200)).toMatchObject(
      {
        active: true,
      },
    );
    expect(await memberRole(created.id)).toBe('member');
    // Deleted in Entra after the soft-delete period.
    expect((await scim(`/Users/${created.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await memberRole(created.id)).toBeNull();
    await expectScim(await scim(`/Users/${created.id}`), 404);
    expect((await byUserName(userName)).totalResults).toBe(0);
  });

  it('Okta: list, miss, create, get, find, duplicate, unknown id, update by PUT, deactivate, reactivate', async () => {
    const list = await expectScim(await scim('/Users?count=1&startIndex=1'), 200);
    expect(list).toMatchObject({ schemas: [LIST], startIndex: 1 });
    expect(list.Resources.length).toBeLessThanOrEqual(1);
    const userName = uniqueEmail('okta');
    expect((await byUserName(userName)).totalResults).toBe(0);
    const body = {
      schemas: [USER],
      userName,
      name: { givenName: 'Okta', familyName: 'Tester' },
      emails: [{ primary: true, value: userName, type: 'work' }],
      displayName: 'Okta Tester',
      locale: 'en-US',
      externalId: '00u1abcd',
      groups: [],
      password: 'never-stored-1A!',
      active: true,
    };
    const created = await expectScim(await scim('/Users', { body }), 201);
    expect(created).toMatchObject({ userName, displayName: 'Okta Tester', externalId: '00u1abcd', active: true });
    expect(await expectScim(await scim(`/Users/${created.id}`), 200)).toEqual(created);
    expect((await byUserName(userName)).Resources[0].id).toBe(created.id);
    await expectScim(await scim('/Users', { body }), 409, 'uniqueness');
    await expectScim(await scim(`/Users/${crypto.randomUUID()}`), 404);
    // Push Profile Updates: the whole user, by PUT.
    const put = await expectScim(
      await scim(`/Users/${created.id}`, {
        method: 'PUT',
        body: { ...created, displayName: 'Okta Renamed', name: { givenName: 'Okta', familyName: 'Renamed' } },
      }),
      200,
    );
    expect(put).toMatchObject({ displayName: 'Okta Renamed', active: true, meta: { version: 'W/"2"' } });
    // Deactivate and reactivate: a value object without a path.
    const active = (value: boolean) => ({
      schemas: [PATCH],
      Operations: [{ op: 'replace', value: { active: value } }],
    });
    expect(
      await expectScim(await scim(`/Users/${created.id}`, { method: 'PATCH', body: active(false) }), 200),
    ).toMatchObject({
      active: false,
    });
    expect(await memberRole(created.id)).toBeNull();
    expect(
      await expectScim(await scim(`/Users/${created.id}`, { method: 'PATCH', body: active(true) }), 200),
    ).toMatchObject({
      active: true,
    });
    expect(await memberRole(created.id)).toBe('member');
    // The password was never kept: the account has no credential.
    const accounts = await t.database.withOwner((db) =>
      db.selectFrom('accounts').select('id').where('user_id', '=', created.id).execute(),
    );
    expect(accounts).toEqual([]);
  });
});
