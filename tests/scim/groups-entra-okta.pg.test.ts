import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { asOwnerInTenant, createOrganization, roleBySlug, type TestOrganization } from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';

/**
 * docs/scim.md "Groups": the group requests Microsoft Entra ID's and Okta's
 * provisioning clients send, replayed as their published SCIM test plans
 * show them (capitalised ops, `members` added and removed by value lists,
 * `members[value eq "…"]` removals, `replace` of displayName with and
 * without a path, PUT as full replacement), each sequence ending in the
 * members and roles the directory meant. Plus every other PATCH form and
 * refusal (noTarget, invalidPath, mutability, invalidValue).
 */
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
const PATCH = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';

interface Group {
  id: string;
  displayName: string;
  externalId?: string;
  members?: { value: string; display: string }[];
  meta: { version: string };
}
interface Directory {
  org: TestOrganization;
  token: string;
}

describe('SCIM Groups as Entra ID and Okta send them', () => {
  let t: TestApp;

  const scim = (dir: Directory, path: string, method = 'GET', body?: unknown) =>
    t.app.request(`/api/scim/v2${path}`, {
      method,
      headers: {
        authorization: `Bearer ${dir.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/scim+json; charset=utf-8' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const patch = async (dir: Directory, id: string, Operations: unknown[], status = 200) =>
    expectStatus<Group>(await scim(dir, `/Groups/${id}`, 'PATCH', { schemas: [PATCH], Operations }), status);
  const read = async (dir: Directory, id: string) => expectStatus<Group>(await scim(dir, `/Groups/${id}`), 200);
  const memberIds = async (dir: Directory, id: string) =>
    ((await read(dir, id)).members ?? []).map((m) => m.value).sort();
  const scimError = async (response: Response, status: number, scimType?: string) => {
    const body = await expectStatus<{ status: string; scimType?: string }>(response, status);
    expect(body).toMatchObject({ status: String(status), ...(scimType ? { scimType } : {}) });
  };

  /** An organization and a directory token its Owner created. */
  const directory = async (): Promise<Directory> => {
    const org = await createOrganization(t, await signedInUser(t));
    const { token } = await expectStatus<{ token: string }>(
      await call(t, '/api/scim/tokens', { body: { name: 'IdP' }, jar: org.owner.jar }),
      201,
    );
    return { org, token };
  };
  /** A SCIM User of the organization, created by the directory as Entra ID and Okta create one. */
  const user = async (dir: Directory, name: string) => {
    const userName = uniqueEmail('idp');
    const body = {
      schemas: [USER],
      userName,
      name: { formatted: name },
      emails: [{ value: userName, type: 'work', primary: true }],
      active: true,
    };
    return (await expectStatus<{ id: string }>(await scim(dir, '/Users', 'POST', body), 201)).id;
  };
  const rolesOf = async (dir: Directory) => {
    const members = await expectStatus<{ userId: string; roleSlug: string }[]>(
      await call(t, '/api/members', { jar: dir.org.owner.jar }),
      200,
    );
    return Object.fromEntries(members.map((m) => [m.userId, m.roleSlug]));
  };

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('Entra ID: create, get without members, find by name, rename, add and remove members, delete', async () => {
    const dir = await directory();
    const ada = await user(dir, 'Ada');
    const grace = await user(dir, 'Grace');
    const created = await expectStatus<Group>(
      await scim(dir, '/Groups', 'POST', {
        schemas: [GROUP, 'http://schemas.microsoft.com/2006/11/ResourceManagement/ADSCIM/2.0/Group'],
        externalId: '8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159',
        displayName: 'Entra Engineering',
        meta: { resourceType: 'Group' },
      }),
      201,
    );
    expect(created.members).toEqual([]);
    const lean = await expectStatus<Group>(await scim(dir, `/Groups/${created.id}?excludedAttributes=members`), 200);
    expect(lean).toMatchObject({ id: created.id, displayName: 'Entra Engineering' });
    expect(lean.members).toBeUndefined();
    const found = await expectStatus<{ totalResults: number; Resources: Group[] }>(
      await scim(
        dir,
        `/Groups?excludedAttributes=members&filter=${encodeURIComponent('displayName eq "Entra Engineering"')}`,
      ),
      200,
    );
    expect(found.totalResults).toBe(1);
    expect(found.Resources[0]!.id).toBe(created.id);

    await patch(dir, created.id, [{ op: 'Replace', path: 'displayName', value: 'Entra Engineering (renamed)' }]);
    await patch(dir, created.id, [
      { op: 'Add', path: 'members', value: [{ $ref: null, value: ada }] },
      { op: 'Add', path: 'members', value: [{ $ref: null, value: grace }] },
    ]);
    expect(await memberIds(dir, created.id)).toEqual([ada, grace].sort());
    // Added again (Entra's retries): nothing changes, no new version.
    const version = (await read(dir, created.id)).meta.version;
    const again = await patch(dir, created.id, [{ op: 'Add', path: 'members', value: [{ value: ada }] }]);
    expect(again.meta.version).toBe(version);
    await patch(dir, created.id, [{ op: 'Remove', path: 'members', value: [{ $ref: null, value: ada }] }]);
    expect(await memberIds(dir, created.id)).toEqual([grace]);
    expect((await read(dir, created.id)).displayName).toBe('Entra Engineering (renamed)');
    expect((await scim(dir, `/Groups/${created.id}`, 'DELETE')).status).toBe(204);
    await scimError(await scim(dir, `/Groups/${created.id}`), 404);
  });

  it('Okta group push: create, rename by value object, add, remove by filter, replace by PUT; roles follow', async () => {
    const dir = await directory();
    const admin = await roleBySlug(t, dir.org.owner, 'admin');
    const ada = await user(dir, 'Ada');
    const grace = await user(dir, 'Grace');
    const linus = await user(dir, 'Linus');
    const pushed = await expectStatus<Group>(
      await scim(dir, '/Groups', 'POST', { schemas: [GROUP], displayName: 'Okta Admins', members: [] }),
      201,
    );
    // The organization maps the pushed group to Admin (as PUT /api/scim/group-roles stores it).
    await asOwnerInTenant(t, dir.org.id, (trx) =>
      trx
        .insertInto('scim_group_roles')
        .values({ tenant_id: dir.org.id, group_id: pushed.id, role_id: admin.id })
        .execute(),
    );
    await patch(dir, pushed.id, [{ op: 'replace', value: { id: pushed.id, displayName: 'Okta Administrators' } }]);
    await patch(dir, pushed.id, [
      {
        op: 'add',
        path: 'members',
        value: [
          { value: ada, display: 'ada@example.com' },
          { value: grace, display: 'g' },
        ],
      },
    ]);
    expect(await rolesOf(dir)).toMatchObject({ [ada]: 'admin', [grace]: 'admin', [linus]: 'member' });
    await patch(dir, pushed.id, [{ op: 'remove', path: `members[value eq "${ada}"]` }]);
    expect(await rolesOf(dir)).toMatchObject({ [ada]: 'member', [grace]: 'admin' });
    const replaced = await expectStatus<Group>(
      await scim(dir, `/Groups/${pushed.id}`, 'PUT', {
        schemas: [GROUP],
        id: pushed.id,
        displayName: 'Okta Administrators',
        members: [{ value: linus, display: 'linus' }],
      }),
      200,
    );
    expect(replaced.members!.map((m) => m.value)).toEqual([linus]);
    expect(await rolesOf(dir)).toMatchObject({ [ada]: 'member', [grace]: 'member', [linus]: 'admin' });
    expect((await read(dir, pushed.id)).displayName).toBe('Okta Administrators');
  });

  it('every other PATCH form: replace members, remove all, externalId, ops in order, URN paths', async () => {
    const dir = await directory();
    const ada = await user(dir, 'Ada');
    const grace = await user(dir, 'Grace');
    const group = await expectStatus<Group>(
      await scim(dir, '/Groups', 'POST', { schemas: [GROUP], displayName: 'Forms', members: [{ value: ada }] }),
      201,
    );
    await patch(dir, group.id, [{ op: 'replace', path: 'members', value: [{ value: grace }] }]);
    expect(await memberIds(dir, group.id)).toEqual([grace]);
    await patch(dir, group.id, [{ op: 'remove', path: 'members' }]);
    expect(await memberIds(dir, group.id)).toEqual([]);
    await patch(dir, group.id, [
      { op: 'add', value: { members: [{ value: ada }, { value: grace }], externalId: 'ext-9' } },
      { op: 'remove', path: `members[value eq "${grace}"]` },
      { op: 'replace', path: `${GROUP}:displayName`, value: 'Forms 2' },
    ]);
    const after = await read(dir, group.id);
    expect(after).toMatchObject({ displayName: 'Forms 2', externalId: 'ext-9' });
    expect(await memberIds(dir, group.id)).toEqual([ada]);
    await patch(dir, group.id, [{ op: 'remove', path: 'externalId' }]);
    expect((await read(dir, group.id)).externalId).toBeUndefined();
    await patch(dir, group.id, [{ op: 'remove', path: 'members[value eq "nobody"]' }]);
  });

  it('refuses what it cannot apply, and applies none of a refused request', async () => {
    const dir = await directory();
    const ada = await user(dir, 'Ada');
    const group = await expectStatus<Group>(
      await scim(dir, '/Groups', 'POST', { schemas: [GROUP], displayName: 'Strict', members: [{ value: ada }] }),
      201,
    );
    const send = (Operations: unknown) => scim(dir, `/Groups/${group.id}`, 'PATCH', { schemas: [PATCH], Operations });
    await scimError(await send([{ op: 'remove' }]), 400, 'noTarget');
    await scimError(await send([{ op: 'replace', path: 'title', value: 'x' }]), 400, 'invalidPath');
    await scimError(await send([{ op: 'remove', path: 'displayName' }]), 400, 'invalidValue');
    await scimError(await send([{ op: 'remove', path: 'id' }]), 400, 'mutability');
    await scimError(await send([{ op: 'move', path: 'displayName', value: 'x' }]), 400);
    await scimError(
      await send([{ op: 'add', path: 'members', value: [{ value: crypto.randomUUID() }] }]),
      400,
      'invalidValue',
    );
    await scimError(
      await send([
        { op: 'replace', path: 'displayName', value: 'Renamed' },
        { op: 'add', path: 'members', value: [{ value: 'not-a-user' }] },
      ]),
      400,
      'invalidValue',
    );
    await scimError(await send([]), 400);
    await scimError(await send('no'), 400);
    const kept = await read(dir, group.id);
    expect(kept).toMatchObject({ displayName: 'Strict', meta: { version: 'W/"1"' } });
    expect(kept.members!.map((m) => m.value)).toEqual([ada]);
  });
});
