import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import {
  asOwnerInTenant,
  auditRows,
  createOrganization,
  listMembers,
  newMember,
  roleBySlug,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';
import { expectScim, mintToken, PATCH, type Scim, scimClient, USER } from './users-client.js';

/**
 * docs/scim.md "Tokens": a SCIM token acts with at most its creator's power
 * to grant. Through a token whose creator is not an Owner of the
 * organization at that moment, no request gives anyone the Owner role (a
 * group mapped to Owner) nor removes, deactivates, deletes or demotes an
 * Owner: 403 in SCIM's shape, no scimType, and the whole request changes
 * nothing. Everything else such a token does is unchanged.
 */
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
const DETAIL = 'This token cannot give or take away the Owner role: the person who created it is not an Owner';

describe("SCIM tokens act with at most their creator's power over the Owner role", () => {
  let t: TestApp;
  let org: TestOrganization;
  let admin: TestMember;
  let asOwner: Scim;
  let asAdmin: Scim;
  let founders: string;
  let staff: string;

  /** An Admin's session mints a token, as an Owner's does (organizations:write, a fresh session). */
  const tokenOf = async (creator: TestMember) => {
    const res = await call(t, '/api/scim/tokens', { body: { name: 'directory' }, jar: creator.jar });
    return scimClient(t, (await expectStatus<{ token: string }>(res, 201)).token);
  };
  const newUser = async (scim: Scim = asOwner) =>
    (await expectScim(await scim('/Users', { body: { schemas: [USER], userName: uniqueEmail('scim') } }), 201))
      .id as string;
  const patchGroup = (scim: Scim, id: string, ops: unknown[]) =>
    scim(`/Groups/${id}`, { method: 'PATCH', body: { schemas: [PATCH], Operations: ops } });
  const addTo = (scim: Scim, id: string, ...users: string[]) =>
    patchGroup(scim, id, [{ op: 'add', path: 'members', value: users.map((value) => ({ value })) }]);
  const removeFrom = (scim: Scim, id: string, user: string) =>
    patchGroup(scim, id, [{ op: 'remove', path: `members[value eq "${user}"]` }]);
  const membersOf = async (scim: Scim, id: string): Promise<string[]> =>
    ((await expectScim(await scim(`/Groups/${id}`), 200)).members ?? []).map((m: { value: string }) => m.value);
  const putGroup = async (scim: Scim, id: string, members: string[]) => {
    const { displayName } = await expectScim(await asOwner(`/Groups/${id}`), 200);
    return scim(`/Groups/${id}`, {
      method: 'PUT',
      body: { schemas: [GROUP], displayName, members: members.map((value) => ({ value })) },
    });
  };
  const putUser = async (scim: Scim, id: string, active: boolean) => {
    const { userName } = await expectScim(await asOwner(`/Users/${id}`), 200);
    return scim(`/Users/${id}`, { method: 'PUT', body: { schemas: [USER], userName, active } });
  };
  const deactivate = (scim: Scim, id: string, active = false) =>
    scim(`/Users/${id}`, {
      method: 'PATCH',
      body: { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value: active }] },
    });
  /** A new User made Owner by the Owner's token (a member of the group mapped to Owner). */
  const newOwner = async () => {
    const id = await newUser();
    await expectScim(await addTo(asOwner, founders, id), 200);
    expect(await roleOf(id)).toBe('owner');
    return id;
  };
  const roleOf = async (userId: string) => (await listMembers(t, org.owner)).find((m) => m.userId === userId)?.roleSlug;

  /** Everything a refused request could have touched: memberships and roles, Users, groups, the audit log. */
  const state = async () => ({
    members: (await listMembers(t, org.owner)).map((m) => [m.userId, m.roleSlug]).sort(),
    stored: await asOwnerInTenant(t, org.id, async (trx) => ({
      users: await trx.selectFrom('scim_users').select(['user_id', 'active', 'version']).orderBy('user_id').execute(),
      groups: await trx.selectFrom('scim_groups').select(['id', 'display_name', 'version']).orderBy('id').execute(),
      groupMembers: await trx
        .selectFrom('scim_group_members')
        .select(['group_id', 'user_id'])
        .orderBy('group_id')
        .orderBy('user_id')
        .execute(),
    })),
    audit: (await auditRows(t, org.id)).length,
  });
  /** 403 in SCIM's shape with no scimType, and nothing changed. */
  const refusedUnchanged = async (request: () => Promise<Response>) => {
    const before = await state();
    const body = await expectScim(await request(), 403, undefined);
    expect(body.status).toBe('403');
    expect(body.detail).toBe(DETAIL);
    expect(await state()).toEqual(before);
  };

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    admin = await newMember(t, org, 'admin');
    asOwner = scimClient(t, (await mintToken(t, org)).token);
    asAdmin = await tokenOf(admin);
    const group = async (displayName: string) =>
      (await expectScim(await asOwner('/Groups', { body: { schemas: [GROUP], displayName } }), 201)).id as string;
    founders = await group('Founders');
    staff = await group('Staff');
    const mapping = [
      { groupId: founders, roleId: (await roleBySlug(t, org.owner, 'owner')).id },
      { groupId: staff, roleId: (await roleBySlug(t, org.owner, 'admin')).id },
    ];
    await expectStatus(
      await call(t, '/api/scim/group-roles', { method: 'PUT', body: mapping, jar: org.owner.jar }),
      200,
    );
  });
  afterAll(async () => {
    await t?.close();
  });

  it("an Admin's token makes no one Owner: no add, PUT or reactivation into the Owner group", async () => {
    const [mallory, other] = [await newUser(asAdmin), await newUser()];
    const owner = await newOwner();
    await refusedUnchanged(() => addTo(asAdmin, founders, mallory));
    // One group push of many members, one of them new to the Owner group: none of it happens.
    await refusedUnchanged(() => putGroup(asAdmin, founders, [owner, mallory, other]));
    // Several operations, the first harmless alone: the whole PATCH rolls back.
    await refusedUnchanged(() =>
      patchGroup(asAdmin, founders, [
        { op: 'replace', path: 'displayName', value: 'Renamed' },
        { op: 'add', path: 'members', value: [{ value: other }] },
        { op: 'add', path: 'members', value: [{ value: mallory }] },
      ]),
    );
    // A deactivated member of the Owner group would come back as Owner.
    await expectScim(await deactivate(asOwner, owner), 200);
    await refusedUnchanged(() => deactivate(asAdmin, owner, true));
    await refusedUnchanged(() => putUser(asAdmin, owner, true));
    expect(await roleOf(mallory)).toBe('member');
    expect(await roleOf(owner)).toBeUndefined();
  });

  it("an Admin's token neither deletes nor deactivates an Owner (PATCH, PUT, DELETE)", async () => {
    const owner = await newOwner();
    await refusedUnchanged(() => deactivate(asAdmin, owner));
    await refusedUnchanged(() => putUser(asAdmin, owner, false));
    await refusedUnchanged(() => asAdmin(`/Users/${owner}`, { method: 'DELETE' }));
    expect(await roleOf(owner)).toBe('owner');
  });

  it("an Admin's token does not demote an Owner: no removal from the Owner group, nor its deletion", async () => {
    const owner = await newOwner();
    const others = (await membersOf(asOwner, founders)).filter((id) => id !== owner);
    await refusedUnchanged(() => removeFrom(asAdmin, founders, owner));
    await refusedUnchanged(() => putGroup(asAdmin, founders, others));
    await refusedUnchanged(() =>
      patchGroup(asAdmin, founders, [{ op: 'replace', path: 'members', value: others.map((value) => ({ value })) }]),
    );
    await refusedUnchanged(() => asAdmin(`/Groups/${founders}`, { method: 'DELETE' }));
    expect(await roleOf(owner)).toBe('owner');
  });

  it("the same requests through an Owner's token succeed", async () => {
    const [mallory, other] = [await newUser(asAdmin), await newUser()];
    await expectScim(await addTo(asOwner, founders, mallory), 200);
    expect(await roleOf(mallory)).toBe('owner');
    await expectScim(await putGroup(asOwner, founders, [...(await membersOf(asOwner, founders)), other]), 200);
    expect(await roleOf(other)).toBe('owner');
    await expectScim(await removeFrom(asOwner, founders, other), 200);
    expect(await roleOf(other)).toBe('member');
    await expectScim(await deactivate(asOwner, mallory), 200);
    expect(await roleOf(mallory)).toBeUndefined();
    await expectScim(await putUser(asOwner, mallory, true), 200);
    expect(await roleOf(mallory)).toBe('owner');
    await expectScim(await putUser(asOwner, mallory, false), 200);
    await expectScim(await deactivate(asOwner, mallory, true), 200);
    expect(await roleOf(mallory)).toBe('owner');
    expect((await asOwner(`/Users/${mallory}`, { method: 'DELETE' })).status).toBe(204);
    expect(await roleOf(mallory)).toBeUndefined();
  });

  it("an Owner's token whose creator is since an Admin, or gone, acts as an Admin's", async () => {
    const creator = await newMember(t, org, 'admin');
    // Only an Owner makes an Owner, through the service's own route.
    const setRole = async (slug: string) => {
      const roleId = (await roleBySlug(t, org.owner, slug)).id;
      const res = await call(t, `/api/roles/members/${creator.memberId}/role`, {
        method: 'PATCH',
        body: { roleId },
        jar: org.owner.jar,
      });
      await expectStatus(res, 200);
    };
    await setRole('owner');
    const theirs = await tokenOf(creator);
    const [target, later] = [await newUser(), await newUser()];
    await expectScim(await addTo(theirs, founders, target), 200);
    expect(await roleOf(target)).toBe('owner');
    await setRole('admin');
    await refusedUnchanged(() => addTo(theirs, founders, later));
    await refusedUnchanged(() => removeFrom(theirs, founders, target));
    await refusedUnchanged(() => theirs(`/Users/${target}`, { method: 'DELETE' }));
    await expectScim(await addTo(theirs, staff, later), 200);
    expect(await roleOf(later)).toBe('admin');
    const removed = await call(t, '/api/auth/organization/remove-member', {
      body: { memberIdOrEmail: creator.memberId, organizationId: org.id },
      jar: org.owner.jar,
    });
    await expectStatus(removed, 200);
    await refusedUnchanged(() => addTo(theirs, founders, later));
    await refusedUnchanged(() => deactivate(theirs, target));
    expect(await roleOf(target)).toBe('owner');
  });

  it("an Admin's token still does all that touches no Owner", async () => {
    const owner = await newOwner();
    const person = await newUser(asAdmin);
    expect(await roleOf(person)).toBe('member');
    await expectScim(await addTo(asAdmin, staff, person, owner), 200);
    expect(await roleOf(person)).toBe('admin');
    expect(await roleOf(owner)).toBe('owner');
    await expectScim(await removeFrom(asAdmin, staff, person), 200);
    expect(await roleOf(person)).toBe('member');
    // A new group is mapped to no role: its members, an Owner among them, keep theirs.
    await expectScim(
      await asAdmin('/Groups', {
        body: { schemas: [GROUP], displayName: 'Everyone', members: [{ value: person }, { value: owner }] },
      }),
      201,
    );
    expect(await roleOf(owner)).toBe('owner');
    await expectScim(await deactivate(asAdmin, person), 200);
    expect(await roleOf(person)).toBeUndefined();
    await expectScim(await deactivate(asAdmin, person, true), 200);
    expect(await roleOf(person)).toBe('member');
    expect((await asAdmin(`/Users/${person}`, { method: 'DELETE' })).status).toBe(204);
  });
});

