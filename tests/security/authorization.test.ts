/**
 * Authorization matrix, over HTTP.
 * The protected routes come from the OpenAPI document (their declared
 * access: session, platform roles, permissions), the service's and the auth
 * library's alike; each service route and each permission-checked library
 * route needs a request builder below, so a new route fails this suite until
 * it is covered (the library's other rows are built from their schemas).
 *
 * For every protected route: no session 401; a member of the organization
 * holding every permission except one the route needs 403; a platform role
 * below the route's 403; a member (Owner, even) of another organization using
 * this organization's ids 404 (409 TARGET_NOT_ADMIN for an ownership
 * transfer, docs/design.md "Decisions"); and the database unchanged after each
 * refusal. The organization plugin's routes guarded by our permission
 * strings get the same treatment. Mass assignment: the fields a client must
 * never set are refused by the strict schemas, or (library sign-up) ignored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus, type RequestOptions } from '../support/http.js';
import {
  ALL_PERMISSIONS,
  createOrganization,
  createRole,
  invitationIdFromMail,
  invite,
  newMember,
  type RoleRecord,
  roleBySlug,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { PASSWORD, type SignedInUser, signedInUser, uniqueEmail } from '../support/users.js';
import { concrete, exampleOf, LIBRARY_KEYS, type Operation, type Walk, walkRoutes } from './routes.js';
import { contractProblems, fingerprint, writesBetween } from './support.js';

interface Fixture {
  org: TestOrganization;
  customRole: RoleRecord;
  viewerRole: RoleRecord;
  admin: TestMember;
  member: TestMember;
  keyId: string;
  invitationId: string;
  webhookId: string;
}

interface Built {
  path: string;
  body?: unknown;
}

/**
 * A valid request per protected route, naming `a`'s ids (what a caller of
 * another organization would try). Keyed by the OpenAPI operation.
 */
