/**
 * docs/api.md "Access": the global guard's seven steps, in order, with the
 * contract's status, code and message (docs/api.md "Errors"); deny by
 * default as a walk over every route the app registers.
 */
import { z } from '@hono/zod-openapi';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { access, declaredAccess, guard, loadSession, type RouteAccess, tenantOf } from '../../src/middleware/guard.js';
import { createRouter, defineRoute } from '../../src/router.js';
import { ALL_PERMISSIONS, type Permission } from '../../src/shared/permissions.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call } from '../support/http.js';
import { asOwnerInTenant, uniqueSlug } from '../support/orgs.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

const Echo = z.object({ ok: z.literal(true), userId: z.string().nullable(), permissions: z.array(z.string()) });

/** Test routes, one per access kind; each answers who it saw. */
const TEST_ROUTES: { path: string; access: RouteAccess }[] = [
  { path: '/api/test/public', access: access.public() },
  { path: '/api/test/optional', access: access.optional() },
  { path: '/api/test/session', access: access.session() },
  { path: '/api/test/platform-admin', access: access.platform('admin', 'superadmin') },
  { path: '/api/test/platform-superadmin', access: access.platform('superadmin') },
  { path: '/api/test/organization', access: access.session({ organization: true, apiKeys: false }) },
  { path: '/api/test/roles-read', access: access.tenant(['roles:read'], { apiKeys: true }) },
  { path: '/api/test/roles-read-write', access: access.tenant(['roles:read', 'roles:write'], { apiKeys: true }) },
  // Step order: a platform-role mismatch is reported before a missing organization.
  {
    path: '/api/test/admin-with-permissions',
    access: access.session({ platformRoles: ['admin'], permissions: ['roles:read'], apiKeys: false }),
  },
  { path: '/api/test/deletion-allowlisted', access: access.session({ allowScheduledForDeletion: true }) },
  // docs/security.md "Sensitive actions and step-up".
  { path: '/api/test/sensitive', access: access.session({ sensitive: true }) },
  {
    path: '/api/test/sensitive-roles-read',
    // Keys allowed, but the sensitivity alone refuses them.
    access: access.tenant(['roles:read'], { apiKeys: true, sensitive: true }),
  },
  {
    path: '/api/test/roles-read-no-keys',
    access: access.tenant(['roles:read'], { apiKeys: false }),
  },
];

function testRouter() {
  const router = createRouter();
  for (const { path, access: declared } of TEST_ROUTES) {
    const route = defineRoute({
      method: 'get',
      path,
      access: declared,
      responses: { 200: { description: 'who the route saw', content: { 'application/json': { schema: Echo } } } },
    });
    router.openapi(route, (c) => {
      // What the guard attached, without asking for the session again.
      const session = c.get('session');
      return c.json(
        { ok: true as const, userId: session?.user.id ?? null, permissions: session?.permissions ?? [] },
        200,
      );
    });
  }
  return router;
}

/** A role of the organization holding exactly `permissions`. */
async function insertRole(t: TestApp, organizationId: string, permissions: readonly Permission[]): Promise<string> {
  return asOwnerInTenant(t, organizationId, async (trx) => {
    const slug = uniqueSlug('test-role');
    const { id } = await trx
      .insertInto('roles')
      .values({ tenant_id: organizationId, name: slug, slug, description: 'guard test' })
      .returning('id')
      .executeTakeFirstOrThrow();
    if (permissions.length > 0) {
      await sql`
        insert into role_permissions (role_id, permission_id)
        select ${id}::uuid, p.id from permissions p where p.resource || ':' || p.action = any(${[...permissions]}::text[])
      `.execute(trx);
    }
    const granted = await sql<{
      n: number;
    }>`select count(*)::int as n from role_permissions where role_id = ${id}::uuid`.execute(trx);
    expect(granted.rows[0]?.n).toBe(permissions.length);
    return id as string;
  });
}

async function newOrganization(t: TestApp, founder: SignedInUser): Promise<string> {
  const slug = uniqueSlug('guard-org');
  const res = await call(t, '/api/auth/organization/create', { jar: founder.jar, body: { name: slug, slug } });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  // Works before and after ORGANIZATION_CREATED seeding: when the creator's
  // membership has no role yet, give it one holding every permission.
  const member = await t.db
    .selectFrom('members')
    .select(['id', 'role_id'])
    .where('organization_id', '=', id)
    .where('user_id', '=', founder.id)
    .executeTakeFirstOrThrow();
  if (!member.role_id) {
    const roleId = await insertRole(t, id, ALL_PERMISSIONS);
    await t.database.withOwner((owner) =>
      owner.updateTable('members').set({ role_id: roleId }).where('id', '=', member.id).execute(),
    );
  }
  return id;
}

