import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus, UUID_V4 } from '../support/http.js';
import {
  type Actor,
  auditRows,
  createOrganization,
  createRole,
  listMembers,
  newMember,
  roleBySlug,
  roleSlugsByMember,
  storedMemberRoles,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/** docs/api.md "Members and ownership": the member routes, their errors and audit actions. */
describe('member routes', () => {
  let t: TestApp;
  let org: TestOrganization;
  let admin: TestMember;
  let other: TestOrganization;
  let roles: Record<string, string>;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t, { name: 'Olive Owner' }));
    admin = await newMember(t, org, 'admin', { name: 'Adam Admin' });
    other = await createOrganization(t, await signedInUser(t, { name: 'Otto Other' }));
    roles = {};
    for (const slug of ['owner', 'admin', 'member', 'viewer']) roles[slug] = (await roleBySlug(t, org.owner, slug)).id;
  });
  afterAll(() => t.close());

  const change = (memberId: string, body: unknown, actor: Actor = org.owner) =>
    call(t, `/api/admin/members/${memberId}`, { method: 'PATCH', body, jar: actor.jar });
  const changeDeprecated = (memberId: string, body: unknown, actor: Actor = org.owner) =>
    call(t, `/api/roles/members/${memberId}/role`, { method: 'PATCH', body, jar: actor.jar });

  describe('GET /api/members', () => {
    it('lists the members of the active organization with their role', async () => {
      const fresh = await createOrganization(t, await signedInUser(t, { name: 'Fay Fresh' }));
      const member = await newMember(t, fresh, 'viewer', { name: 'Vic Viewer' });
      const viewer = await roleBySlug(t, fresh.owner, 'viewer');
      const owner = await roleBySlug(t, fresh.owner, 'owner');

      const rows = await listMembers(t, fresh.owner);
      expect(rows).toHaveLength(2);
      for (const row of rows) {
        expect(Object.keys(row).sort()).toEqual(['createdAt', 'email', 'id', 'name', 'roleId', 'roleSlug', 'userId']);
        expect(row.id).toMatch(UUID_V4);
        expect(new Date(row.createdAt).toISOString()).toBe(row.createdAt);
      }
      const byUser = Object.fromEntries(rows.map((r) => [r.userId, r]));
      expect(byUser[fresh.owner.id]).toMatchObject({
        id: fresh.ownerMemberId,
        email: fresh.owner.email,
        name: 'Fay Fresh',
        roleId: owner.id,
        roleSlug: 'owner',
      });
      expect(byUser[member.id]).toMatchObject({
        id: member.memberId,
        email: member.email,
        name: 'Vic Viewer',
        roleId: viewer.id,
        roleSlug: 'viewer',
      });
      // A viewer holds members:read.
      expect((await listMembers(t, member)).map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
    });

    it('never shows another organization, and needs a session', async () => {
      const ids = (await listMembers(t, other.owner)).map((m) => m.userId);
      expect(ids).toEqual([other.owner.id]);
      expect(await expectStatus(await call(t, '/api/members'), 401)).toMatchObject({ code: 'UNAUTHORIZED' });
    });
  });

  describe('PATCH /api/admin/members/:memberId', () => {
    it('changes the role and answers { memberId, roleId, previousRoleId }, with a member.role_changed audit entry', async () => {
      const member = await newMember(t, org, 'member');
      const res = await change(member.memberId, { roleId: roles.viewer });
      expect(await expectStatus(res, 200)).toEqual({
        memberId: member.memberId,
        roleId: roles.viewer,
        previousRoleId: roles.member,
      });
      expect((await roleSlugsByMember(t, org.owner))[member.memberId]).toBe('viewer');

      const entries = (await auditRows(t, org.id, 'member.role_changed')).filter(
        (e) => e.metadata.memberId === member.memberId,
      );
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        tenant_id: org.id,
        actor_id: org.owner.id,
        metadata: { memberId: member.memberId, roleId: roles.viewer, previousRoleId: roles.member },
      });
      expect(res.headers.get('deprecation')).toBeNull();
    });

    it('assigns a custom role of the organization', async () => {
      const custom = await createRole(t, org.owner, { name: 'Custom Member Role', permissions: ['members:read'] });
      const member = await newMember(t, org, 'member');
      expect(await expectStatus(await change(member.memberId, { roleId: custom.id }), 200)).toMatchObject({
        roleId: custom.id,
      });
      expect((await roleSlugsByMember(t, org.owner))[member.memberId]).toBe('custom-member-role');
    });

    it('lets an Admin change a Member to Viewer (members:write, nothing the Admin lacks)', async () => {
      const member = await newMember(t, org, 'member');
      expect(await expectStatus(await change(member.memberId, { roleId: roles.viewer }, admin), 200)).toMatchObject({
        previousRoleId: roles.member,
      });
    });

    it('refuses demoting the last Owner (409 OWNERSHIP_CONSTRAINT), by anyone, and changes nothing', async () => {
      const before = await storedMemberRoles(t, org.id);
      for (const target of [roles.admin, roles.member, roles.viewer]) {
        const body = await expectStatus(await change(org.ownerMemberId, { roleId: target }), 409);
        expect(body.code).toBe('OWNERSHIP_CONSTRAINT');
        const deprecated = await expectStatus(await changeDeprecated(org.ownerMemberId, { roleId: target }), 409);
        expect(deprecated.code).toBe('OWNERSHIP_CONSTRAINT');
      }
      expect(await storedMemberRoles(t, org.id)).toEqual(before);
      expect((await roleSlugsByMember(t, org.owner))[org.ownerMemberId]).toBe('owner');
      expect(
        (await auditRows(t, org.id, 'member.role_changed')).filter((e) => e.metadata.memberId === org.ownerMemberId),
      ).toHaveLength(0);
    });

    it('lets an Owner step down once another Owner exists', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      const second = await newMember(t, fresh, 'admin');
      const freshOwner = (await roleBySlug(t, fresh.owner, 'owner')).id;
      const freshAdmin = (await roleBySlug(t, fresh.owner, 'admin')).id;
      expect(await expectStatus(await change(second.memberId, { roleId: freshOwner }, fresh.owner), 200)).toMatchObject(
        { roleId: freshOwner, previousRoleId: freshAdmin },
      );
      expect(
        await expectStatus(await change(fresh.ownerMemberId, { roleId: freshAdmin }, fresh.owner), 200),
      ).toMatchObject({ roleId: freshAdmin, previousRoleId: freshOwner });
      const slugs = await roleSlugsByMember(t, second);
      expect(slugs).toEqual({ [fresh.ownerMemberId]: 'admin', [second.memberId]: 'owner' });
      // Now the other one is the last Owner.
      expect(await expectStatus(await change(second.memberId, { roleId: freshAdmin }, second), 409)).toMatchObject({
        code: 'OWNERSHIP_CONSTRAINT',
      });
    });

    it('answers 404 for a role of another organization, and for a member of another organization; nothing changes', async () => {
      const member = await newMember(t, org, 'member');
      const theirViewer = (await roleBySlug(t, other.owner, 'viewer')).id;
      const theirCustom = (await createRole(t, other.owner, { name: 'Their Custom', permissions: [] })).id;
      const beforeHere = await storedMemberRoles(t, org.id);
      const beforeThere = await storedMemberRoles(t, other.id);

      for (const roleId of [theirViewer, theirCustom, crypto.randomUUID()]) {
        expect(await expectStatus(await change(member.memberId, { roleId }), 404)).toMatchObject({ code: 'NOT_FOUND' });
      }
      for (const memberId of [other.ownerMemberId, crypto.randomUUID()]) {
        expect(await expectStatus(await change(memberId, { roleId: roles.viewer }), 404)).toMatchObject({
          code: 'NOT_FOUND',
        });
        expect(await expectStatus(await change(memberId, { roleId: theirViewer }), 404)).toMatchObject({
          code: 'NOT_FOUND',
        });
        expect(await expectStatus(await changeDeprecated(memberId, { roleId: roles.viewer }), 404)).toMatchObject({
          code: 'NOT_FOUND',
        });
      }
      expect(await storedMemberRoles(t, org.id)).toEqual(beforeHere);
      expect(await storedMemberRoles(t, other.id)).toEqual(beforeThere);
      expect((await roleSlugsByMember(t, other.owner))[other.ownerMemberId]).toBe('owner');
    });

    describe('no escalation by assignment', () => {
      it('an Admin cannot make anyone Owner (403 INSUFFICIENT_PERMISSIONS), not even themself', async () => {
        const member = await newMember(t, org, 'member');
        for (const memberId of [member.memberId, admin.memberId]) {
          const body = await expectStatus(await change(memberId, { roleId: roles.owner }, admin), 403);
          expect(body.code).toBe('INSUFFICIENT_PERMISSIONS');
          expect(JSON.stringify(body.details)).toContain('organizations:delete');
        }
        const slugs = await roleSlugsByMember(t, org.owner);
        expect(slugs[member.memberId]).toBe('member');
        expect(slugs[admin.memberId]).toBe('admin');
      });

      it('an Admin cannot assign a custom role that holds organizations:delete', async () => {
        const powerful = await createRole(t, org.owner, {
          name: 'Demolisher',
          permissions: ['organizations:delete', 'members:read'],
        });
        const member = await newMember(t, org, 'member');
        const body = await expectStatus(await change(member.memberId, { roleId: powerful.id }, admin), 403);
        expect(body.code).toBe('INSUFFICIENT_PERMISSIONS');
        expect(JSON.stringify(body.details)).toContain('organizations:delete');
        expect((await roleSlugsByMember(t, org.owner))[member.memberId]).toBe('member');
        // The Owner holds it, so the Owner may.
        expect(await expectStatus(await change(member.memberId, { roleId: powerful.id }), 200)).toMatchObject({
          roleId: powerful.id,
        });
        // And the Admin cannot take it away again either (that role holds what the Admin lacks).
        expect(await expectStatus(await change(member.memberId, { roleId: roles.viewer }, admin), 403)).toMatchObject({
          code: 'INSUFFICIENT_PERMISSIONS',
        });
      });

      it('an Admin cannot demote the Owner, even when a second Owner exists', async () => {
        const fresh = await createOrganization(t, await signedInUser(t));
        const freshAdmin = await newMember(t, fresh, 'admin');
        const second = await newMember(t, fresh, 'admin');
        const ownerRole = (await roleBySlug(t, fresh.owner, 'owner')).id;
        const adminRole = (await roleBySlug(t, fresh.owner, 'admin')).id;
        await expectStatus(await change(second.memberId, { roleId: ownerRole }, fresh.owner), 200);
        for (const target of [fresh.ownerMemberId, second.memberId]) {
          const body = await expectStatus(await change(target, { roleId: adminRole }, freshAdmin), 403);
          expect(body.code).toBe('INSUFFICIENT_PERMISSIONS');
        }
        expect(await roleSlugsByMember(t, fresh.owner)).toEqual({
          [fresh.ownerMemberId]: 'owner',
          [second.memberId]: 'owner',
          [freshAdmin.memberId]: 'admin',
        });
      });
    });

    it('refuses a Member (read-only) with 403 and a request without a session with 401', async () => {
      const member = await newMember(t, org, 'member');
      const victim = await newMember(t, org, 'viewer');
      expect(await expectStatus(await change(victim.memberId, { roleId: roles.member }, member), 403)).toMatchObject({
        code: 'INSUFFICIENT_PERMISSIONS',
        message: 'Insufficient permissions',
      });
      expect(await expectStatus(await change(member.memberId, { roleId: roles.admin }, member), 403)).toMatchObject({
        code: 'INSUFFICIENT_PERMISSIONS',
      });
      expect(
        await expectStatus(await changeDeprecated(victim.memberId, { roleId: roles.member }, member), 403),
      ).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS' });
      expect(
        await expectStatus(
          await call(t, `/api/admin/members/${victim.memberId}`, { method: 'PATCH', body: { roleId: roles.member } }),
          401,
        ),
      ).toMatchObject({ code: 'UNAUTHORIZED' });
      const slugs = await roleSlugsByMember(t, org.owner);
      expect([slugs[member.memberId], slugs[victim.memberId]]).toEqual(['member', 'viewer']);
    });

    it.each([
      ['an unknown body field beside a valid roleId', (viewer: string) => ({ roleId: viewer, role: 'owner' })],
      [
        'an unknown body field (organizationId)',
        (viewer: string) => ({ roleId: viewer, organizationId: crypto.randomUUID() }),
      ],
      ['a missing roleId', () => ({})],
      ['a roleId that is not a UUID', () => ({ roleId: 'owner' })],
      ['a v1 roleId', () => ({ roleId: 'c232ab00-9414-11ec-b3c8-9e6bdeced846' })],
    ])('answers 400 VALIDATION_ERROR for %s', async (_label, bodyFor) => {
      for (const send of [change, changeDeprecated]) {
        expect(await expectStatus(await send(admin.memberId, bodyFor(roles.viewer!)), 400)).toMatchObject({
          code: 'VALIDATION_ERROR',
        });
      }
      expect((await roleSlugsByMember(t, org.owner))[admin.memberId]).toBe('admin');
    });

    it('answers 400 for a member id that is not a UUID v4', async () => {
      for (const id of ['abc', 'c232ab00-9414-11ec-b3c8-9e6bdeced846']) {
        expect(await expectStatus(await change(id, { roleId: roles.viewer }), 400)).toMatchObject({
          code: 'VALIDATION_ERROR',
        });
        expect(await expectStatus(await changeDeprecated(id, { roleId: roles.viewer }), 400)).toMatchObject({
          code: 'VALIDATION_ERROR',
        });
      }
    });
  });

  describe('PATCH /api/roles/members/:id/role (deprecated)', () => {
    it('does the same change and names its successor in Deprecation and Link headers', async () => {
      const member = await newMember(t, org, 'member');
      const res = await changeDeprecated(member.memberId, { roleId: roles.viewer });
      expect(await expectStatus(res, 200)).toEqual({
        memberId: member.memberId,
        roleId: roles.viewer,
        previousRoleId: roles.member,
      });
      expect(res.headers.get('deprecation')).toBe('true');
      expect(res.headers.get('link')).toBe(`</api/admin/members/${member.memberId}>; rel="successor-version"`);
      expect((await roleSlugsByMember(t, org.owner))[member.memberId]).toBe('viewer');
      const entries = (await auditRows(t, org.id, 'member.role_changed')).filter(
        (e) => e.metadata.memberId === member.memberId,
      );
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        actor_id: org.owner.id,
        metadata: { roleId: roles.viewer, previousRoleId: roles.member },
      });
    });

    it('applies the same escalation rule as its successor', async () => {
      const member = await newMember(t, org, 'member');
      expect(
        await expectStatus(await changeDeprecated(member.memberId, { roleId: roles.owner }, admin), 403),
      ).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS' });
      expect((await roleSlugsByMember(t, org.owner))[member.memberId]).toBe('member');
    });
  });
});
