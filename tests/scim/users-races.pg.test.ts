import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import {
  auditRows,
  createOrganization,
  listMembers,
  roleBySlug,
  setActive,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';
import { expectScim, mintToken, PATCH, type Scim, scimClient } from './users-client.js';

/**
 * docs/scim.md "Users": deprovisioning bites at the member's next request
 * (their session loses the organization, their API key there is refused),
 * reactivation restores the previous role, the last Owner stays, and two
 * directories creating one person at once end in one account and one
 * membership.
 */
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';

describe('SCIM Users: deprovisioning, the last Owner, races', () => {
  let t: TestApp;
  let org: TestOrganization;
  let scim: Scim;
  let tokenId: string;

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    org = await createOrganization(t, await signedInUser(t));
    const minted = await mintToken(t, org);
    tokenId = minted.id;
    scim = scimClient(t, minted.token);
  });
  afterAll(async () => {
    await t?.close();
  });

  const setFlag = (client: Scim, id: string, value: boolean) =>
    client(`/Users/${id}`, {
      method: 'PATCH',
      body: { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value }] },
    });
  const setActiveFlag = (id: string, value: boolean) => setFlag(scim, id, value);
  const memberOf = async (userId: string) => (await listMembers(t, org.owner)).find((m) => m.userId === userId);
  const promote = async (userId: string, slug: string) => {
    const member = (await memberOf(userId))!;
    const role = await roleBySlug(t, org.owner, slug);
    const res = await call(t, `/api/admin/members/${member.id}`, {
      method: 'PATCH',
      body: { roleId: role.id },
      jar: org.owner.jar,
    });
    await expectStatus(res, 200);
  };

  it("deactivation ends the member's session in the organization and their API key there; reactivation restores the role", async () => {
    const person = await signedInUser(t);
    const user = await expectScim(await scim('/Users', { body: { userName: person.email } }), 201);
    await promote(person.id, 'admin');
    await setActive(t, person, org.id);
    const created = await call(t, '/api/api-keys', { body: { name: 'ci', scopes: ['members:read'] }, jar: person.jar });
    const { key, id: keyId } = await expectStatus<{ key: string; id: string }>(created, 201);
    const withKey = () => call(t, '/api/members', { headers: { authorization: `Bearer ${key}` } });
    await expectStatus(await withKey(), 200);
    await expectStatus(await call(t, '/api/members', { jar: person.jar }), 200);

    expect(await expectScim(await setActiveFlag(user.id, false), 200)).toMatchObject({ active: false });
    expect(await memberOf(person.id)).toBeUndefined();
    expect((await call(t, '/api/members', { jar: person.jar })).status).toBe(403);
    expect((await withKey()).status).toBe(401);
    const removed = (await auditRows(t, org.id, 'member.removed')).find((row) => row.metadata.userId === person.id);
    expect(removed).toMatchObject({
      actor_id: null,
      metadata: { reason: 'scim_deactivated', scimTokenId: tokenId, via: 'scim' },
    });
    const revoked = (await auditRows(t, org.id, 'api_key.revoked')).find((row) => row.metadata.keyId === keyId);
    expect(revoked).toMatchObject({ actor_id: null, metadata: { reason: 'member_removed' } });
    // Deactivating again changes nothing.
    expect(await expectScim(await setActiveFlag(user.id, false), 200)).toMatchObject({ meta: { version: 'W/"2"' } });

    expect(await expectScim(await setActiveFlag(user.id, true), 200)).toMatchObject({ active: true });
    expect((await memberOf(person.id))?.roleSlug).toBe('admin');
    // The key stays revoked: a return revives none.
    expect((await withKey()).status).toBe(401);
  });

  it('the last Owner is neither deactivated nor deleted (409 mutability); with another Owner they are', async () => {
    const person = await signedInUser(t);
    const user = await expectScim(await scim('/Users', { body: { userName: person.email } }), 201);
    await promote(person.id, 'admin');
    const transfer = await call(t, '/api/roles/transfer-ownership', {
      body: { targetMemberId: (await memberOf(person.id))!.id },
      jar: org.owner.jar,
    });
    await expectStatus(transfer, 200);
    await expectScim(await setActiveFlag(user.id, false), 409, 'mutability');
    await expectScim(await scim(`/Users/${user.id}`, { method: 'DELETE' }), 409, 'mutability');
    expect((await memberOf(person.id))?.roleSlug).toBe('owner');
    expect(await expectScim(await scim(`/Users/${user.id}`), 200)).toMatchObject({
      active: true,
      meta: { version: 'W/"1"' },
    });
    // A second Owner: now the first may go.
    await setActive(t, person, org.id);
    const back = await call(t, `/api/admin/members/${(await memberOf(org.owner.id))!.id}`, {
      method: 'PATCH',
      body: { roleId: (await roleBySlug(t, person, 'owner')).id },
      jar: person.jar,
    });
    await expectStatus(back, 200);
    expect(await expectScim(await setActiveFlag(user.id, false), 200)).toMatchObject({ active: false });
  });

  it("a member's role follows their mapped groups: the highest, else Member; reactivation takes the groups' role", async () => {
    const fresh = await createOrganization(t, await signedInUser(t));
    const dir = scimClient(t, (await mintToken(t, fresh)).token);
    const roleOf = async (userId: string) =>
      (await listMembers(t, fresh.owner)).find((m) => m.userId === userId)?.roleSlug ?? null;
    const group = async (displayName: string) =>
      expectScim(await dir('/Groups', { body: { schemas: [GROUP], displayName } }), 201);
    const members = (id: string, op: 'add' | 'remove', userId: string) =>
      dir(`/Groups/${id}`, {
        method: 'PATCH',
        body: { schemas: [PATCH], Operations: [{ op, path: 'members', value: [{ value: userId }] }] },
      });
    const user = await expectScim(await dir('/Users', { body: { userName: uniqueEmail('roles') } }), 201);
    const other = await expectScim(await dir('/Users', { body: { userName: uniqueEmail('unmapped') } }), 201);
    const [admins, viewers, plain] = [await group('Admins'), await group('Viewers'), await group('Plain')];
    // The mapping, through PUT /api/scim/group-roles (before anyone is in those groups).
    const [admin, viewer] = [await roleBySlug(t, fresh.owner, 'admin'), await roleBySlug(t, fresh.owner, 'viewer')];
    await expectStatus(
      await call(t, '/api/scim/group-roles', {
        method: 'PUT',
        body: [
          { groupId: admins.id, roleId: admin.id },
          { groupId: viewers.id, roleId: viewer.id },
        ],
        jar: fresh.owner.jar,
      }),
      200,
    );
    expect(await roleOf(user.id)).toBe('member');
    await expectScim(await members(viewers.id, 'add', user.id), 200);
    expect(await roleOf(user.id)).toBe('viewer');
    await expectScim(await members(admins.id, 'add', user.id), 200);
    expect(await roleOf(user.id)).toBe('admin');
    await expectScim(await members(admins.id, 'remove', user.id), 200);
    expect(await roleOf(user.id)).toBe('viewer');
    await expectScim(await members(viewers.id, 'remove', user.id), 200);
    expect(await roleOf(user.id)).toBe('member');
    // An unmapped group decides nothing.
    await expectScim(await members(plain.id, 'add', other.id), 200);
    expect(await roleOf(other.id)).toBe('member');
    // Deactivated, then put in the Admins group: back with the groups' role, not the one it left with.
    await expectScim(await setFlag(dir, user.id, false), 200);
    await expectScim(await members(admins.id, 'add', user.id), 200);
    expect(await roleOf(user.id)).toBeNull();
    await expectScim(await setFlag(dir, user.id, true), 200);
    expect(await roleOf(user.id)).toBe('admin');
    const changes = (await auditRows(t, fresh.id, 'member.role_changed')).filter((row) => row.metadata.memberId);
    expect(changes.length).toBe(4);
    expect(changes.every((row) => row.actor_id === null && row.metadata.via === 'scim')).toBe(true);
  });

  it('two POSTs for one userName at once: one account, one membership, one 201 and one 409', async () => {
    const userName = uniqueEmail('race');
    const both = await Promise.all([0, 1].map(() => scim('/Users', { body: { userName } })));
    expect(both.map((r) => r.status).sort()).toEqual([201, 409]);
    const loser = await both.find((r) => r.status === 409)!.json();
    expect(loser.scimType).toBe('uniqueness');
    const accounts = await t.database.withOwner((db) =>
      db.selectFrom('users').select('id').where('email', '=', userName).execute(),
    );
    expect(accounts).toHaveLength(1);
    expect((await listMembers(t, org.owner)).filter((m) => m.email === userName)).toHaveLength(1);
    // And an existing account linked by two at once.
    const person = await signedInUser(t);
    const linked = await Promise.all([0, 1].map(() => scim('/Users', { body: { userName: person.email } })));
    expect(linked.map((r) => r.status).sort()).toEqual([201, 409]);
    expect((await listMembers(t, org.owner)).filter((m) => m.userId === person.id)).toHaveLength(1);
  });
});