/** Makes `user` a member of the organization with a role holding exactly `permissions` (null: no role at all). */
async function joinOrganization(
  t: TestApp,
  organizationId: string,
  user: SignedInUser,
  permissions: readonly Permission[] | null,
) {
  const roleId = permissions === null ? null : await insertRole(t, organizationId, permissions);
  await t.database.withOwner((owner) =>
    owner
      .insertInto('members')
      .values({ organization_id: organizationId, user_id: user.id, role: 'member', role_id: roleId })
      .execute(),
  );
}

async function setActiveOrganization(t: TestApp, jar: CookieJar, organizationId: string) {
  const res = await call(t, '/api/auth/organization/set-active', { jar, body: { organizationId } });
  expect(res.status).toBe(200);
}

async function setPlatformRole(t: TestApp, userId: string, role: 'superadmin' | 'admin' | 'user') {
  await t.database.withOwner((owner) => owner.updateTable('users').set({ role }).where('id', '=', userId).execute());
}

async function get(t: TestApp, path: string, jar?: CookieJar) {
  const res = await call(t, path, { jar });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

// Oracle: the guard's answers (status, code, message) copied from the contract on purpose; the service must agree with them.
const UNAUTHORIZED = { status: 401, body: { code: 'UNAUTHORIZED', message: expect.any(String) } };
const FORBIDDEN = { status: 403, body: { code: 'FORBIDDEN', message: expect.any(String) } };
const NO_ACTIVE_ORGANIZATION = {
  status: 403,
  body: { code: 'NO_ACTIVE_ORGANIZATION', message: 'No active organization' },
};
const INSUFFICIENT_PERMISSIONS = {
  status: 403,
  body: { code: 'INSUFFICIENT_PERMISSIONS', message: 'Insufficient permissions' },
};
const allowed = (userId: string | null) => ({ status: 200, body: expect.objectContaining({ ok: true, userId }) });

describe('guard (docs/api.md "Access")', () => {
  let t: TestApp;
  let founder: SignedInUser;
  let organizationId: string;

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    // Routes must be added before the first request builds the router.
    t.app.route('/', testRouter());
    t.app.get('/api/test/undeclared', async (c) =>
      c.json({ ok: true, userId: (await loadSession(c))?.user.id ?? null }),
    );
    t.app.post('/api/test/undeclared', (c) => c.json({ ok: true }));
    t.app.get('/api/test/tenant', guard(access.tenant(['roles:read'], { apiKeys: true })), (c) =>
      c.json({ tenantId: tenantOf(c) }),
    );
    t.app.get('/api/test/tenant-without-organization', guard(access.session()), (c) =>
      c.json({ tenantId: tenantOf(c) }),
    );
    founder = await signedInUser(t);
    organizationId = await newOrganization(t, founder);
  });
  afterAll(() => t.close());

  describe('tenantOf', () => {
    it('is the organization the guard authorized the request in', async () => {
      expect(await get(t, '/api/test/tenant', founder.jar)).toEqual({
        status: 200,
        body: { tenantId: organizationId },
      });
    });

    it('fails loudly (500) on a route whose access declares no organization', async () => {
      expect(await get(t, '/api/test/tenant-without-organization', founder.jar)).toEqual({
        status: 500,
        body: { code: 'INTERNAL_ERROR', message: 'Internal server error' },
      });
    });
  });

  describe('steps 1-4', () => {
    it('1. a public route works without a session (and with one)', async () => {
      expect(await get(t, '/api/test/public')).toEqual(allowed(null));
      const user = await signedInUser(t);
      // Public: the guard does not even fetch the session.
      expect(await get(t, '/api/test/public', user.jar)).toEqual(allowed(null));
    });

    it('3. an optional-auth route allows a request without a session and attaches one when present', async () => {
      expect(await get(t, '/api/test/optional')).toEqual(allowed(null));
      const user = await signedInUser(t);
      expect(await get(t, '/api/test/optional', user.jar)).toEqual(allowed(user.id));
    });

    it('4. no session on any protected kind: 401 UNAUTHORIZED (before any role, organization or permission check)', async () => {
      for (const { path, access: declared } of TEST_ROUTES) {
        if (declared.kind !== 'session') continue;
        expect(await get(t, path), path).toEqual(UNAUTHORIZED);
      }
    });

    it('4. an invalid session cookie counts as no session', async () => {
      const jar = new CookieJar();
      jar.store(new Response(null, { headers: [['set-cookie', 'gatehouse.session_token=forged.value; Path=/']] }));
      expect(await get(t, '/api/test/session', jar)).toEqual(UNAUTHORIZED);
    });

    it('a session route admits any signed-in user', async () => {
      const user = await signedInUser(t);
      expect(await get(t, '/api/test/session', user.jar)).toEqual(allowed(user.id));
    });
  });

  describe('5. platform roles', () => {
    it('a plain user on an admin route: 403 FORBIDDEN; admin and superadmin pass; admin is not enough for a superadmin route', async () => {
      const user = await signedInUser(t);
      expect(await get(t, '/api/test/platform-admin', user.jar)).toEqual(FORBIDDEN);
      expect(await get(t, '/api/test/platform-superadmin', user.jar)).toEqual(FORBIDDEN);

      await setPlatformRole(t, user.id, 'admin');
      expect(await get(t, '/api/test/platform-admin', user.jar)).toEqual(allowed(user.id));
      expect(await get(t, '/api/test/platform-superadmin', user.jar)).toEqual(FORBIDDEN);

      await setPlatformRole(t, user.id, 'superadmin');
      expect(await get(t, '/api/test/platform-admin', user.jar)).toEqual(allowed(user.id));
      expect(await get(t, '/api/test/platform-superadmin', user.jar)).toEqual(allowed(user.id));
    });

    it('the role check comes before the organization check', async () => {
      const user = await signedInUser(t);
      expect(await get(t, '/api/test/admin-with-permissions', user.jar)).toEqual(FORBIDDEN);
      await setPlatformRole(t, user.id, 'admin');
      expect(await get(t, '/api/test/admin-with-permissions', user.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
    });
  });

  describe('6-7. active organization and permissions', () => {
    it('without an active organization: 403 NO_ACTIVE_ORGANIZATION on organization and permission routes', async () => {
      const user = await signedInUser(t);
      expect(await get(t, '/api/test/organization', user.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
      expect(await get(t, '/api/test/roles-read', user.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
      expect(await get(t, '/api/test/roles-read-write', user.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
    });

    it('AND semantics: holding one of two listed permissions is not enough (403 INSUFFICIENT_PERMISSIONS); holding both is', async () => {
      const partial = await signedInUser(t);
      await joinOrganization(t, organizationId, partial, ['roles:read']);
      await setActiveOrganization(t, partial.jar, organizationId);
      expect(await get(t, '/api/test/organization', partial.jar)).toEqual(allowed(partial.id));
      expect(await get(t, '/api/test/roles-read', partial.jar)).toEqual({
        status: 200,
        body: { ok: true, userId: partial.id, permissions: ['roles:read'] },
      });
      expect(await get(t, '/api/test/roles-read-write', partial.jar)).toEqual(INSUFFICIENT_PERMISSIONS);

      const full = await signedInUser(t);
      await joinOrganization(t, organizationId, full, ['roles:read', 'roles:write']);
      await setActiveOrganization(t, full.jar, organizationId);
      expect(await get(t, '/api/test/roles-read-write', full.jar)).toEqual({
        status: 200,
        body: { ok: true, userId: full.id, permissions: ['roles:read', 'roles:write'] },
      });
    });

    it('a member without a role has no permissions (403 INSUFFICIENT_PERMISSIONS), yet has an active organization', async () => {
      const user = await signedInUser(t);
      await joinOrganization(t, organizationId, user, null);
      await setActiveOrganization(t, user.jar, organizationId);
      expect(await get(t, '/api/test/organization', user.jar)).toEqual(allowed(user.id));
      expect(await get(t, '/api/test/roles-read', user.jar)).toEqual(INSUFFICIENT_PERMISSIONS);
    });

    it('the creator of an organization (Owner) passes permission routes', async () => {
      expect(await get(t, '/api/test/roles-read-write', founder.jar)).toEqual(allowed(founder.id));
    });

    it('a permission change applies on the next request (no stale cache)', async () => {
      const user = await signedInUser(t);
      await joinOrganization(t, organizationId, user, ['roles:read']);
      await setActiveOrganization(t, user.jar, organizationId);
      expect(await get(t, '/api/test/roles-read-write', user.jar)).toEqual(INSUFFICIENT_PERMISSIONS);
      const roleId = await insertRole(t, organizationId, ['roles:read', 'roles:write']);
      await t.database.withOwner((owner) =>
        owner
          .updateTable('members')
          .set({ role_id: roleId })
          .where('user_id', '=', user.id)
          .where('organization_id', '=', organizationId)
          .execute(),
      );
      expect(await get(t, '/api/test/roles-read-write', user.jar)).toEqual(allowed(user.id));
    });

    it('superadmin passes the permission step, but not the active-organization step', async () => {
      const admin = await signedInUser(t);
      await setPlatformRole(t, admin.id, 'superadmin');
      expect(await get(t, '/api/test/roles-read-write', admin.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
      expect(await get(t, '/api/test/organization', admin.jar)).toEqual(NO_ACTIVE_ORGANIZATION);

      // A member with no role and no permissions at all.
      await joinOrganization(t, organizationId, admin, null);
      await setActiveOrganization(t, admin.jar, organizationId);
      expect(await get(t, '/api/test/roles-read-write', admin.jar)).toEqual({
        status: 200,
        body: { ok: true, userId: admin.id, permissions: [] },
      });
      expect(await get(t, '/api/test/roles-read', admin.jar)).toEqual(allowed(admin.id));

      // An admin (not super) with the same membership does not.
      await setPlatformRole(t, admin.id, 'admin');
      expect(await get(t, '/api/test/roles-read', admin.jar)).toEqual(INSUFFICIENT_PERMISSIONS);
    });

    it('an active organization the user is no longer a member of counts as none', async () => {
      const user = await signedInUser(t);
      await joinOrganization(t, organizationId, user, ['roles:read']);
      await setActiveOrganization(t, user.jar, organizationId);
      expect(await get(t, '/api/test/roles-read', user.jar)).toEqual(allowed(user.id));
      await t.database.withOwner((owner) =>
        owner
          .deleteFrom('members')
          .where('user_id', '=', user.id)
          .where('organization_id', '=', organizationId)
          .execute(),
      );
      expect(await get(t, '/api/test/roles-read', user.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
    });
  });

  describe('sensitive actions: step-up, after the permission step (docs/security.md)', () => {
    const STEP_UP_REQUIRED = {
      status: 403,
      body: { code: 'STEP_UP_REQUIRED', message: 'Recent authentication required' },
    };
    const KEY_REFUSED = { status: 403, body: { code: 'FORBIDDEN', message: 'API keys cannot perform this action' } };
    const MAX_AGE_MS = 600_000;

    /** Dates the user's last proof of every factor `ago` ms before the app's clock. */
    async function provedAgo(userId: string, ago: number | null) {
      await t.database.withOwner((owner) =>
        owner
          .updateTable('sessions')
          .set({ step_up_at: ago === null ? null : new Date(t.clock().getTime() - ago) })
          .where('user_id', '=', userId)
          .execute(),
      );
    }

    async function keyWith(scopes: string[]): Promise<string> {
      const res = await call(t, '/api/api-keys', { jar: founder.jar, body: { name: 'guard', scopes } });
      expect(res.status).toBe(201);
      return ((await res.json()) as { key: string }).key;
    }
    const withKey = async (path: string, key: string) => {
      const res = await call(t, path, { headers: { authorization: `Bearer ${key}` } });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };

    it('fresh until STEP_UP_MAX_AGE after the last proof, by the app clock; never without one', async () => {
      const user = await signedInUser(t);
      await provedAgo(user.id, 0);
      expect(await get(t, '/api/test/sensitive', user.jar)).toEqual(allowed(user.id));
      await provedAgo(user.id, MAX_AGE_MS - 1);
      expect(await get(t, '/api/test/sensitive', user.jar)).toEqual(allowed(user.id));
      await provedAgo(user.id, MAX_AGE_MS);
      expect(await get(t, '/api/test/sensitive', user.jar)).toEqual(STEP_UP_REQUIRED);
      await provedAgo(user.id, null);
      expect(await get(t, '/api/test/sensitive', user.jar)).toEqual(STEP_UP_REQUIRED);
      // The clock moving past it does the same; other routes do not care.
      await provedAgo(user.id, 0);
      t.clock.advance(MAX_AGE_MS);
      expect(await get(t, '/api/test/sensitive', user.jar)).toEqual(STEP_UP_REQUIRED);
      expect(await get(t, '/api/test/session', user.jar)).toEqual(allowed(user.id));
    });

    it('organization and permission first: a stale caller without them learns that, one with them must step up', async () => {
      const lacking = await signedInUser(t);
      await provedAgo(lacking.id, null);
      expect(await get(t, '/api/test/sensitive-roles-read', lacking.jar)).toEqual(NO_ACTIVE_ORGANIZATION);
      await joinOrganization(t, organizationId, lacking, []);
      await setActiveOrganization(t, lacking.jar, organizationId);
      expect(await get(t, '/api/test/sensitive-roles-read', lacking.jar)).toEqual(INSUFFICIENT_PERMISSIONS);

      const holder = await signedInUser(t);
      await joinOrganization(t, organizationId, holder, ['roles:read']);
      await setActiveOrganization(t, holder.jar, organizationId);
      await provedAgo(holder.id, MAX_AGE_MS + 1);
      expect(await get(t, '/api/test/sensitive-roles-read', holder.jar)).toEqual(STEP_UP_REQUIRED);
      await provedAgo(holder.id, 0);
      expect(await get(t, '/api/test/sensitive-roles-read', holder.jar)).toEqual(allowed(holder.id));
    });

    it('an API key: 403 FORBIDDEN on a sensitive or key-refusing permission route (after its scopes), 401 where keys never reach', async () => {
      await provedAgo(founder.id, 0);
      const reader = await keyWith(['roles:read']);
      const other = await keyWith(['members:read']);
      expect(await withKey('/api/test/roles-read', reader)).toEqual({
        status: 200,
        body: expect.objectContaining({ ok: true }),
      });
      expect(await withKey('/api/test/sensitive-roles-read', reader)).toEqual(KEY_REFUSED);
      expect(await withKey('/api/test/roles-read-no-keys', reader)).toEqual(KEY_REFUSED);
      // Permission first, for a key as for a session.
      expect(await withKey('/api/test/sensitive-roles-read', other)).toEqual(INSUFFICIENT_PERMISSIONS);
      expect(await withKey('/api/test/roles-read-no-keys', other)).toEqual(INSUFFICIENT_PERMISSIONS);
      // Routes that are not permission-guarded never take a key.
      expect(await withKey('/api/test/sensitive', reader)).toEqual(UNAUTHORIZED);
      expect(await withKey('/api/test/session', reader)).toEqual(UNAUTHORIZED);
    });
  });

  describe('account scheduled for deletion (docs/api.md "Accounts scheduled for deletion")', () => {
    it('most routes answer 403 ACCOUNT_SCHEDULED_FOR_DELETION; allowlisted, optional-auth and public routes still answer', async () => {
      const user = await signedInUser(t);
      await setPlatformRole(t, user.id, 'superadmin');
      expect(await get(t, '/api/test/session', user.jar)).toEqual(allowed(user.id));
      await t.database.withOwner((owner) =>
        owner.updateTable('users').set({ deleted_at: new Date() }).where('id', '=', user.id).execute(),
      );

      const SCHEDULED = {
        status: 403,
        body: expect.objectContaining({ code: 'ACCOUNT_SCHEDULED_FOR_DELETION', message: expect.any(String) }),
      };
      for (const path of [
        '/api/test/session',
        '/api/test/platform-superadmin',
        '/api/test/roles-read',
        '/api/test/undeclared',
        '/api/admin/users',
      ]) {
        expect(await get(t, path, user.jar), path).toEqual(SCHEDULED);
      }
      expect(await get(t, '/api/test/deletion-allowlisted', user.jar)).toEqual(allowed(user.id));
      expect(await get(t, '/api/test/optional', user.jar)).toEqual(allowed(user.id));
      expect(await get(t, '/api/test/public', user.jar)).toEqual(allowed(null));

      await t.database.withOwner((owner) =>
        owner.updateTable('users').set({ deleted_at: null }).where('id', '=', user.id).execute(),
      );
      expect(await get(t, '/api/test/session', user.jar)).toEqual(allowed(user.id));
    });
  });

  describe('deny by default (docs/api.md "Access")', () => {
    it('a route registered without any access declaration answers 401 without a session and 200 with one', async () => {
      expect(await get(t, '/api/test/undeclared')).toEqual(UNAUTHORIZED);
      const user = await signedInUser(t);
      expect(await get(t, '/api/test/undeclared', user.jar)).toEqual({
        status: 200,
        body: { ok: true, userId: user.id },
      });
      const post = await call(t, '/api/test/undeclared', { body: {} });
      expect(post.status).toBe(401);
    });

    it('route walk: every registered endpoint that is not public or optional-auth answers 401 UNAUTHORIZED without a session', async () => {
      const byEndpoint = new Map<
        string,
        { method: string; path: string; handlers: (typeof t.app.routes)[number]['handler'][] }
      >();
      for (const route of t.app.routes) {
        // The global middleware chain: `app.use('*', …)` is stored as ALL `/*` by hono 4.
        if (route.method === 'ALL' && (route.path === '*' || route.path === '/*')) continue;
        const key = `${route.method} ${route.path}`;
        const entry = byEndpoint.get(key) ?? { method: route.method, path: route.path, handlers: [] };
        entry.handlers.push(route.handler);
        byEndpoint.set(key, entry);
      }

      const walked: string[] = [];
      const skipped: string[] = [];
      for (const [key, { method, path, handlers }] of byEndpoint) {
        // The library's routes are public in our guard; the library decides.
        if (path === '/api/auth/*' || path.startsWith('/api/auth/')) continue;
        const declared = handlers.map((handler) => declaredAccess(handler)).find((found) => found !== undefined);
        if (declared && (declared.kind === 'public' || declared.kind === 'optional')) {
          skipped.push(key);
          continue;
        }
        const concrete = path.replace(/:[A-Za-z0-9_]+(\{[^}]*\})?/g, () => crypto.randomUUID()).replace(/\*/g, 'x');
        const verb = method === 'ALL' ? 'GET' : method;
        const withBody = ['POST', 'PATCH', 'PUT'].includes(verb);
        const res = await call(t, concrete, { method: verb, ...(withBody ? { body: {} } : {}) });
        expect({ key, status: res.status, body: await res.json() }).toEqual({
          key,
          status: 401,
          body: { code: 'UNAUTHORIZED', message: expect.any(String) },
        });
        walked.push(key);
      }

      // The walk saw the known protected routes, and skipped the known open ones.
      for (const known of [
        'GET /api/admin/users',
        'PATCH /api/admin/users/:id/role',
        'GET /api/test/session',
        'GET /api/test/roles-read-write',
        'GET /api/test/undeclared',
        'POST /api/test/undeclared',
      ]) {
        expect(walked).toContain(known);
      }
      for (const open of ['GET /api/health', 'GET /api/session', 'GET /api/test/public', 'GET /api/test/optional']) {
        expect(skipped).toContain(open);
      }
    });
  });
});

describe('API keys, a decision every tenant route states', () => {
  it('every service route that acts in an organization says whether API keys may call it', async () => {
    const t = await createTestApp();
    try {
      const tenantRoutes = t.app.routes
        .filter((route) => !route.path.startsWith('/api/auth') && !route.path.startsWith('/api/test'))
        .map((route) => ({ key: `${route.method} ${route.path}`, declared: declaredAccess(route.handler) }))
        .filter(
          ({ declared }) =>
            declared?.kind === 'session' && (declared.organization || (declared.permissions?.length ?? 0) > 0),
        );
      expect(tenantRoutes.length).toBeGreaterThanOrEqual(15);
      for (const { key, declared } of tenantRoutes)
        expect(typeof (declared as { apiKeys?: unknown }).apiKeys, key).toBe('boolean');
    } finally {
      await t.close();
    }
  });

  it('leaving the decision out of a tenant route is a type error (checked by tsc)', () => {
    const responses = { 200: { description: 'ok' } };
    const declare = () => [
      // @ts-expect-error permissions without a decision on API keys
      defineRoute({ method: 'get', path: '/x', access: access.session({ permissions: ['roles:read'] }), responses }),
      // @ts-expect-error an organization without a decision on API keys
      defineRoute({ method: 'get', path: '/y', access: access.session({ organization: true }), responses }),
      defineRoute({ method: 'get', path: '/z', access: access.tenant(['roles:read'], { apiKeys: false }), responses }),
    ];
    expect(declare).toBeTypeOf('function');
  });
});
