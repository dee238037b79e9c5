import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus, UUID_V4 } from '../support/http.js';
import {
  ADMIN_PERMISSIONS,
  ALL_PERMISSIONS,
  auditRows,
  createOrganization,
  createRole,
  listMembers,
  listRoles,
  newMember,
  READ_PERMISSIONS,
  type RoleRecord,
  roleBySlug,
  sessionPermissions,
  storedMemberRoles,
  storedRoles,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/** docs/api.md "Permissions and roles": the role routes, record, errors and audit actions. */
describe('role routes', () => {
  let t: TestApp;
  let org: TestOrganization;
  let admin: TestMember;
  let other: TestOrganization;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t, { name: 'Olive Owner' }));
    admin = await newMember(t, org, 'admin', { name: 'Adam Admin' });
    other = await createOrganization(t, await signedInUser(t, { name: 'Otto Other' }));
  });
  afterAll(() => t.close());

  const patch = (id: string, body: unknown, jar = org.owner.jar) =>
    call(t, `/api/roles/${id}`, { method: 'PATCH', body, jar });
  const del = (id: string, jar = org.owner.jar) => call(t, `/api/roles/${id}`, { method: 'DELETE', jar });

  describe('default roles', () => {
    it('are seeded with exactly the default permission sets, defaults first, and the creator is Owner', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      const roles = await listRoles(t, fresh.owner);
      expect(roles.map((r) => [r.name, r.slug, r.isDefault])).toEqual([
        ['Owner', 'owner', true],
        ['Admin', 'admin', true],
        ['Member', 'member', true],
        ['Viewer', 'viewer', true],
      ]);
      const bySlug = Object.fromEntries(roles.map((r) => [r.slug, r.permissions]));
      expect(bySlug.owner).toEqual(ALL_PERMISSIONS);
      expect(bySlug.owner).toHaveLength(17);
      expect(bySlug.admin).toEqual(ADMIN_PERMISSIONS);
      expect(bySlug.admin).toHaveLength(15);
      expect(bySlug.member).toEqual(READ_PERMISSIONS);
      expect(bySlug.viewer).toEqual(READ_PERMISSIONS);
      expect(READ_PERMISSIONS).toHaveLength(6);

      // The tables agree with the answer (and hold exactly four roles).
      const stored = await storedRoles(t, fresh.id);
      expect(stored.map((r) => [r.slug, r.is_default, r.permissions.length])).toEqual([
        ['admin', true, 15],
        ['member', true, 6],
        ['owner', true, 17],
        ['viewer', true, 6],
      ]);

      const members = await listMembers(t, fresh.owner);
      expect(members).toHaveLength(1);
      expect(members[0]).toMatchObject({ userId: fresh.owner.id, roleSlug: 'owner', roleId: roles[0]!.id });
      expect(await sessionPermissions(t, fresh.owner)).toEqual(ALL_PERMISSIONS);
    });

    it('lists Owner, Admin, Member, Viewer, then custom roles by name', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      for (const name of ['zeta team', 'Alpha Team', 'beta team'])
        await createRole(t, fresh.owner, { name, permissions: [] });
      expect((await listRoles(t, fresh.owner)).map((r) => r.name)).toEqual([
        'Owner',
        'Admin',
        'Member',
        'Viewer',
        'Alpha Team',
        'beta team',
        'zeta team',
      ]);
    });
  });

  describe('POST /api/roles', () => {
    it('answers 201 with the role record: slug from name, permissions sorted, not default', async () => {
      const before = Date.now();
      const res = await call(t, '/api/roles', {
        body: {
          name: 'Billing  Manager!',
          description: 'Pays the bills',
          permissions: ['roles:read', 'api_keys:read', 'members:read'],
        },
        jar: org.owner.jar,
      });
      const role = await expectStatus<RoleRecord>(res, 201);
      expect(Object.keys(role).sort()).toEqual([
        'createdAt',
        'description',
        'id',
        'isDefault',
        'name',
        'permissions',
        'slug',
        'updatedAt',
      ]);
      expect(role).toMatchObject({
        name: 'Billing  Manager!',
        slug: 'billing-manager',
        description: 'Pays the bills',
        permissions: ['api_keys:read', 'members:read', 'roles:read'],
        isDefault: false,
      });
      expect(role.id).toMatch(UUID_V4);
      expect(new Date(role.createdAt).toISOString()).toBe(role.createdAt);
      expect(new Date(role.updatedAt).toISOString()).toBe(role.updatedAt);
      expect(new Date(role.createdAt).getTime()).toBeGreaterThan(before - 60_000);

      const listed = (await listRoles(t, org.owner)).find((r) => r.id === role.id);
      expect(listed).toEqual(role);
      const stored = (await storedRoles(t, org.id)).find((r) => r.id === role.id);
      expect(stored).toMatchObject({
        slug: 'billing-manager',
        is_default: false,
        permissions: ['api_keys:read', 'members:read', 'roles:read'],
      });
    });

    it('defaults the description to empty and accepts an empty permission list', async () => {
      const role = await createRole(t, org.owner, { name: 'Nobody Special', permissions: [] });
      expect(role).toMatchObject({ slug: 'nobody-special', description: '', permissions: [] });
    });

    it('answers 409 SLUG_CONFLICT for a name whose slug exists, whatever its case or punctuation, and creates nothing', async () => {
      await createRole(t, org.owner, { name: 'Support Desk', permissions: ['members:read'] });
      const before = await storedRoles(t, org.id);
      for (const name of [
        'Support Desk',
        'support desk',
        'SUPPORT-DESK',
        '  support...desk!! ',
        'Owner',
        'owner',
        'ADMIN',
        'Viewer?',
      ]) {
        const res = await call(t, '/api/roles', { body: { name, permissions: [] }, jar: org.owner.jar });
        const body = await expectStatus(res, 409);
        expect(body.code, name).toBe('SLUG_CONFLICT');
      }
      expect(await storedRoles(t, org.id)).toEqual(before);
    });

    it('allows the same name in another organization (slugs are unique per organization)', async () => {
      await createRole(t, org.owner, { name: 'Shared Name', permissions: [] });
      const role = await createRole(t, other.owner, { name: 'Shared Name', permissions: [] });
      expect(role.slug).toBe('shared-name');
    });

    it.each([
      ['unknown field tenantId', { name: 'X One', permissions: [], tenantId: '00000000-0000-4000-8000-000000000000' }],
      ['unknown field isDefault', { name: 'X Two', permissions: [], isDefault: true }],
      ['unknown field slug', { name: 'X Three', permissions: [], slug: 'owner' }],
      ['a permission with an unknown action', { name: 'X Four', permissions: ['roles:fly'] }],
      ['a permission with an unknown resource', { name: 'X Five', permissions: ['billing:read'] }],
      ['a permission in the wrong case', { name: 'X Six', permissions: ['Roles:Read'] }],
      ['a permission that does not exist (api_keys:delete)', { name: 'X Seven', permissions: ['api_keys:delete'] }],
      ['a permission that is not a string', { name: 'X Eight', permissions: [42] }],
      ['a repeated permission', { name: 'X Nine', permissions: ['roles:read', 'roles:read'] }],
      ['an empty name', { name: '', permissions: [] }],
      ['a blank name', { name: '   ', permissions: [] }],
      ['a name of 101 characters', { name: 'n'.repeat(101), permissions: [] }],
      ['a name without letters or digits', { name: '!!!', permissions: [] }],
      ['a name with a line break', { name: 'Line\nBreak', permissions: [] }],
      ['a name with a carriage return', { name: 'Carriage\rReturn', permissions: [] }],
      ['a name led by a tab', { name: '\tTabbed', permissions: [] }],
      ['a name with a NUL', { name: 'Nul\u0000Role', permissions: [] }],
      ['a name with a terminal escape', { name: 'Esc\u001b[2J', permissions: [] }],
      ['a name with DEL', { name: 'Del\u007fRole', permissions: [] }],
      ['a name with a C1 control (NEL)', { name: 'Next\u0085Line', permissions: [] }],
      ['a name with a line separator (U+2028)', { name: 'Line\u2028Separator', permissions: [] }],
      ['a name of 101 characters as sent (100 plus a blank)', { name: ` ${'n'.repeat(100)}`, permissions: [] }],
      ['a description with a NUL', { name: 'X Thirteen', description: 'before\u0000after', permissions: [] }],
      ['a missing name', { permissions: [] }],
      ['missing permissions', { name: 'X Ten' }],
      ['permissions that are not a list', { name: 'X Eleven', permissions: 'roles:read' }],
      ['a description that is not a string', { name: 'X Twelve', permissions: [], description: 7 }],
    ])('answers 400 VALIDATION_ERROR for %s, and creates nothing', async (_label, body) => {
      const before = (await storedRoles(t, org.id)).length;
      const res = await call(t, '/api/roles', { body, jar: org.owner.jar });
      const error = await expectStatus(res, 400);
      expect(error.code).toBe('VALIDATION_ERROR');
      expect(JSON.stringify(error)).not.toMatch(/select|insert|stack/i);
      expect((await storedRoles(t, org.id)).length).toBe(before);
    });

    it('stores a name without its surrounding blanks, and keeps line breaks in a description', async () => {
      const role = await createRole(t, org.owner, {
        name: '\u00a0 Café Crew 日本\u3000',
        description: 'first line\nsecond line',
        permissions: [],
      });
      expect(role).toMatchObject({ name: 'Café Crew 日本', slug: 'cafe-crew', description: 'first line\nsecond line' });
      expect((await storedRoles(t, org.id)).find((r) => r.id === role.id)).toMatchObject({
        name: 'Café Crew 日本',
        description: 'first line\nsecond line',
      });
    });

    it('accepts a name of exactly 100 characters', async () => {
      const name = `Long ${'x'.repeat(95)}`;
      const role = await createRole(t, org.owner, { name, permissions: [] });
      expect(role.name).toBe(name);
    });

    it('refuses an Admin granting organizations:delete, which the Admin lacks (403, details name it)', async () => {
      const before = (await storedRoles(t, org.id)).length;
      const res = await call(t, '/api/roles', {
        body: { name: 'Demolition', permissions: ['organizations:delete', 'users:delete', 'roles:read'] },
        jar: admin.jar,
      });
      const body = await expectStatus(res, 403);
      expect(body.code).toBe('INSUFFICIENT_PERMISSIONS');
      expect(body.message).toBe('Insufficient permissions');
      const named = (body.details as { message: string }[]).map((d) => d.message).join(' ');
      expect(named).toContain('organizations:delete');
      expect(named).toContain('users:delete');
      expect(named).not.toContain('roles:read');
      expect((await storedRoles(t, org.id)).length).toBe(before);
      // What the Admin holds, the Admin may grant.
      const allowed = await createRole(t, admin, { name: 'Admin Made', permissions: ['members:write', 'roles:read'] });
      expect(allowed.permissions).toEqual(['members:write', 'roles:read']);
    });

    it('refuses a Member (no roles:write) and a request without a session', async () => {
      const member = await newMember(t, org, 'member');
      const refused = await expectStatus(
        await call(t, '/api/roles', { body: { name: 'Sneaky', permissions: [] }, jar: member.jar }),
        403,
      );
      expect(refused.code).toBe('INSUFFICIENT_PERMISSIONS');
      const anonymous = await expectStatus(
        await call(t, '/api/roles', { body: { name: 'Sneaky', permissions: [] } }),
        401,
      );
      expect(anonymous.code).toBe('UNAUTHORIZED');
      expect((await storedRoles(t, org.id)).some((r) => r.slug === 'sneaky')).toBe(false);
    });

    it('writes a role.created audit entry in the tenant', async () => {
      const role = await createRole(t, org.owner, {
        name: 'Audited Role',
        permissions: ['roles:read', 'members:read'],
      });
      const entries = (await auditRows(t, org.id, 'role.created')).filter((e) => e.metadata.roleId === role.id);
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        tenant_id: org.id,
        actor_id: org.owner.id,
        metadata: {
          roleId: role.id,
          name: 'Audited Role',
          slug: 'audited-role',
          permissions: ['members:read', 'roles:read'],
        },
      });
      expect((await auditRows(t, other.id, 'role.created')).filter((e) => e.metadata.roleId === role.id)).toHaveLength(
        0,
      );
    });
  });

  describe('PATCH /api/roles/:id', () => {
    it('changes only what it is given: a name regenerates the slug, a description alone, permissions replace', async () => {
      const role = await createRole(t, org.owner, {
        name: 'Editors',
        description: 'first',
        permissions: ['roles:read', 'members:read'],
      });

      const renamed = await expectStatus<RoleRecord>(await patch(role.id, { name: 'Senior Editors' }), 200);
      expect(renamed).toMatchObject({
        id: role.id,
        name: 'Senior Editors',
        slug: 'senior-editors',
        description: 'first',
        permissions: ['members:read', 'roles:read'],
        isDefault: false,
      });
      expect(renamed.createdAt).toBe(role.createdAt);
      expect(new Date(renamed.updatedAt).getTime()).toBeGreaterThanOrEqual(new Date(role.updatedAt).getTime());

      const described = await expectStatus<RoleRecord>(await patch(role.id, { description: 'second' }), 200);
      expect(described).toMatchObject({
        name: 'Senior Editors',
        slug: 'senior-editors',
        description: 'second',
        permissions: ['members:read', 'roles:read'],
      });

      const replaced = await expectStatus<RoleRecord>(
        await patch(role.id, { permissions: ['invitations:write', 'api_keys:read'] }),
        200,
      );
      expect(replaced).toMatchObject({
        name: 'Senior Editors',
        description: 'second',
        permissions: ['api_keys:read', 'invitations:write'],
      });

      const emptied = await expectStatus<RoleRecord>(await patch(role.id, { permissions: [] }), 200);
      expect(emptied.permissions).toEqual([]);

      const stored = (await storedRoles(t, org.id)).find((r) => r.id === role.id);
      expect(stored).toMatchObject({
        name: 'Senior Editors',
        slug: 'senior-editors',
        description: 'second',
        permissions: [],
      });
      expect((await listRoles(t, org.owner)).find((r) => r.id === role.id)).toEqual(emptied);
    });

    it('answers 409 SLUG_CONFLICT when the new name collides, and leaves the role as it was', async () => {
      await createRole(t, org.owner, { name: 'Auditors', permissions: [] });
      const role = await createRole(t, org.owner, { name: 'Reviewers', permissions: ['roles:read'] });
      for (const name of ['auditors', 'AUDITORS!', 'Owner', 'member']) {
        const body = await expectStatus(await patch(role.id, { name }), 409);
        expect(body.code, name).toBe('SLUG_CONFLICT');
      }
      // Its own slug is no conflict.
      const same = await expectStatus<RoleRecord>(await patch(role.id, { name: 'REVIEWERS' }), 200);
      expect(same.slug).toBe('reviewers');
      const stored = (await storedRoles(t, org.id)).find((r) => r.id === role.id);
      expect(stored).toMatchObject({ slug: 'reviewers', name: 'REVIEWERS', permissions: ['roles:read'] });
    });

    it('answers 400 for unknown fields, an empty body, bad permissions, and a bad name', async () => {
      const role = await createRole(t, org.owner, { name: 'Patch Target', permissions: ['roles:read'] });
      for (const body of [
        {},
        { isDefault: true },
        { slug: 'x' },
        { permissions: ['roles:fly'] },
        { permissions: ['api_keys:delete'] },
        { permissions: ['roles:read', 'roles:read'] },
        { name: '' },
        { name: 'x'.repeat(101) },
        { name: '---' },
        { name: 'Two\nLines' },
        { name: 'Nul\u0000' },
        { name: ' \t ' },
        { description: 'nul\u0000' },
      ]) {
        const error = await expectStatus(await patch(role.id, body), 400);
        expect(error.code, JSON.stringify(body)).toBe('VALIDATION_ERROR');
      }
      const stored = (await storedRoles(t, org.id)).find((r) => r.id === role.id);
      expect(stored).toMatchObject({ slug: 'patch-target', is_default: false, permissions: ['roles:read'] });
    });

    it("refuses changing the Owner role's permissions (409 DEFAULT_ROLE), even to the same set", async () => {
      const owner = await roleBySlug(t, org.owner, 'owner');
      for (const permissions of [['roles:read'], ALL_PERMISSIONS, []]) {
        const body = await expectStatus(await patch(owner.id, { permissions }), 409);
        expect(body.code).toBe('DEFAULT_ROLE');
      }
      expect((await roleBySlug(t, org.owner, 'owner')).permissions).toEqual(ALL_PERMISSIONS);
    });

    it('refuses renaming a default role (409 DEFAULT_ROLE) and keeps its name and slug', async () => {
      for (const slug of ['owner', 'admin', 'member', 'viewer']) {
        const role = await roleBySlug(t, org.owner, slug);
        for (const name of ['Renamed', role.name.toUpperCase()]) {
          const body = await expectStatus(await patch(role.id, { name }), 409);
          expect(body.code, `${slug} -> ${name}`).toBe('DEFAULT_ROLE');
        }
        const after = await roleBySlug(t, org.owner, slug);
        expect(after).toMatchObject({ name: role.name, slug, permissions: role.permissions });
      }
    });

    it('lets the permissions of Admin, Member and Viewer be customized, and a default role keep its own name', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      for (const slug of ['admin', 'member', 'viewer']) {
        const role = await roleBySlug(t, fresh.owner, slug);
        const updated = await expectStatus<RoleRecord>(
          await call(t, `/api/roles/${role.id}`, {
            method: 'PATCH',
            body: { name: role.name, permissions: ['roles:read', 'api_keys:write'] },
            jar: fresh.owner.jar,
          }),
          200,
        );
        expect(updated).toMatchObject({
          id: role.id,
          name: role.name,
          slug,
          isDefault: true,
          permissions: ['api_keys:write', 'roles:read'],
        });
      }
      const described = await expectStatus<RoleRecord>(
        await call(t, `/api/roles/${(await roleBySlug(t, fresh.owner, 'owner')).id}`, {
          method: 'PATCH',
          body: { description: 'The boss' },
          jar: fresh.owner.jar,
        }),
        200,
      );
      expect(described).toMatchObject({ slug: 'owner', description: 'The boss', permissions: ALL_PERMISSIONS });
    });

    it('refuses an Admin granting organizations:delete through an update (403 INSUFFICIENT_PERMISSIONS)', async () => {
      const role = await createRole(t, org.owner, { name: 'Escalation Target', permissions: ['roles:read'] });
      const body = await expectStatus(
        await patch(role.id, { permissions: ['roles:read', 'organizations:delete'] }, admin.jar),
        403,
      );
      expect(body.code).toBe('INSUFFICIENT_PERMISSIONS');
      expect(JSON.stringify(body.details)).toContain('organizations:delete');
      expect((await storedRoles(t, org.id)).find((r) => r.id === role.id)?.permissions).toEqual(['roles:read']);
    });

    it('writes a role.updated audit entry with before and after', async () => {
      const role = await createRole(t, org.owner, { name: 'Before Name', permissions: ['roles:read'] });
      await expectStatus(await patch(role.id, { name: 'After Name', permissions: ['members:read'] }), 200);
      const entries = (await auditRows(t, org.id, 'role.updated')).filter((e) => e.metadata.roleId === role.id);
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        actor_id: org.owner.id,
        metadata: {
          before: { name: 'Before Name', slug: 'before-name', permissions: ['roles:read'] },
          after: { name: 'After Name', slug: 'after-name', permissions: ['members:read'] },
        },
      });
    });
  });

  describe('DELETE /api/roles/:id', () => {
    it('deletes a custom role and moves its members to Viewer, counting them', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      const role = await createRole(t, fresh.owner, {
        name: 'Contractors',
        permissions: ['members:read', 'roles:read'],
      });
      const keep = await createRole(t, fresh.owner, { name: 'Keepers', permissions: ['members:read'] });
      const a = await newMember(t, fresh, 'contractors');
      const b = await newMember(t, fresh, 'contractors');
      const c = await newMember(t, fresh, 'keepers');
      expect((await listMembers(t, fresh.owner)).filter((m) => m.roleSlug === 'contractors')).toHaveLength(2);

      const res = await call(t, `/api/roles/${role.id}`, { method: 'DELETE', jar: fresh.owner.jar });
      expect(await expectStatus(res, 200)).toEqual({ id: role.id, deleted: true, reassignedMembers: 2 });

      const viewer = await roleBySlug(t, fresh.owner, 'viewer');
      const members = Object.fromEntries((await listMembers(t, fresh.owner)).map((m) => [m.id, m]));
      expect(members[a.memberId]).toMatchObject({ roleSlug: 'viewer', roleId: viewer.id });
      expect(members[b.memberId]).toMatchObject({ roleSlug: 'viewer', roleId: viewer.id });
      expect(members[c.memberId]).toMatchObject({ roleSlug: 'keepers', roleId: keep.id });
      expect(members[fresh.ownerMemberId]).toMatchObject({ roleSlug: 'owner' });

      const stored = await storedRoles(t, fresh.id);
      expect(stored.map((r) => r.slug)).toEqual(['admin', 'keepers', 'member', 'owner', 'viewer']);
      const permissionRows = await t.database.withOwner(
        async (owner) =>
          (await owner.selectFrom('role_permissions').select('role_id').where('role_id', '=', role.id).execute())
            .length,
      );
      expect(permissionRows).toBe(0);
      // The moved members act with Viewer's permissions on their very next request.
      expect(await sessionPermissions(t, a)).toEqual(READ_PERMISSIONS);

      const again = await expectStatus(
        await call(t, `/api/roles/${role.id}`, { method: 'DELETE', jar: fresh.owner.jar }),
        404,
      );
      expect(again.code).toBe('NOT_FOUND');

      const empty = await expectStatus(
        await call(t, `/api/roles/${keep.id}`, { method: 'DELETE', jar: fresh.owner.jar }),
        200,
      );
      expect(empty).toEqual({ id: keep.id, deleted: true, reassignedMembers: 1 });

      const unused = await createRole(t, fresh.owner, { name: 'Unused', permissions: [] });
      expect(
        await expectStatus(await call(t, `/api/roles/${unused.id}`, { method: 'DELETE', jar: fresh.owner.jar }), 200),
      ).toEqual({ id: unused.id, deleted: true, reassignedMembers: 0 });

      const entries = (await auditRows(t, fresh.id, 'role.deleted')).map((e) => e.metadata);
      expect(entries).toEqual([
        expect.objectContaining({ roleId: role.id, slug: 'contractors', reassignedMembers: 2 }),
        expect.objectContaining({ roleId: keep.id, slug: 'keepers', reassignedMembers: 1 }),
        expect.objectContaining({ roleId: unused.id, slug: 'unused', reassignedMembers: 0 }),
      ]);
    });

    it('refuses deleting a default role (409 DEFAULT_ROLE) and changes nothing', async () => {
      const before = await storedRoles(t, org.id);
      const membersBefore = await storedMemberRoles(t, org.id);
      for (const slug of ['owner', 'admin', 'member', 'viewer']) {
        const role = await roleBySlug(t, org.owner, slug);
        const body = await expectStatus(await del(role.id), 409);
        expect(body.code, slug).toBe('DEFAULT_ROLE');
      }
      expect(await storedRoles(t, org.id)).toEqual(before);
      expect(await storedMemberRoles(t, org.id)).toEqual(membersBefore);
    });

    it('refuses an Admin (roles:delete is held, but defaults stay) and a Member (no roles:delete)', async () => {
      const role = await createRole(t, org.owner, { name: 'Deletable', permissions: [] });
      const member = await newMember(t, org, 'member');
      const refused = await expectStatus(await del(role.id, member.jar), 403);
      expect(refused.code).toBe('INSUFFICIENT_PERMISSIONS');
      expect(
        await expectStatus(await del((await roleBySlug(t, org.owner, 'viewer')).id, admin.jar), 409),
      ).toMatchObject({ code: 'DEFAULT_ROLE' });
      expect(await expectStatus(await del(role.id, admin.jar), 200)).toMatchObject({ id: role.id, deleted: true });
    });
  });

  describe('ids', () => {
    const notV4 = [
      ['a v1 UUID', 'c232ab00-9414-11ec-b3c8-9e6bdeced846'],
      ['the nil UUID', '00000000-0000-0000-0000-000000000000'],
      ['abc', 'abc'],
      ['a UUID with a bad variant', '3b241101-e2bb-4255-c227-2a4a4a1b4c5d'],
    ] as const;

    it.each(notV4)('answers 400 VALIDATION_ERROR for %s on PATCH and DELETE', async (_label, id) => {
      const patched = await expectStatus(await patch(id, { description: 'x' }), 400);
      expect(patched.code).toBe('VALIDATION_ERROR');
      const deleted = await expectStatus(await del(id), 400);
      expect(deleted.code).toBe('VALIDATION_ERROR');
    });

    it('answers 404 NOT_FOUND for an unknown id', async () => {
      const id = crypto.randomUUID();
      expect(await expectStatus(await patch(id, { description: 'x' }), 404)).toMatchObject({ code: 'NOT_FOUND' });
      expect(await expectStatus(await del(id), 404)).toMatchObject({ code: 'NOT_FOUND' });
    });

    it("answers 404 for another organization's role on PATCH and DELETE, and leaves it unchanged", async () => {
      const theirs = await createRole(t, other.owner, {
        name: 'Their Role',
        description: 'theirs',
        permissions: ['roles:read'],
      });
      const theirViewer = await roleBySlug(t, other.owner, 'viewer');
      const before = await storedRoles(t, other.id);
      for (const id of [theirs.id, theirViewer.id]) {
        expect(await expectStatus(await patch(id, { name: 'Hijacked', permissions: [] }), 404)).toMatchObject({
          code: 'NOT_FOUND',
        });
        expect(await expectStatus(await patch(id, { description: 'hijacked' }), 404)).toMatchObject({
          code: 'NOT_FOUND',
        });
        expect(await expectStatus(await del(id), 404)).toMatchObject({ code: 'NOT_FOUND' });
      }
      expect(await storedRoles(t, other.id)).toEqual(before);
      expect((await listRoles(t, other.owner)).find((r) => r.id === theirs.id)).toEqual(theirs);
      // And the foreign role never shows up in this organization's list.
      expect((await listRoles(t, org.owner)).some((r) => r.id === theirs.id)).toBe(false);
    });
  });

  describe('permissions follow the role on the very next request', () => {
    it('when the member is given another role, and when their role is edited', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      const member = await newMember(t, fresh, 'member');
      expect(await sessionPermissions(t, member)).toEqual(READ_PERMISSIONS);
      const refused = await expectStatus(
        await call(t, '/api/roles', { body: { name: 'Not Yet', permissions: [] }, jar: member.jar }),
        403,
      );
      expect(refused.code).toBe('INSUFFICIENT_PERMISSIONS');

      const adminRole = await roleBySlug(t, fresh.owner, 'admin');
      await expectStatus(
        await call(t, `/api/admin/members/${member.memberId}`, {
          method: 'PATCH',
          body: { roleId: adminRole.id },
          jar: fresh.owner.jar,
        }),
        200,
      );
      expect(await sessionPermissions(t, member)).toEqual(ADMIN_PERMISSIONS);
      await createRole(t, member, { name: 'Now Allowed', permissions: [] });

      const custom = await createRole(t, fresh.owner, { name: 'Narrow', permissions: ['members:read'] });
      await expectStatus(
        await call(t, `/api/admin/members/${member.memberId}`, {
          method: 'PATCH',
          body: { roleId: custom.id },
          jar: fresh.owner.jar,
        }),
        200,
      );
      expect(await sessionPermissions(t, member)).toEqual(['members:read']);

      await expectStatus(
        await patch(custom.id, { permissions: ['members:read', 'roles:read', 'roles:write'] }, fresh.owner.jar),
        200,
      );
      expect(await sessionPermissions(t, member)).toEqual(['members:read', 'roles:read', 'roles:write']);

      const memberRole = await roleBySlug(t, fresh.owner, 'member');
      await expectStatus(
        await call(t, `/api/admin/members/${member.memberId}`, {
          method: 'PATCH',
          body: { roleId: memberRole.id },
          jar: fresh.owner.jar,
        }),
        200,
      );
      await expectStatus(await patch(memberRole.id, { permissions: ['members:read'] }, fresh.owner.jar), 200);
      expect(await sessionPermissions(t, member)).toEqual(['members:read']);
    });
  });
});