const BUILDERS: Record<string, (a: Fixture, caller: { id: string; email: string }) => Built> = {
  'GET /api/roles': () => ({ path: '/api/roles' }),
  'POST /api/roles': () => ({
    path: '/api/roles',
    body: { name: `Matrix ${crypto.randomUUID().slice(0, 6)}`, permissions: ['roles:read'] },
  }),
  'PATCH /api/roles/{id}': (a) => ({
    path: `/api/roles/${a.customRole.id}`,
    body: { description: 'changed by the matrix' },
  }),
  'DELETE /api/roles/{id}': (a) => ({ path: `/api/roles/${a.customRole.id}` }),
  'GET /api/members': () => ({ path: '/api/members' }),
  'PATCH /api/admin/members/{memberId}': (a) => ({
    path: `/api/admin/members/${a.member.memberId}`,
    body: { roleId: a.viewerRole.id },
  }),
  'PATCH /api/roles/members/{id}/role': (a) => ({
    path: `/api/roles/members/${a.member.memberId}/role`,
    body: { roleId: a.viewerRole.id },
  }),
  'POST /api/roles/transfer-ownership': (a) => ({
    path: '/api/roles/transfer-ownership',
    body: { targetMemberId: a.admin.memberId },
  }),
  'POST /api/api-keys': () => ({ path: '/api/api-keys', body: { name: 'matrix key', scopes: ['roles:read'] } }),
  'GET /api/api-keys': () => ({ path: '/api/api-keys' }),
  'DELETE /api/api-keys/{id}': (a) => ({ path: `/api/api-keys/${a.keyId}` }),
  'GET /api/audit-logs': () => ({ path: '/api/audit-logs' }),
  'GET /api/organization/security': () => ({ path: '/api/organization/security' }),
  // Writing it off is what any session may do (turning it on needs a multi-factor one).
  'PATCH /api/organization/security': () => ({ path: '/api/organization/security', body: { requireMfa: false } }),
  'POST /api/webhooks': () => ({
    path: '/api/webhooks',
    body: { url: 'https://93.184.215.14/matrix', events: ['role.created'] },
  }),
  'GET /api/webhooks': () => ({ path: '/api/webhooks' }),
  'PATCH /api/webhooks/{id}': (a) => ({ path: `/api/webhooks/${a.webhookId}`, body: { description: 'matrix' } }),
  'DELETE /api/webhooks/{id}': (a) => ({ path: `/api/webhooks/${a.webhookId}` }),
  'POST /api/webhooks/{id}/rotate-secret': (a) => ({ path: `/api/webhooks/${a.webhookId}/rotate-secret` }),
  'POST /api/webhooks/{id}/test': (a) => ({ path: `/api/webhooks/${a.webhookId}/test` }),
  'GET /api/webhooks/{id}/deliveries': (a) => ({ path: `/api/webhooks/${a.webhookId}/deliveries` }),
  // The fixture holds no SSO connection or domain: random ids (the SSO suites name another organization's).
  'GET /api/sso/connections': () => ({ path: '/api/sso/connections' }),
  'POST /api/sso/connections': () => ({
    path: '/api/sso/connections',
    body: {
      type: 'saml',
      name: 'Matrix',
      entryPoint: 'https://idp.example.com/sso',
      idpEntityId: 'https://idp.example.com',
      idpCertificate: 'not checked: refused before',
    },
  }),
  'PATCH /api/sso/connections/{id}': () => ({
    path: `/api/sso/connections/${crypto.randomUUID()}`,
    body: { name: 'matrix' },
  }),
  'DELETE /api/sso/connections/{id}': () => ({ path: `/api/sso/connections/${crypto.randomUUID()}` }),
  'GET /api/scim/tokens': () => ({ path: '/api/scim/tokens' }),
  'POST /api/scim/tokens': () => ({ path: '/api/scim/tokens', body: { name: 'matrix' } }),
  'DELETE /api/scim/tokens/{id}': () => ({ path: `/api/scim/tokens/${crypto.randomUUID()}` }),
  'GET /api/scim/group-roles': () => ({ path: '/api/scim/group-roles' }),
  // The fixture holds no SCIM group: a random id (tests/scim/group-roles.pg.test.ts names another organization's).
  'PUT /api/scim/group-roles': (a) => ({
    path: '/api/scim/group-roles',
    body: [{ groupId: crypto.randomUUID(), roleId: a.viewerRole.id }],
  }),
  'GET /api/sso/domains': () => ({ path: '/api/sso/domains' }),
  'POST /api/sso/domains': () => ({ path: '/api/sso/domains', body: { domain: 'matrix.example.com' } }),
  'POST /api/sso/domains/{id}/verify': () => ({ path: `/api/sso/domains/${crypto.randomUUID()}/verify` }),
  'DELETE /api/sso/domains/{id}': () => ({ path: `/api/sso/domains/${crypto.randomUUID()}` }),
  'GET /api/admin/users': () => ({ path: '/api/admin/users' }),
  'PATCH /api/admin/users/{id}/role': (a) => ({
    path: `/api/admin/users/${a.member.id}/role`,
    body: { role: 'admin' },
  }),
  'GET /api/users/me': () => ({ path: '/api/users/me' }),
  'POST /api/users/me/deletion': () => ({ path: '/api/users/me/deletion' }),
  'POST /api/users/me/reactivate': () => ({ path: '/api/users/me/reactivate' }),
  'GET /api/users/me/export': () => ({ path: '/api/users/me/export' }),
  'POST /api/users/me/purge': (_a, caller) => ({ path: '/api/users/me/purge', body: { confirmEmail: caller.email } }),
  'POST /api/session/step-up': () => ({ path: '/api/session/step-up', body: { password: 'not the password' } }),
};

/**
 * The organization plugin's routes our gate checks a permission on
 * (src/library/organization-gate.ts), with a valid request naming `a`'s ids.
 * Keyed by the OpenAPI operation.
 */
const LIBRARY_BUILDERS: Record<string, (a: Fixture) => Built> = {
  'POST /api/auth/organization/invite-member': (a) => ({
    path: '/api/auth/organization/invite-member',
    body: { email: uniqueEmail('matrix-invitee'), role: 'member', organizationId: a.org.id },
  }),
  'POST /api/auth/organization/cancel-invitation': (a) => ({
    path: '/api/auth/organization/cancel-invitation',
    body: { invitationId: a.invitationId },
  }),
  'POST /api/auth/organization/remove-member': (a) => ({
    path: '/api/auth/organization/remove-member',
    body: { memberIdOrEmail: a.member.memberId, organizationId: a.org.id },
  }),
  'POST /api/auth/organization/update': (a) => ({
    path: '/api/auth/organization/update',
    body: { organizationId: a.org.id, data: { name: 'Renamed by the matrix' } },
  }),
  'POST /api/auth/organization/delete': (a) => ({
    path: '/api/auth/organization/delete',
    body: { organizationId: a.org.id },
  }),
  'GET /api/auth/organization/get-organization': (a) => ({
    path: `/api/auth/organization/get-organization?organizationId=${a.org.id}`,
  }),
  'GET /api/auth/organization/get-full-organization': (a) => ({
    path: `/api/auth/organization/get-full-organization?organizationId=${a.org.id}`,
  }),
  'GET /api/auth/organization/list-members': (a) => ({
    path: `/api/auth/organization/list-members?organizationId=${a.org.id}`,
  }),
  'GET /api/auth/organization/list-invitations': (a) => ({
    path: `/api/auth/organization/list-invitations?organizationId=${a.org.id}`,
  }),
};

