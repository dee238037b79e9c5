import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { auditRows, createOrganization, invitationIdFromMail, invite, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * An audit entry names the request that caused it (docs/api.md "Audit actions"): the
 * request id travels with the request (src/shared/request-scope.ts), through
 * the service's routes and the auth library's alike, never passed by hand.
 */
describe('the request id of audit entries', () => {
  let t: TestApp;
  let org: TestOrganization;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
  });
  afterAll(() => t.close());

  const requestIdOf = async (tenantId: string, action: string) =>
    ((await auditRows(t, tenantId, action)).at(-1) as { request_id?: string | null } | undefined)?.request_id;

  it("is the service route's X-Request-Id", async () => {
    const res = await call(t, '/api/roles', {
      method: 'POST',
      body: { name: 'Traced', permissions: ['roles:read'] },
      jar: org.owner.jar,
      headers: { 'x-request-id': 'trace-role-create' },
    });
    await expectStatus(res, 201);
    expect(await requestIdOf(org.id, 'role.created')).toBe('trace-role-create');
  });

  it("is the library route's X-Request-Id", async () => {
    const user = await signedInUser(t);
    await expectStatus(await invite(t, org.owner, { email: user.email, organizationId: org.id }), 200);
    const res = await call(t, '/api/auth/organization/accept-invitation', {
      body: { invitationId: invitationIdFromMail(t, user.email) },
      jar: user.jar,
      headers: { 'x-request-id': 'trace-accept' },
    });
    await expectStatus(res, 200);
    expect(res.headers.get('x-request-id')).toBe('trace-accept');
    expect(await requestIdOf(org.id, 'member.added')).toBe('trace-accept');
  });
});
