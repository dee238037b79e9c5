import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { walkRoutes } from '../security/routes.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus } from '../support/http.js';
import { enableTotp } from '../support/mfa.js';
import { auditRows, createOrganization, newMember, type TestMember, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * README "Multi-factor authentication": GET/PATCH /api/organization/security, and
 * while `requireMfa` is on, 403 MFA_REQUIRED on every route that needs the
 * active organization for a session that is not multi-factor (after the
 * organization step, before permissions, superadmins too; API keys
 * unaffected; account routes, /api/session and enrollment open).
 */
describe('organization security policy', () => {
  let t: TestApp;
  let org: TestOrganization;
  let member: TestMember;
  let apiKey: string;
  const security = (jar: TestMember['jar'], body?: unknown) =>
    call(t, '/api/organization/security', body === undefined ? { jar } : { method: 'PATCH', body, jar });

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    const owner = await signedInUser(t);
    org = await createOrganization(t, owner);
    member = await newMember(t, org, 'admin');
    const created = await call(t, '/api/api-keys', {
      body: { name: 'ci', scopes: ['roles:read', 'organizations:read', 'organizations:write'] },
      jar: owner.jar,
    });
    apiKey = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(() => t?.close());

  it('is off by default; a session that is not multi-factor cannot turn it on, but may write it off (audited)', async () => {
    expect(await expectStatus(await security(org.owner.jar), 200)).toEqual({ requireMfa: false, requireSso: false });
    await expectError(await security(org.owner.jar, { requireMfa: true }), 403, 'MFA_REQUIRED');
    // Refused as a whole: the other policy given with it is not written either.
    await expectError(await security(org.owner.jar, { requireMfa: true, requireSso: true }), 403, 'MFA_REQUIRED');
    expect(await expectStatus(await security(org.owner.jar, { requireMfa: false }), 200)).toEqual({
      requireMfa: false,
      requireSso: false,
    });
    const entries = await auditRows(t, org.id, 'organization.security_updated');
    expect(entries.map((e) => e.metadata)).toEqual([{ requireMfa: false, previous: { requireMfa: false } }]);
    await expectError(await security(org.owner.jar, { requireMfa: 'yes' }), 400, 'VALIDATION_ERROR');
    await expectError(await security(org.owner.jar, { requireMfa: true, extra: 1 }), 400, 'VALIDATION_ERROR');
    await expectError(await security(org.owner.jar, {}), 400, 'VALIDATION_ERROR');
    // organizations:write is needed (a Viewer has only reads).
    const viewer = await newMember(t, org, 'viewer');
    expect(await expectStatus(await security(viewer.jar), 200)).toEqual({ requireMfa: false, requireSso: false });
    await expectError(await security(viewer.jar, { requireMfa: false }), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  it('a multi-factor session turns it on; the cached state of other members changes on their next request', async () => {
    // The member's state is read (and cached) before the change.
    expect((await call(t, '/api/roles', { jar: member.jar })).status).toBe(200);
    await enableTotp(t, org.owner.jar);
    const session = await expectStatus<{ session: { mfa: boolean; activeOrganizationId: string } }>(
      await call(t, '/api/session', { jar: org.owner.jar }),
      200,
    );
    expect(session.session).toMatchObject({ mfa: true, activeOrganizationId: org.id });
    expect(await expectStatus(await security(org.owner.jar, { requireMfa: true }), 200)).toEqual({
      requireMfa: true,
      requireSso: false,
    });
    const entries = await auditRows(t, org.id, 'organization.security_updated');
    expect(entries.at(-1)).toMatchObject({
      actor_id: org.owner.id,
      metadata: { requireMfa: true, previous: { requireMfa: false } },
    });
    await expectError(await call(t, '/api/roles', { jar: member.jar }), 403, 'MFA_REQUIRED');
    expect((await call(t, '/api/roles', { jar: org.owner.jar })).status).toBe(200);
  });

  it('every route that needs the active organization answers 403 MFA_REQUIRED to the member (walked from the OpenAPI document)', async () => {
    const { operations } = await walkRoutes(t);
    // The service's routes: the library's read their organization from a body that must be valid first.
    const tenantRoutes = operations.filter(
      (op) =>
        !op.library && typeof op.access === 'object' && (op.access.activeOrganization || op.access.permissions?.length),
    );
    expect(tenantRoutes.length).toBeGreaterThan(10);
    for (const op of tenantRoutes) {
      const path = op.path.replace(/\{\w+\}/g, crypto.randomUUID());
      const response = await call(t, path, {
        method: op.method,
        body: ['POST', 'PATCH', 'PUT'].includes(op.method) ? {} : undefined,
        jar: member.jar,
      });
      await expectError(response, 403, 'MFA_REQUIRED');
    }
    // The library's organization routes too.
    await expectError(
      await call(t, '/api/auth/organization/get-active-member', { jar: member.jar }),
      403,
      'MFA_REQUIRED',
    );
  });

  it('leaves account routes, /api/session and enrollment open; superadmins are held to it; API keys are not', async () => {
    expect((await call(t, '/api/users/me', { jar: member.jar })).status).toBe(200);
    expect(await expectStatus(await call(t, '/api/session', { jar: member.jar }), 200)).toMatchObject({
      session: { mfa: false, activeOrganizationId: org.id },
    });
    expect((await call(t, '/api/auth/organization/list', { jar: member.jar })).status).toBe(200);
    expect((await call(t, '/api/auth/passkey/list-user-passkeys', { jar: member.jar })).status).toBe(200);

    await t.database.withOwner((owner) =>
      owner.updateTable('users').set({ role: 'superadmin' }).where('id', '=', member.id).execute(),
    );
    await expectError(await call(t, '/api/roles', { jar: member.jar }), 403, 'MFA_REQUIRED');

    const withKey = await call(t, '/api/roles', { headers: { authorization: `Bearer ${apiKey}` } });
    expect(withKey.status).toBe(200);

    // Enrolling makes the member's new session multi-factor: through the policy.
    await enableTotp(t, member.jar);
    expect((await call(t, '/api/roles', { jar: member.jar })).status).toBe(200);
  });

  it('an API key turns the policy neither on nor off, and creates no webhook while it is on (403 FORBIDDEN)', async () => {
    const keyed = (path: string, method: string, body: unknown) =>
      call(t, path, { method, body, headers: { authorization: `Bearer ${apiKey}` } });
    const before = await expectStatus<{ requireMfa: boolean }>(
      await keyed('/api/organization/security', 'GET', undefined),
      200,
    );
    for (const requireMfa of [true, false]) {
      await expectError(await keyed('/api/organization/security', 'PATCH', { requireMfa }), 403, 'FORBIDDEN');
      expect(await expectStatus(await keyed('/api/organization/security', 'GET', undefined), 200)).toEqual(before);
    }
    expect(before.requireMfa).toBe(true);
    await expectError(
      await keyed('/api/webhooks', 'POST', { url: 'https://hooks.example.com/in', events: ['*'] }),
      403,
      'FORBIDDEN',
    );
  });

  it('turned off, sessions that are not multi-factor pass again', async () => {
    // Joining needs no second factor; working in the organization does.
    const late = await newMember(t, org, 'member');
    await expectError(await call(t, '/api/members', { jar: late.jar }), 403, 'MFA_REQUIRED');
    expect(await expectStatus(await security(org.owner.jar, { requireMfa: false }), 200)).toEqual({
      requireMfa: false,
      requireSso: false,
    });
    expect((await call(t, '/api/members', { jar: late.jar })).status).toBe(200);
  });
});