describe('SCIM tokens and an Owner made by hand, where no group is mapped', () => {
  let t: TestApp;
  let org: TestOrganization;
  let asOwner: Scim;
  let asAdmin: Scim;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    asOwner = scimClient(t, (await mintToken(t, org)).token);
    const admin = await newMember(t, org, 'admin');
    const res = await call(t, '/api/scim/tokens', { body: { name: 'directory' }, jar: admin.jar });
    asAdmin = scimClient(t, (await expectStatus<{ token: string }>(res, 201)).token);
  });
  afterAll(async () => {
    await t?.close();
  });

  const roleOf = async (userId: string) => (await listMembers(t, org.owner)).find((m) => m.userId === userId)?.roleSlug;
  const setActive = (scim: Scim, id: string, value: boolean) =>
    scim(`/Users/${id}`, {
      method: 'PATCH',
      body: { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value }] },
    });

  it('an Admin neither deactivates such an Owner nor brings one back as Owner; an Owner does both', async () => {
    const created = await asOwner('/Users', { body: { schemas: [USER], userName: uniqueEmail('scim') } });
    const id = (await expectScim(created, 201)).id as string;
    const memberId = (await listMembers(t, org.owner)).find((m) => m.userId === id)!.id;
    const roleId = (await roleBySlug(t, org.owner, 'owner')).id;
    const promote = await call(t, `/api/roles/members/${memberId}/role`, {
      method: 'PATCH',
      body: { roleId },
      jar: org.owner.jar,
    });
    await expectStatus(promote, 200);
    const audit = (await auditRows(t, org.id)).length;
    expect((await expectScim(await setActive(asAdmin, id, false), 403, undefined)).detail).toBe(DETAIL);
    expect(await roleOf(id)).toBe('owner');
    await expectScim(await setActive(asOwner, id, false), 200);
    expect(await roleOf(id)).toBeUndefined();
    // Brought back, the User takes the role held before: Owner, which an Admin's token cannot give.
    expect((await expectScim(await setActive(asAdmin, id, true), 403, undefined)).detail).toBe(DETAIL);
    expect(await roleOf(id)).toBeUndefined();
    expect((await expectScim(await asOwner(`/Users/${id}`), 200)).active).toBe(false);
    await expectScim(await setActive(asOwner, id, true), 200);
    expect(await roleOf(id)).toBe('owner');
    const actions = (await auditRows(t, org.id)).slice(audit).map((row) => row.action);
    expect(actions.filter((action) => action.startsWith('member.'))).toEqual(['member.removed', 'member.added']);
  });
});
