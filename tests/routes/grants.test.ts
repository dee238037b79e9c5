import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import {
  createOrganization,
  createRole,
  newMember,
  roleBySlug,
  roleSlugsByMember,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * Nobody grants what they do not hold, superadmins excepted (docs/api.md
 * "Permissions and roles"): the one rule behind roles, role assignments and key scopes.
 */
describe('granting permissions', () => {
  let t: TestApp;
  let org: TestOrganization;
  let superadmin: TestMember;
  let member: TestMember;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    // A Member (read-only) of the organization whose platform role is superadmin.
    superadmin = await newMember(t, org, 'member');
    await t.database.withOwner((owner) =>
      owner.updateTable('users').set({ role: 'superadmin' }).where('id', '=', superadmin.id).execute(),
    );
    member = await newMember(t, org, 'member');
  });
  afterAll(() => t.close());

  it('a superadmin creates and edits a role holding permissions it does not hold', async () => {
    const created = await expectStatus<{ id: string; permissions: string[] }>(
      await call(t, '/api/roles', {
        method: 'POST',
        body: { name: 'Demolition crew', permissions: ['organizations:delete'] },
        jar: superadmin.jar,
      }),
      201,
    );
    expect(created.permissions).toEqual(['organizations:delete']);
    const edited = await call(t, `/api/roles/${created.id}`, {
      method: 'PATCH',
      body: { permissions: ['organizations:delete', 'users:delete'] },
      jar: superadmin.jar,
    });
    expect(await expectStatus(edited, 200)).toMatchObject({ permissions: ['organizations:delete', 'users:delete'] });
  });

  it('a superadmin assigns a role holding permissions it does not hold, and takes it away', async () => {
    const powerful = await createRole(t, org.owner, { name: 'Deleters', permissions: ['users:delete'] });
    const viewer = await roleBySlug(t, org.owner, 'viewer');
    for (const roleId of [powerful.id, viewer.id]) {
      const res = await call(t, `/api/admin/members/${member.memberId}`, {
        method: 'PATCH',
        body: { roleId },
        jar: superadmin.jar,
      });
      expect(await expectStatus(res, 200)).toMatchObject({ roleId });
    }
    expect((await roleSlugsByMember(t, org.owner))[member.memberId]).toBe('viewer');
  });

  it("a key's scopes stay within its creator's own permissions, a superadmin's too", async () => {
    const res = await call(t, '/api/api-keys', {
      method: 'POST',
      body: { name: 'Too strong', scopes: ['members:read', 'roles:write', 'members:write'] },
      jar: superadmin.jar,
    });
    expect(await expectStatus(res, 403)).toEqual({
      code: 'INSUFFICIENT_PERMISSIONS',
      message: 'Insufficient permissions',
      details: [
        { path: 'scopes', message: 'caller lacks members:write' },
        { path: 'scopes', message: 'caller lacks roles:write' },
      ],
    });
    await expectStatus(
      await call(t, '/api/api-keys', {
        method: 'POST',
        body: { name: 'Read only', scopes: ['members:read'] },
        jar: superadmin.jar,
      }),
      201,
    );
  });
});
