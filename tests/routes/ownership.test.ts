import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import {
  type Actor,
  ADMIN_PERMISSIONS,
  ALL_PERMISSIONS,
  auditRows,
  createOrganization,
  createRole,
  newMember,
  roleSlugsByMember,
  sessionPermissions,
  storedMemberRoles,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/** docs/api.md "Members and ownership" (transfer): NOT_OWNER, TARGET_NOT_ADMIN, ownership.transferred. */
describe('POST /api/roles/transfer-ownership', () => {
  let t: TestApp;
  let org: TestOrganization;
  let admin: TestMember;
  let member: TestMember;
  let other: TestOrganization;
  let otherAdmin: TestMember;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t, { name: 'Olive Owner' }));
    admin = await newMember(t, org, 'admin');
    member = await newMember(t, org, 'member');
    other = await createOrganization(t, await signedInUser(t));
    otherAdmin = await newMember(t, other, 'admin');
  });
  afterAll(() => t.close());

  const transfer = (actor: Actor | null, body: unknown) =>
    call(t, '/api/roles/transfer-ownership', { body, ...(actor ? { jar: actor.jar } : {}) });

  /** Runs a refusal and proves it changed nothing: roles as stored, and no ownership.transferred entry. */
  async function refused(actor: Actor | null, body: unknown, status: number, code: string, organization = org) {
    const roles = await storedMemberRoles(t, organization.id);
    const entries = (await auditRows(t, organization.id, 'ownership.transferred')).length;
    const answer = await expectStatus(await transfer(actor, body), status);
    expect(answer.code).toBe(code);
    expect(await storedMemberRoles(t, organization.id)).toEqual(roles);
    expect(await auditRows(t, organization.id, 'ownership.transferred')).toHaveLength(entries);
  }

  it('refuses an Admin (members:write, not the Owner) with 403 NOT_OWNER', async () => {
    await refused(admin, { targetMemberId: admin.memberId }, 403, 'NOT_OWNER');
    await refused(admin, { targetMemberId: org.ownerMemberId }, 403, 'NOT_OWNER');
  });

  it('refuses a Member (no members:write) with 403 INSUFFICIENT_PERMISSIONS, and no session with 401', async () => {
    await refused(member, { targetMemberId: admin.memberId }, 403, 'INSUFFICIENT_PERMISSIONS');
    await refused(null, { targetMemberId: admin.memberId }, 401, 'UNAUTHORIZED');
  });

  it('refuses a target that is not an Admin (409 TARGET_NOT_ADMIN)', async () => {
    await refused(org.owner, { targetMemberId: member.memberId }, 409, 'TARGET_NOT_ADMIN');
    await refused(org.owner, { targetMemberId: org.ownerMemberId }, 409, 'TARGET_NOT_ADMIN');
    // A custom role holding everything an Admin holds is still not the Admin role.
    const lookalike = await createRole(t, org.owner, { name: 'Admin Lookalike', permissions: ADMIN_PERMISSIONS });
    const custom = await newMember(t, org, lookalike.slug);
    await refused(org.owner, { targetMemberId: custom.memberId }, 409, 'TARGET_NOT_ADMIN');
  });

  it('refuses a target in another organization, or unknown (409 TARGET_NOT_ADMIN), and leaves both organizations alone', async () => {
    const otherRoles = await storedMemberRoles(t, other.id);
    await refused(org.owner, { targetMemberId: otherAdmin.memberId }, 409, 'TARGET_NOT_ADMIN');
    await refused(org.owner, { targetMemberId: crypto.randomUUID() }, 409, 'TARGET_NOT_ADMIN');
    expect(await storedMemberRoles(t, other.id)).toEqual(otherRoles);
    expect(await auditRows(t, other.id, 'ownership.transferred')).toHaveLength(0);
  });

  it('answers 400 VALIDATION_ERROR for a malformed body', async () => {
    for (const body of [
      {},
      { targetMemberId: 'abc' },
      { targetMemberId: 'c232ab00-9414-11ec-b3c8-9e6bdeced846' },
      { targetMemberId: admin.memberId, force: true },
    ]) {
      await refused(org.owner, body, 400, 'VALIDATION_ERROR');
    }
  });

  it('swaps the Owner and the Admin, answers what moved, and records ownership.transferred', async () => {
    const fresh = await createOrganization(t, await signedInUser(t));
    const heir = await newMember(t, fresh, 'admin');
    const bystander = await newMember(t, fresh, 'member');

    const res = await transfer(fresh.owner, { targetMemberId: heir.memberId });
    expect(await expectStatus(res, 200)).toEqual({
      transferred: true,
      previousOwnerMemberId: fresh.ownerMemberId,
      newOwnerMemberId: heir.memberId,
    });

    expect(await roleSlugsByMember(t, heir)).toEqual({
      [fresh.ownerMemberId]: 'admin',
      [heir.memberId]: 'owner',
      [bystander.memberId]: 'member',
    });
    // Permissions follow on the very next request.
    expect(await sessionPermissions(t, heir)).toEqual(ALL_PERMISSIONS);
    expect(await sessionPermissions(t, fresh.owner)).toEqual(ADMIN_PERMISSIONS);

    const entries = await auditRows(t, fresh.id, 'ownership.transferred');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      tenant_id: fresh.id,
      actor_id: fresh.owner.id,
      metadata: { previousOwnerMemberId: fresh.ownerMemberId, newOwnerMemberId: heir.memberId },
    });

    // The former Owner is now an Admin: no second transfer from them, and the new Owner cannot be demoted by them.
    const back = await expectStatus(await transfer(fresh.owner, { targetMemberId: fresh.ownerMemberId }), 403);
    expect(back.code).toBe('NOT_OWNER');
    // The new Owner can hand it back.
    expect(await expectStatus(await transfer(heir, { targetMemberId: fresh.ownerMemberId }), 200)).toEqual({
      transferred: true,
      previousOwnerMemberId: heir.memberId,
      newOwnerMemberId: fresh.ownerMemberId,
    });
    expect(await roleSlugsByMember(t, heir)).toEqual({
      [fresh.ownerMemberId]: 'owner',
      [heir.memberId]: 'admin',
      [bystander.memberId]: 'member',
    });
    expect(await auditRows(t, fresh.id, 'ownership.transferred')).toHaveLength(2);
  });

  it('keeps the plugin in step: the new Owner is the one the last-Owner rule protects', async () => {
    const fresh = await createOrganization(t, await signedInUser(t));
    const heir = await newMember(t, fresh, 'admin');
    await expectStatus(await transfer(fresh.owner, { targetMemberId: heir.memberId }), 200);
    // The former Owner (now Admin) may leave; the new, only Owner may not.
    const stays = await call(t, '/api/auth/organization/leave', { body: { organizationId: fresh.id }, jar: heir.jar });
    expect(stays.status).toBeGreaterThanOrEqual(400);
    expect(stays.status).toBeLessThan(500);
    expect(await roleSlugsByMember(t, heir)).toEqual({ [fresh.ownerMemberId]: 'admin', [heir.memberId]: 'owner' });
    await expectStatus(
      await call(t, '/api/auth/organization/leave', { body: { organizationId: fresh.id }, jar: fresh.owner.jar }),
      200,
    );
    expect(await roleSlugsByMember(t, heir)).toEqual({ [heir.memberId]: 'owner' });
  });
});
