import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus } from '../support/http.js';
import {
  type Actor,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  createRole,
  newMember,
  type RoleRecord,
  roleBySlug,
  roleSlugsByMember,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/scim.md "Roles", over HTTP: PUT /api/scim/group-roles replaces the
 * organization's mapping from directory groups to roles (roles:write, never
 * an API key), GET reads it (roles:read). Groups and roles must be the
 * organization's; the roles given or taken away must be the caller's to
 * grant, Owner only by an Owner; every member of a group whose role changed
 * gets the highest role of their groups at once (else Member), in the same
 * transaction, and the last Owner is never demoted.
 */
interface Mapping {
  groupId: string;
  roleId: string;
}

describe('SCIM group roles', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let admin: TestMember;
  let alice: TestMember;
  let bob: TestMember;
  let carol: TestMember;
  let roles: Record<'owner' | 'admin' | 'member' | 'viewer', RoleRecord>;
  let groups: Record<'engineering' | 'support' | 'leads' | 'founders', string>;
  let otherGroup: string;

  const put = (body: unknown, actor: Actor = org.owner) =>
    call(t, '/api/scim/group-roles', { method: 'PUT', body, jar: actor.jar });
  const get = (actor: Actor = org.owner) => call(t, '/api/scim/group-roles', { jar: actor.jar });
  const slugs = async () => {
    const byMember = await roleSlugsByMember(t, org.owner);
    return {
      owner: byMember[org.ownerMemberId],
      admin: byMember[admin.memberId],
      alice: byMember[alice.memberId],
      bob: byMember[bob.memberId],
      carol: byMember[carol.memberId],
    };
  };

  /** A SCIM User resource for an account already a member (the directory's view of it). */
  const scimUser = (tenantId: string, userId: string) =>
    asOwnerInTenant(t, tenantId, (trx) =>
      trx.insertInto('scim_users').values({ tenant_id: tenantId, user_id: userId }).execute(),
    );
  const scimGroup = (tenantId: string, displayName: string, members: string[]) =>
    asOwnerInTenant(t, tenantId, async (trx) => {
      const { id } = await trx
        .insertInto('scim_groups')
        .values({ tenant_id: tenantId, display_name: displayName })
        .returning('id')
        .executeTakeFirstOrThrow();
      if (members.length > 0)
        await trx
          .insertInto('scim_group_members')
          .values(members.map((user_id) => ({ tenant_id: tenantId, group_id: id, user_id })))
          .execute();
      return id as string;
    });

  beforeAll(async () => {
    t = await createTestApp();
    const owner = await signedInUser(t);
    org = await createOrganization(t, owner);
    other = await createOrganization(t, await signedInUser(t));
    admin = await newMember(t, org, 'admin');
    alice = await newMember(t, org, 'member');
    bob = await newMember(t, org, 'member');
    carol = await newMember(t, org, 'member');
    roles = {
      owner: await roleBySlug(t, org.owner, 'owner'),
      admin: await roleBySlug(t, org.owner, 'admin'),
      member: await roleBySlug(t, org.owner, 'member'),
      viewer: await roleBySlug(t, org.owner, 'viewer'),
    };
    for (const user of [org.owner, alice, bob, carol]) await scimUser(org.id, user.id);
    groups = {
      engineering: await scimGroup(org.id, 'Engineering', [alice.id, carol.id]),
      support: await scimGroup(org.id, 'Support', [bob.id, carol.id]),
      leads: await scimGroup(org.id, 'Leads', [carol.id]),
      founders: await scimGroup(org.id, 'Founders', [org.owner.id]),
    };
    otherGroup = await scimGroup(other.id, 'Engineering', []);
  });

  afterAll(() => t.close());

  beforeEach(async () => {
    // Each test starts from no mapping and the roles the members joined with.
    await asOwnerInTenant(t, org.id, (trx) =>
      trx.deleteFrom('scim_group_roles').where('tenant_id', '=', org.id).execute(),
    );
    await t.database.withOwner((owner) =>
      owner
        .updateTable('members')
        .set({ role_id: roles.member.id, role: 'member' })
        .where('id', 'in', [alice.memberId, bob.memberId, carol.memberId])
        .execute(),
    );
  });

  it('maps groups to roles and gives their members the highest role of their groups at once', async () => {
    const mapping = [
      { groupId: groups.engineering, roleId: roles.admin.id },
      { groupId: groups.support, roleId: roles.viewer.id },
    ];
    expect(await expectStatus<Mapping[]>(await put(mapping), 200)).toEqual(mapping);
    expect(await slugs()).toMatchObject({
      owner: 'owner',
      admin: 'admin',
      alice: 'admin',
      bob: 'viewer',
      carol: 'admin',
    });
    expect(await expectStatus<Mapping[]>(await get(), 200)).toEqual(mapping);

    const [entry] = (await auditRows(t, org.id, 'scim.group_roles_updated')).slice(-1);
    expect(entry).toMatchObject({ actor_id: org.owner.id, metadata: { mappings: mapping } });
    const changes = (await auditRows(t, org.id, 'member.role_changed')).filter(
      (row) => row.created_at >= entry!.created_at,
    );
    expect(changes.map((row) => [row.metadata.memberId, row.metadata.roleId]).sort()).toEqual(
      [
        [alice.memberId, roles.admin.id],
        [bob.memberId, roles.viewer.id],
        [carol.memberId, roles.admin.id],
      ].sort(),
    );
    // A person changed the mapping, no directory: each role change names them, and no token.
    for (const row of changes) {
      expect(row.actor_id).toBe(org.owner.id);
      expect(row.metadata.scimTokenId).toBeUndefined();
    }
  });

  it('a group no longer mapped gives its members the role of their other groups, else Member', async () => {
    await expectStatus(
      await put([
        { groupId: groups.support, roleId: roles.admin.id },
        { groupId: groups.leads, roleId: roles.viewer.id },
      ]),
      200,
    );
    expect(await slugs()).toMatchObject({ alice: 'member', bob: 'admin', carol: 'admin' });
    await expectStatus(await put([{ groupId: groups.leads, roleId: roles.viewer.id }]), 200);
    expect(await slugs()).toMatchObject({ alice: 'member', bob: 'member', carol: 'viewer' });
  });

  it("clearing the whole mapping takes back the roles it gave: its groups' members become Member", async () => {
    await expectStatus(await put([{ groupId: groups.support, roleId: roles.admin.id }]), 200);
    expect(await slugs()).toMatchObject({ alice: 'member', bob: 'admin', carol: 'admin' });
    expect(await expectStatus<Mapping[]>(await put([]), 200)).toEqual([]);
    expect(await slugs()).toMatchObject({
      owner: 'owner',
      admin: 'admin',
      alice: 'member',
      bob: 'member',
      carol: 'member',
    });
  });

  it('between custom roles, the one with more permissions wins', async () => {
    const readers = await createRole(t, org.owner, {
      name: `Readers ${crypto.randomUUID().slice(0, 4)}`,
      permissions: ['members:read'],
    });
    const writers = await createRole(t, org.owner, {
      name: `Writers ${crypto.randomUUID().slice(0, 4)}`,
      permissions: ['members:read', 'members:write'],
    });
    await expectStatus(
      await put([
        { groupId: groups.engineering, roleId: writers.id },
        { groupId: groups.support, roleId: readers.id },
      ]),
      200,
    );
    expect(await slugs()).toMatchObject({ alice: writers.slug, bob: readers.slug, carol: writers.slug });
  });

  it('the same mapping again changes nothing and writes no entry', async () => {
    const mapping = [{ groupId: groups.engineering, roleId: roles.viewer.id }];
    await expectStatus(await put(mapping), 200);
    const before = (await auditRows(t, org.id)).length;
    expect(await expectStatus<Mapping[]>(await put(mapping), 200)).toEqual(mapping);
    expect((await auditRows(t, org.id)).length).toBe(before);
  });

  it('refuses groups and roles that are not the organization’s, and a group mapped twice', async () => {
    const otherRole = await roleBySlug(t, other.owner, 'admin');
    const unknownGroup = await expectError(
      await put([{ groupId: otherGroup, roleId: roles.admin.id }]),
      400,
      'VALIDATION_ERROR',
    );
    expect(unknownGroup.details).toEqual([{ path: '0.groupId', message: 'no such group in this organization' }]);
    const unknownRole = await expectError(
      await put([
        { groupId: groups.engineering, roleId: roles.admin.id },
        { groupId: groups.support, roleId: otherRole.id },
      ]),
      400,
      'VALIDATION_ERROR',
    );
    expect(unknownRole.details).toEqual([{ path: '1.roleId', message: 'no such role in this organization' }]);
    await expectError(
      await put([
        { groupId: groups.engineering, roleId: roles.admin.id },
        { groupId: groups.engineering, roleId: roles.viewer.id },
      ]),
      400,
      'VALIDATION_ERROR',
    );
    await expectError(await put({ groupId: groups.engineering, roleId: roles.admin.id }), 400, 'VALIDATION_ERROR');
    expect(await expectStatus<Mapping[]>(await get(), 200)).toEqual([]);
    expect(await slugs()).toMatchObject({ alice: 'member', bob: 'member', carol: 'member' });
  });

  it('an Admin maps to roles they hold but never to Owner, nor takes an Owner mapping away', async () => {
    await expectStatus(await put([{ groupId: groups.engineering, roleId: roles.admin.id }], admin), 200);
    const owner = await expectError(
      await put([{ groupId: groups.leads, roleId: roles.owner.id }], admin),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    expect(owner.details?.[0]?.path).toBe('0.roleId');
    await expectStatus(await put([{ groupId: groups.founders, roleId: roles.owner.id }]), 200);
    await expectError(await put([], admin), 403, 'INSUFFICIENT_PERMISSIONS');
    expect(await expectStatus<Mapping[]>(await get(admin), 200)).toEqual([
      { groupId: groups.founders, roleId: roles.owner.id },
    ]);
  });

  it('an Admin takes the Owner role from no one: a mapping that would demote an Owner is refused', async () => {
    // bob is an Owner by hand, in Support; a mapping of Support to Admin would make him Admin.
    await t.database.withOwner((owner) =>
      owner
        .updateTable('members')
        .set({ role_id: roles.owner.id, role: 'owner' })
        .where('id', '=', bob.memberId)
        .execute(),
    );
    const audit = (await auditRows(t, org.id)).length;
    const refused = await expectError(
      await put([{ groupId: groups.support, roleId: roles.admin.id }], admin),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    expect(refused.details?.[0]?.message).toBe('only an Owner gives or takes away the Owner role');
    expect(await expectStatus<Mapping[]>(await get(), 200)).toEqual([]);
    expect(await slugs()).toMatchObject({ owner: 'owner', bob: 'owner', carol: 'member' });
    expect((await auditRows(t, org.id)).length).toBe(audit);
    // What touches no Owner an Admin still maps; the Owner makes the change that demotes.
    await expectStatus(await put([{ groupId: groups.engineering, roleId: roles.admin.id }], admin), 200);
    expect(await slugs()).toMatchObject({ alice: 'admin', bob: 'owner', carol: 'admin' });
    await expectStatus(await put([{ groupId: groups.support, roleId: roles.admin.id }]), 200);
    expect(await slugs()).toMatchObject({ alice: 'member', bob: 'admin', carol: 'admin' });
  });

  it('members read the mapping (roles:read) but cannot change it; API keys never change it', async () => {
    expect(await expectStatus<Mapping[]>(await get(alice), 200)).toEqual([]);
    await expectError(await put([], alice), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectError(await call(t, '/api/scim/group-roles'), 401, 'UNAUTHORIZED');
  });

  it('never demotes the last Owner: the whole change is refused (409) and nothing moves', async () => {
    const refused = await put([
      { groupId: groups.founders, roleId: roles.viewer.id },
      { groupId: groups.engineering, roleId: roles.admin.id },
    ]);
    await expectError(refused, 409, 'OWNERSHIP_CONSTRAINT');
    expect(await expectStatus<Mapping[]>(await get(), 200)).toEqual([]);
    expect(await slugs()).toMatchObject({ owner: 'owner', alice: 'member', carol: 'member' });
  });
});

describe('SCIM group roles with API keys', () => {
  let t: TestApp;
  let org: TestOrganization;

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    org = await createOrganization(t, await signedInUser(t));
  });
  afterAll(() => t.close());

  it('a key with roles:write cannot replace the mapping; one with roles:read reads it', async () => {
    const { key } = await expectStatus<{ key: string }>(
      await call(t, '/api/api-keys', {
        body: { name: 'directory', scopes: ['roles:read', 'roles:write'] },
        jar: org.owner.jar,
      }),
      201,
    );
    const bearer = { authorization: `Bearer ${key}` };
    await expectError(
      await call(t, '/api/scim/group-roles', { method: 'PUT', body: [], headers: bearer }),
      403,
      'FORBIDDEN',
    );
    expect(await expectStatus(await call(t, '/api/scim/group-roles', { headers: bearer }), 200)).toEqual([]);
  });
});