function methodOf(key: string): string {
  return key.split(' ')[0]!;
}

describe('authorization matrix', () => {
  let t: TestApp;
  let walk: Walk;
  let a: Fixture;
  /** Owner of another organization (active there): holds every permission, but not in `a`. */
  let outsider: SignedInUser;
  let outsiderOrg: TestOrganization;
  let outsiderRole: RoleRecord;
  let outsiderMember: TestMember;
  /** Members of `a` holding every permission except the one named. */
  const lacking = new Map<string, TestMember>();
  /** Signed in, member of nothing. */
  let loner: SignedInUser;
  let platformAdmin: SignedInUser;
  let superadmin: SignedInUser;

  beforeAll(async () => {
    t = await createTestApp();
    const owner = await signedInUser(t);
    const org = await createOrganization(t, owner);
    const admin = await newMember(t, org, 'admin');
    const member = await newMember(t, org, 'member');
    const customRole = await createRole(t, owner, { name: 'Matrix custom', permissions: ['roles:read'] });
    const viewerRole = await roleBySlug(t, owner, 'viewer');
    const key = await expectStatus<{ id: string }>(
      await call(t, '/api/api-keys', { body: { name: 'fixture key', scopes: ['roles:read'] }, jar: owner.jar }),
      201,
    );
    const pending = uniqueEmail('pending');
    await expectStatus(await invite(t, owner, { email: pending, role: 'member', organizationId: org.id }), 200);
    const webhook = await expectStatus<{ id: string }>(
      await call(t, '/api/webhooks', {
        body: { url: 'https://93.184.215.14/fixture', events: ['*'] },
        jar: owner.jar,
      }),
      201,
    );
    a = {
      org,
      customRole,
      viewerRole,
      admin,
      member,
      keyId: key.id,
      invitationId: invitationIdFromMail(t, pending),
      webhookId: webhook.id,
    };

    walk = await walkRoutes(t, owner.jar);
    const needed = new Set<string>(
      walk.operations.flatMap((op) => (typeof op.access === 'object' ? (op.access.permissions ?? []) : [])),
    );
    for (const permission of needed) {
      const slug = `without-${permission.replace(/[:_]/g, '-')}`;
      await createRole(t, owner, {
        name: `Without ${permission.replace(/[:_]/g, ' ')}`,
        permissions: ALL_PERMISSIONS.filter((p) => p !== permission),
      });
      expect((await roleBySlug(t, owner, slug)).permissions).not.toContain(permission);
      lacking.set(permission, await newMember(t, org, slug));
    }

    outsider = await signedInUser(t);
    outsiderOrg = await createOrganization(t, outsider);
    outsiderRole = await createRole(t, outsider, { name: 'Outsider role', permissions: ['roles:read'] });
    outsiderMember = await newMember(t, outsiderOrg, 'member');
    loner = await signedInUser(t);
    platformAdmin = await signedInUser(t);
    await t.database.withOwner((db) =>
      db.updateTable('users').set({ role: 'admin' }).where('id', '=', platformAdmin.id).execute(),
    );
    superadmin = await signedInUser(t);
    await t.database.withOwner((db) =>
      db.updateTable('users').set({ role: 'superadmin' }).where('id', '=', superadmin.id).execute(),
    );
  }, 600_000);
  afterAll(() => t?.close());

  const protectedOps = () => walk.operations.filter((op) => typeof op.access === 'object');
  const permissionOps = () =>
    protectedOps().filter((op) => typeof op.access === 'object' && (op.access.permissions?.length ?? 0) > 0);
  const platformOps = () => protectedOps().filter((op) => typeof op.access === 'object' && op.access.platformRoles);

  /** The request for an operation: its builder, or for a library row without one a body from its schema. */
  function builderOf(op: Operation): (a: Fixture, caller: { id: string; email: string }) => Built {
    const own = BUILDERS[op.key] ?? LIBRARY_BUILDERS[op.key];
    if (own) return own;
    if (!op.library) throw new Error(`${op.key}: no request builder`);
    return () => ({ path: concrete(op), ...(op.body ? { body: exampleOf(walk, op.body) } : {}) });
  }

  function request(key: string, built: Built, jar?: CookieJar): Promise<Response> {
    const options: RequestOptions = { method: methodOf(key), jar };
    if (built.body !== undefined) options.body = built.body;
    return call(t, built.path, options);
  }

  /** Sends, expects `status` and `code` in the contract's shape, and the database unchanged. */
  async function expectRefused(
    label: string,
    send: () => Promise<Response>,
    status: number,
    code: string,
  ): Promise<string[]> {
    const before = await fingerprint(t);
    const res = await send();
    const text = await res.text();
    const problems = contractProblems(res.status, res.headers.get('content-type') ?? '', text, (s) => s === status).map(
      (p) => `${label}: ${p}`,
    );
    if (!text.includes(`"code":"${code}"`))
      problems.push(`${label}: expected ${status} ${code}, got ${res.status} ${text.slice(0, 200)}`);
    const writes = writesBetween(before, await fingerprint(t));
    if (writes) problems.push(`${label}: ${writes}`);
    return problems;
  }

  it('every protected route has a request builder (the walk covers them all)', () => {
    const service = protectedOps().filter((op) => !op.library);
    expect(service.length).toBeGreaterThanOrEqual(15);
    expect(service.map((op) => op.key).filter((key) => !BUILDERS[key])).toEqual([]);
    // A library route checked against a permission acts on a named organization: it needs `a`'s ids.
    const library = permissionOps().filter((op) => op.library);
    expect(library.length).toBeGreaterThanOrEqual(9);
    expect(library.map((op) => op.key).filter((key) => !LIBRARY_BUILDERS[key])).toEqual([]);
    // Both doors are walked: every library row is in the document, the protected ones among the protected.
    expect(protectedOps().filter((op) => op.library).length).toBe(
      LIBRARY_ROUTES.filter((route) => route.access.kind === 'session').length,
    );
    // The open ones are open on purpose: the service's four, and the library's public and optional-auth rows.
    const open = walk.operations.filter((op) => typeof op.access !== 'object');
    expect(
      open
        .filter((op) => !op.library)
        .map((op) => op.key)
        .sort(),
    ).toEqual(
      [
        'GET /api/auth/providers',
        'GET /api/health',
        'GET /api/session',
        'POST /api/cron/purge-accounts',
        'GET /api/sso/connections/{id}/saml-metadata',
      ].sort(),
    );
    const libraryOpen = LIBRARY_ROUTES.filter((route) => route.access.kind !== 'session').map(
      (route) => `${route.method} /api/auth${route.path.replace(/:(\w+)/g, '{$1}')}`,
    );
    expect(
      open
        .filter((op) => op.library)
        .map((op) => op.key)
        .sort(),
    ).toEqual(libraryOpen.sort());
    expect([...LIBRARY_KEYS].length).toBe(LIBRARY_ROUTES.length);
  });

  it('no session: 401 UNAUTHORIZED on every protected route of both doors (and the cron route without its secret), nothing written', async () => {
    const problems: string[] = [];
    expect(protectedOps().filter((op) => op.library).length).toBeGreaterThanOrEqual(30);
    for (const op of protectedOps())
      problems.push(
        ...(await expectRefused(
          `${op.key} signed out`,
          () => request(op.key, builderOf(op)(a, { id: '', email: 'x@example.test' })),
          401,
          'UNAUTHORIZED',
        )),
      );
    for (const op of walk.operations.filter((candidate) => candidate.hasOwnCredentials)) {
      problems.push(
        ...(await expectRefused(
          `${op.key} without credentials`,
          () => call(t, concrete(op), { method: op.method }),
          401,
          'UNAUTHORIZED',
        )),
      );
      problems.push(
        ...(await expectRefused(
          `${op.key} with a wrong secret`,
          () =>
            call(t, concrete(op), { method: op.method, headers: { authorization: 'Bearer not-the-secret-at-all' } }),
          401,
          'UNAUTHORIZED',
        )),
      );
    }
    // A forged or foreign cookie is no session either.
    const forged = new CookieJar();
    forged.store(new Response(null, { headers: [['set-cookie', 'gatehouse.session_token=forged.value; Path=/']] }));
    for (const op of protectedOps())
      problems.push(
        ...(await expectRefused(
          `${op.key} forged cookie`,
          () => request(op.key, builderOf(op)(a, { id: '', email: 'x@example.test' }), forged),
          401,
          'UNAUTHORIZED',
        )),
      );
    expect(problems).toEqual([]);
  });

  it('a member holding every permission but one the route needs: 403 INSUFFICIENT_PERMISSIONS, nothing written', async () => {
    const problems: string[] = [];
    let checked = 0;
    for (const op of permissionOps()) {
      const required = (op.access as { permissions: string[] }).permissions;
      for (const permission of required) {
        const member = lacking.get(permission)!;
        problems.push(
          ...(await expectRefused(
            `${op.key} without ${permission}`,
            () => request(op.key, builderOf(op)(a, member), member.jar),
            403,
            'INSUFFICIENT_PERMISSIONS',
          )),
        );
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(21);
    expect(problems).toEqual([]);
  });

  it('signed in without an active organization: 403 NO_ACTIVE_ORGANIZATION on every permission route, nothing written', async () => {
    const problems: string[] = [];
    // The library's name the organization they act on (a non-member is refused there, below).
    for (const op of permissionOps().filter((candidate) => !candidate.library))
      problems.push(
        ...(await expectRefused(
          `${op.key} with no organization`,
          () => request(op.key, builderOf(op)(a, loner), loner.jar),
          403,
          'NO_ACTIVE_ORGANIZATION',
        )),
      );
    expect(problems).toEqual([]);
  });

  it('a platform role below the route: 403 FORBIDDEN (an Owner of an organization is no platform admin), nothing written', async () => {
    const problems: string[] = [];
    for (const op of platformOps()) {
      const roles = (op.access as { platformRoles: string[] }).platformRoles;
      problems.push(
        ...(await expectRefused(
          `${op.key} as a plain user (an Owner)`,
          () => request(op.key, builderOf(op)(a, a.org.owner), a.org.owner.jar),
          403,
          'FORBIDDEN',
        )),
      );
      if (!roles.includes('admin'))
        problems.push(
          ...(await expectRefused(
            `${op.key} as a platform admin`,
            () => request(op.key, builderOf(op)(a, platformAdmin), platformAdmin.jar),
            403,
            'FORBIDDEN',
          )),
        );
    }
    expect(platformOps().length).toBeGreaterThanOrEqual(2);
    expect(problems).toEqual([]);
  });

  it("the Owner of another organization using this organization's ids: 404 NOT_FOUND (409 TARGET_NOT_ADMIN for a transfer), nothing written", async () => {
    const problems: string[] = [];
    const idRoutes = permissionOps().filter(
      (op) => op.pathParams.length > 0 || op.key === 'POST /api/roles/transfer-ownership',
    );
    for (const op of idRoutes) {
      const expected: [number, string] =
        op.key === 'POST /api/roles/transfer-ownership' ? [409, 'TARGET_NOT_ADMIN'] : [404, 'NOT_FOUND'];
      problems.push(
        ...(await expectRefused(
          `${op.key} across tenants`,
          () => request(op.key, builderOf(op)(a, outsider), outsider.jar),
          ...expected,
        )),
      );
    }
    // Own member, the other organization's role: the role is not found.
    for (const path of [
      `/api/admin/members/${outsiderMember.memberId}`,
      `/api/roles/members/${outsiderMember.memberId}/role`,
    ]) {
      problems.push(
        ...(await expectRefused(
          `PATCH ${path} with a foreign role`,
          () => call(t, path, { method: 'PATCH', body: { roleId: a.customRole.id }, jar: outsider.jar }),
          404,
          'NOT_FOUND',
        )),
      );
    }
    // And the reverse: a member of `a` naming the outsider's role and member.
    problems.push(
      ...(await expectRefused(
        'PATCH a foreign role from inside',
        () =>
          call(t, `/api/roles/${outsiderRole.id}`, {
            method: 'PATCH',
            body: { description: 'x' },
            jar: a.org.owner.jar,
          }),
        404,
        'NOT_FOUND',
      )),
    );
    problems.push(
      ...(await expectRefused(
        'DELETE a foreign role from inside',
        () => call(t, `/api/roles/${outsiderRole.id}`, { method: 'DELETE', jar: a.org.owner.jar }),
        404,
        'NOT_FOUND',
      )),
    );
    expect(idRoutes.length).toBeGreaterThanOrEqual(6);
    expect(problems).toEqual([]);
  });

  it("the other organization's lists never carry this organization's ids", async () => {
    const mine = [
      a.org.id,
      a.customRole.id,
      a.viewerRole.id,
      a.admin.memberId,
      a.member.memberId,
      a.keyId,
      a.org.owner.id,
      a.org.ownerMemberId,
    ];
    for (const path of [
      '/api/roles',
      '/api/members',
      '/api/api-keys',
      '/api/audit-logs',
      '/api/session',
      '/api/users/me/export',
    ]) {
      const res = await call(t, path, { jar: outsider.jar });
      expect(res.status, path).toBe(200);
      const text = await res.text();
      for (const id of mine) expect(text, `${path} carries ${id}`).not.toContain(id);
    }
  });

  it("the organization plugin's guarded routes: 403 without the permission, 4xx across tenants, nothing written", async () => {
    const problems: string[] = [];
    const guarded = permissionOps().filter((op) => op.library);
    expect(guarded.map((op) => op.key)).toEqual(
      expect.arrayContaining(['POST /api/auth/organization/invite-member', 'GET /api/auth/organization/list-members']),
    );
    for (const op of guarded) {
      const built = LIBRARY_BUILDERS[op.key]!(a);
      for (const permission of (op.access as { permissions: string[] }).permissions) {
        const member = lacking.get(permission)!;
        problems.push(
          ...(await expectRefused(
            `${op.key} without ${permission}`,
            () => request(op.key, built, member.jar),
            403,
            'INSUFFICIENT_PERMISSIONS',
          )),
        );
      }
      problems.push(
        ...(await expectRefused(`${op.key} signed out`, () => request(op.key, built), 401, 'UNAUTHORIZED')),
      );
      problems.push(
        ...(await expectRefused(
          `${op.key} across tenants`,
          () => request(op.key, built, outsider.jar),
          403,
          'INSUFFICIENT_PERMISSIONS',
        )),
      );
    }
    // Joining or reading another organization by naming it.
    problems.push(
      ...(await expectRefused(
        'set-active across tenants',
        () => call(t, '/api/auth/organization/set-active', { body: { organizationId: a.org.id }, jar: outsider.jar }),
        403,
        'USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION',
      )),
    );
    expect(problems).toEqual([]);
    const full = await call(t, `/api/auth/organization/get-full-organization?organizationId=${a.org.id}`, {
      jar: outsider.jar,
    });
    expect(full.status).toBeGreaterThanOrEqual(400);
    expect(await full.text()).not.toContain(a.member.memberId);
  });

  describe('mass assignment', () => {
    const FORBIDDEN_FIELDS: Record<string, unknown> = {
      tenantId: crypto.randomUUID(),
      organizationId: crypto.randomUUID(),
      isDefault: true,
      keyHash: 'f'.repeat(64),
      createdBy: crypto.randomUUID(),
      tenant_id: crypto.randomUUID(),
      is_default: true,
      key_hash: 'f'.repeat(64),
      created_by: crypto.randomUUID(),
      id: crypto.randomUUID(),
      slug: 'owner',
      userId: crypto.randomUUID(),
    };

    it('every service body refuses tenantId, organizationId, isDefault, keyHash, createdBy (and their kin) with 400, nothing written', async () => {
      const problems: string[] = [];
      const bodyOps = protectedOps().filter((op) => op.body && !op.library);
      expect(bodyOps.map((op) => op.key)).toEqual(
        expect.arrayContaining(['POST /api/roles', 'PATCH /api/roles/{id}', 'POST /api/api-keys']),
      );
      for (const op of bodyOps) {
        // Someone the guard lets through: the Owner, or a superadmin on platform routes.
        const caller = typeof op.access === 'object' && op.access.platformRoles ? superadmin : a.org.owner;
        const built = builderOf(op)(a, caller);
        for (const [field, value] of Object.entries(FORBIDDEN_FIELDS)) {
          const body = { ...(built.body as object), [field]: value };
          const label = `${op.key} with ${field}`;
          problems.push(
            ...(await expectRefused(
              label,
              () => request(op.key, { ...built, body }, caller.jar),
              400,
              'VALIDATION_ERROR',
            )),
          );
        }
      }
      expect(problems).toEqual([]);
    });

    it('the stored records show none of it took effect', async () => {
      const keys = await call(t, '/api/api-keys', { jar: a.org.owner.jar });
      const list = (await keys.json()) as Record<string, unknown>[];
      for (const key of list) {
        expect(key.createdBy).toBe(a.org.owner.id);
        expect(Object.keys(key)).not.toEqual(expect.arrayContaining(['keyHash']));
        for (const secret of ['keyHash', 'key_hash', 'keySalt', 'key_salt', 'lookupDigest', 'lookup_digest', 'key'])
          expect(key, `list carries ${secret}`).not.toHaveProperty(secret);
      }
      const roles = (await (await call(t, '/api/roles', { jar: a.org.owner.jar })).json()) as RoleRecord[];
      expect(
        roles
          .filter((role) => role.isDefault)
          .map((role) => role.slug)
          .sort(),
      ).toEqual(['admin', 'member', 'owner', 'viewer']);
    });

    it("the library's sign-up ignores role, emailVerified and deletedAt; update-user refuses them", async () => {
      const email = uniqueEmail('mass');
      const res = await call(t, '/api/auth/sign-up/email', {
        body: {
          email,
          password: PASSWORD,
          name: 'Mass',
          role: 'superadmin',
          emailVerified: true,
          deletedAt: null,
          id: crypto.randomUUID(),
          createdAt: '2000-01-01T00:00:00Z',
        },
      });
      expect(res.status).toBeLessThan(500);
      const user = await t.db
        .selectFrom('users')
        .select(['role', 'email_verified', 'deleted_at', 'created_at'])
        .where('email', '=', email)
        .executeTakeFirst();
      if (user) {
        expect(user.role).toBe('user');
        expect(user.email_verified).toBe(false);
        expect(user.deleted_at).toBeNull();
        expect(new Date(user.created_at).getFullYear()).toBeGreaterThan(2000);
      }
      for (const field of ['role', 'emailVerified', 'deletedAt']) {
        const value = field === 'role' ? 'superadmin' : field === 'emailVerified' ? true : new Date().toISOString();
        const before = await fingerprint(t);
        const update = await call(t, '/api/auth/update-user', { body: { [field]: value }, jar: loner.jar });
        expect(update.status, `update-user ${field}`).toBeGreaterThanOrEqual(400);
        expect(update.status).toBeLessThan(500);
        expect(await fingerprint(t), `update-user ${field} wrote`).toEqual(before);
      }
    });

    it("the library's organization create never makes someone else the Owner", async () => {
      const slug = `mass-${crypto.randomUUID().slice(0, 8)}`;
      const res = await call(t, '/api/auth/organization/create', {
        body: { name: 'Mass org', slug, userId: a.org.owner.id, isDefault: true, createdBy: a.org.owner.id },
        jar: loner.jar,
      });
      expect(res.status).toBeLessThan(500);
      const org = await t.db.selectFrom('organizations').select('id').where('slug', '=', slug).executeTakeFirst();
      if (org) {
        const members = await t.database.withOwner((db) =>
          db.selectFrom('members').select(['user_id', 'role']).where('organization_id', '=', org.id).execute(),
        );
        expect(members.map((m: { user_id: string }) => m.user_id)).toEqual([loner.id]);
      }
    });

    it('an invitation never grants Owner, and a member never promotes itself', async () => {
      const before = await fingerprint(t);
      const owner = await roleBySlug(t, a.org.owner, 'owner');
      const tries = [
        () => invite(t, a.org.owner, { email: uniqueEmail('to-owner'), role: 'owner', organizationId: a.org.id }),
        () =>
          call(t, `/api/admin/members/${a.admin.memberId}`, {
            method: 'PATCH',
            body: { roleId: owner.id },
            jar: a.admin.jar,
          }),
        () =>
          call(t, '/api/auth/organization/update-member-role', {
            body: { memberId: a.member.memberId, role: 'owner', organizationId: a.org.id },
            jar: a.org.owner.jar,
          }),
      ];
      for (const attempt of tries) {
        const res = await attempt();
        expect(res.status, await res.clone().text()).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
      }
      expect(await fingerprint(t)).toEqual(before);
    });
  });
});
