import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus } from '../support/http.js';
import {
  type Actor,
  ALL_PERMISSIONS,
  createOrganization,
  newMember,
  roleBySlug,
  storedMemberRoles,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/security.md "Sensitive actions and step-up": a member role change
 * that makes or unmakes an Owner hands over or takes away the organization,
 * as POST /api/roles/transfer-ownership does, so it needs what that route
 * needs: a fresh session, never an API key. Other role changes do not.
 */
describe('a role change that makes or unmakes an Owner is a sensitive action', () => {
  let t: TestApp;
  let org: TestOrganization;
  let admin: TestMember;
  let member: TestMember;
  let ownerRoleId: string;
  let viewerRoleId: string;
  let adminRoleId: string;
  let key: string;

  const change = (actor: Actor, memberId: string, roleId: string) =>
    call(t, `/api/admin/members/${memberId}`, { method: 'PATCH', body: { roleId }, jar: actor.jar });
  const keyed = (memberId: string, roleId: string) =>
    call(t, `/api/admin/members/${memberId}`, {
      method: 'PATCH',
      body: { roleId },
      headers: { authorization: `Bearer ${key}` },
    });
  /** Ages every session of the user past STEP_UP_MAX_AGE. */
  const makeStale = (userId: string) =>
    t.database.withOwner((owner) =>
      owner
        .updateTable('sessions')
        .set({ step_up_at: new Date(t.clock().getTime() - (t.config.stepUp.maxAgeSeconds + 1) * 1000) })
        .where('user_id', '=', userId)
        .execute(),
    );

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    org = await createOrganization(t, await signedInUser(t));
    admin = await newMember(t, org, 'admin');
    member = await newMember(t, org, 'member');
    ownerRoleId = (await roleBySlug(t, org.owner, 'owner')).id;
    adminRoleId = (await roleBySlug(t, org.owner, 'admin')).id;
    viewerRoleId = (await roleBySlug(t, org.owner, 'viewer')).id;
    const created = await call(t, '/api/api-keys', {
      // Every permission: only the sensitivity of the change can refuse it.
      body: { name: 'all permissions', scopes: ALL_PERMISSIONS },
      jar: org.owner.jar,
    });
    key = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(() => t?.close());

  it('a stale Owner session makes nobody an Owner (403 STEP_UP_REQUIRED, nothing changed); an API key neither (403 FORBIDDEN)', async () => {
    const before = await storedMemberRoles(t, org.id);
    await makeStale(org.owner.id);
    await expectError(await change(org.owner, admin.memberId, ownerRoleId), 403, 'STEP_UP_REQUIRED');
    await expectError(
      await call(t, `/api/roles/members/${member.memberId}/role`, {
        method: 'PATCH',
        body: { roleId: ownerRoleId },
        jar: org.owner.jar,
      }),
      403,
      'STEP_UP_REQUIRED',
    );
    await expectError(await keyed(admin.memberId, ownerRoleId), 403, 'FORBIDDEN');
    expect(await storedMemberRoles(t, org.id)).toEqual(before);

    // Changes that touch no Owner stay open to the stale session and the key.
    await expectStatus(await change(org.owner, member.memberId, viewerRoleId), 200);
    await expectStatus(await keyed(member.memberId, adminRoleId), 200);
  });

  it('a fresh session may make a second Owner; unmaking one needs a fresh session too', async () => {
    const fresh = await signedInUser(t);
    const second = await createOrganization(t, fresh);
    const helper = await newMember(t, second, 'admin');
    const owner = (await roleBySlug(t, fresh, 'owner')).id;
    const viewer = (await roleBySlug(t, fresh, 'viewer')).id;
    await expectStatus(await change(fresh, helper.memberId, owner), 200);
    await makeStale(fresh.id);
    await expectError(await change(fresh, helper.memberId, viewer), 403, 'STEP_UP_REQUIRED');
    expect((await storedMemberRoles(t, second.id))[helper.memberId]).toBe(owner);
  });
});
