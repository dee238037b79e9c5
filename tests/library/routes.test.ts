/**
 * The auth library's routes as a second door (and revoked keys and sessions
 * through them): deny by default, one session and one
 * organization with the service, permission-checked reads, truthful replies,
 * no token in JSON, bounded input. Every attack is replayed exactly as found,
 * and the victim's state is re-read through a fresh legitimate session.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuth } from '../../src/auth/auth.js';
import { INVITATION_BUDGET } from '../../src/library/request.js';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus, UUID_V4 } from '../support/http.js';
import {
  addMember,
  auditRows,
  createOrganization,
  createRole,
  invite,
  newMember,
  READ_PERMISSIONS,
  roleBySlug,
  setActive,
  type TestOrganization,
} from '../support/orgs.js';
import { PASSWORD, type SignedInUser, signedInUser, uniqueEmail } from '../support/users.js';

/** The cookies a jar holds now, replayable later as a stolen pair would be. */
const stolen = (jar: CookieJar) => jar.header();
const replay = (t: TestApp, path: string, cookies: string, body?: unknown) =>
  call(t, path, { headers: { cookie: cookies }, ...(body === undefined ? {} : { body }) });

async function organizationName(t: TestApp, owner: SignedInUser, id: string): Promise<string> {
  const full = await expectStatus<{ name: string }>(
    await call(t, `/api/auth/organization/get-full-organization?organizationId=${id}`, { jar: owner.jar }),
    200,
  );
  return full.name;
}

describe('library routes', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t?.close());

  describe('deny by default', () => {
    it('every endpoint the library mounts is in the table or answers 404 (405 on a served path) in the contract shape', async () => {
      // The library's own list, from a library built as the app builds it (not a copy in the test).
      const auth = createAuth({
        config: t.config,
        db: t.db,
        mailer: { send: async () => {} },
        logger: t.logger,
      });
      const served = (method: string, path: string) =>
        LIBRARY_ROUTES.some((route) => route.method === method && route.path === path);
      const mounted = Object.values(
        auth.api as Record<string, { path?: string; options?: { method?: string | string[] } }>,
      ).filter((endpoint) => endpoint.path);
      expect(mounted.length).toBeGreaterThan(40);
      const refused: string[] = [];
      const problems: string[] = [];
      for (const endpoint of mounted) {
        const methods = [endpoint.options?.method ?? 'GET'].flat();
        for (const method of methods) {
          if (served(method, endpoint.path!)) continue;
          const path = `/api/auth${endpoint.path!.replace(/:\w+/g, 'x')}`;
          const user = await signedInUser(t);
          const response = await call(t, path, { method, jar: user.jar, ...(method === 'POST' ? { body: {} } : {}) });
          const body = (await response.json().catch(() => null)) as { code?: string; message?: string } | null;
          // A path the service serves with another method answers 405 (RFC 9110), any other 404.
          const [status, code] = LIBRARY_ROUTES.some((route) => route.path === endpoint.path)
            ? [405, 'METHOD_NOT_ALLOWED']
            : [404, 'NOT_FOUND'];
          if (response.status !== status || body?.code !== code || typeof body.message !== 'string')
            problems.push(`${method} ${path}: ${response.status} ${JSON.stringify(body)}`);
          refused.push(`${method} ${endpoint.path}`);
        }
      }
      expect(problems).toEqual([]);
      // Among them, the ones that would bypass the service: account deletion, member role changes, tokens, session edits.
      expect(refused).toEqual(
        expect.arrayContaining([
          'POST /delete-user',
          'POST /organization/update-member-role',
          'POST /get-access-token',
          'POST /update-session',
        ]),
      );
    });

    it('a path spelled differently from the table is not served', async () => {
      const user = await signedInUser(t);
      for (const path of [
        '/api/auth/Delete-User',
        '/api/auth/delete-user/',
        '/api/auth//delete-user',
        '/api/auth/%64elete-user',
      ]) {
        const response = await call(t, path, { body: {}, jar: user.jar });
        expect(response.status, path).toBe(404);
      }
    });
  });

  describe('one session, one organization', () => {
    let owner: SignedInUser;
    let a: TestOrganization;
    let b: TestOrganization;
    let bAdminMemberId: string;

    beforeAll(async () => {
      // The attacker: Owner of A, Viewer of B.
      owner = await signedInUser(t);
      b = await createOrganization(t, await signedInUser(t));
      bAdminMemberId = (await newMember(t, b, 'admin')).memberId;
      a = await createOrganization(t, owner);
      await addMember(t, b, owner, 'viewer');
    });

    it('replayed cookies of organization B act in the active organization A, never in B', async () => {
      await setActive(t, owner, b.id);
      const bCookies = stolen(owner.jar);
      await setActive(t, owner, a.id);
      const accomplice = uniqueEmail('accomplice');

      const renamed = await replay(t, '/api/auth/organization/update', bCookies, {
        data: { name: 'Renamed by a Viewer' },
      });
      expect([200, 403]).toContain(renamed.status);
      await replay(t, '/api/auth/organization/invite-member', bCookies, { email: accomplice, role: 'admin' });
      await replay(t, '/api/auth/organization/remove-member', bCookies, { memberIdOrEmail: bAdminMemberId });

      // B, read through its Owner's own session: unchanged.
      expect(await organizationName(t, b.owner, b.id)).toBe(b.name);
      const invitations = await expectStatus<{ email: string }[]>(
        await call(t, `/api/auth/organization/list-invitations?organizationId=${b.id}`, { jar: b.owner.jar }),
        200,
      );
      expect(invitations.map((i) => i.email)).not.toContain(accomplice);
      const members = await expectStatus<{ members: { id: string }[] }>(
        await call(t, `/api/auth/organization/list-members?organizationId=${b.id}`, { jar: b.owner.jar }),
        200,
      );
      expect(members.members.map((m) => m.id)).toContain(bAdminMemberId);
    });

    it('naming B explicitly is checked in B: a Viewer is refused', async () => {
      const refused = await call(t, '/api/auth/organization/update', {
        body: { organizationId: b.id, data: { name: 'Renamed by a Viewer' } },
        jar: owner.jar,
      });
      expect((await expectStatus(refused, 403)).code).toBe('INSUFFICIENT_PERMISSIONS');
      const bySlug = await call(t, '/api/auth/organization/update', {
        body: { organizationSlug: b.slug, data: { name: 'x' } },
        jar: owner.jar,
      });
      expect(bySlug.status).toBe(400);
      expect(await organizationName(t, b.owner, b.id)).toBe(b.name);
    });

    it('get-session tells the same active organization as the service, right after organization/create', async () => {
      const user = await signedInUser(t);
      const first = await createOrganization(t, user);
      const second = await expectStatus<{ id: string }>(
        await call(t, '/api/auth/organization/create', {
          body: { name: 'Second', slug: `second-${crypto.randomUUID().slice(0, 8)}` },
          jar: user.jar,
        }),
        200,
      );
      expect(second.id).not.toBe(first.id);
      const library = await expectStatus<{ session: { activeOrganizationId: string } }>(
        await call(t, '/api/auth/get-session', { jar: user.jar }),
        200,
      );
      const service = await expectStatus<{ session: { activeOrganizationId: string } }>(
        await call(t, '/api/session', { jar: user.jar }),
        200,
      );
      expect(library.session.activeOrganizationId).toBe(service.session.activeOrganizationId);
      expect(service.session.activeOrganizationId).toBe(second.id);
    });
  });

  describe('revoked sessions', () => {
    const LIBRARY_READS = [
      '/api/auth/list-sessions',
      '/api/auth/organization/list',
      '/api/auth/organization/list-members',
    ];

    it.each(['revoke-sessions', 'sign-out'])(
      'after %s, a stolen cookie pair reaches no library route',
      async (ending) => {
        const victim = await signedInUser(t);
        await createOrganization(t, victim);
        const theft = stolen(victim.jar);
        for (const path of LIBRARY_READS) expect((await replay(t, path, theft)).status, path).toBe(200);

        if (ending === 'sign-out')
          await expectStatus(await call(t, '/api/auth/sign-out', { body: {}, jar: victim.jar }), 200);
        else {
          const other = new CookieJar();
          await expectStatus(
            await call(t, '/api/auth/sign-in/email', { body: { email: victim.email, password: PASSWORD }, jar: other }),
            200,
          );
          await expectStatus(await call(t, '/api/auth/revoke-sessions', { body: {}, jar: other }), 200);
        }

        expect(await (await replay(t, '/api/auth/get-session', theft)).json()).toBeNull();
        for (const path of LIBRARY_READS) expect((await replay(t, path, theft)).status, path).toBe(401);
        const update = await replay(t, '/api/auth/update-user', theft, { name: 'Taken over' });
        expect(update.status).toBe(401);
        expect(
          update.headers
            .getSetCookie()
            .some((cookie) => cookie.includes('session_data=') && !/max-age=0/i.test(cookie)),
        ).toBe(false);
        // The victim's account, read through a fresh session: untouched.
        const fresh = new CookieJar();
        await expectStatus(
          await call(t, '/api/auth/sign-in/email', { body: { email: victim.email, password: PASSWORD }, jar: fresh }),
          200,
        );
        const me = await expectStatus<{ name: string }>(await call(t, '/api/users/me', { jar: fresh }), 200);
        expect(me.name).toBe(victim.name);
      },
    );
  });

  describe('organization reads and answers', () => {
    let org: TestOrganization;
    beforeAll(async () => {
      org = await createOrganization(t, await signedInUser(t));
    });

    it('list-members and get-full-organization need members:read, list-invitations needs invitations:read', async () => {
      await createRole(t, org.owner, {
        name: 'No members read',
        permissions: READ_PERMISSIONS.filter((p) => p !== 'members:read'),
      });
      await createRole(t, org.owner, {
        name: 'No invitations read',
        permissions: READ_PERMISSIONS.filter((p) => p !== 'invitations:read'),
      });
      const noMembers = await newMember(t, org, 'no-members-read');
      const noInvitations = await newMember(t, org, 'no-invitations-read');
      const refusals: [SignedInUser, string][] = [
        [noMembers, '/api/auth/organization/list-members'],
        [noMembers, '/api/auth/organization/get-full-organization'],
        [noInvitations, '/api/auth/organization/list-invitations'],
      ];
      for (const [user, path] of refusals)
        expect((await expectStatus(await call(t, path, { jar: user.jar }), 403)).code, path).toBe(
          'INSUFFICIENT_PERMISSIONS',
        );
      expect((await call(t, '/api/auth/organization/list-members', { jar: noInvitations.jar })).status).toBe(200);
      expect((await call(t, '/api/auth/organization/list-invitations', { jar: noMembers.jar })).status).toBe(200);
    });

    it("has-permission and get-active-member-role answer from the service's roles", async () => {
      const viewer = await newMember(t, org, 'viewer');
      const asked = (permissions: Record<string, string[]>) =>
        call(t, '/api/auth/organization/has-permission', { body: { permissions }, jar: viewer.jar });
      expect(await expectStatus(await asked({ organizations: ['delete'] }), 200)).toEqual({
        error: null,
        success: false,
      });
      expect(await expectStatus(await asked({ members: ['read'], roles: ['read'] }), 200)).toEqual({
        error: null,
        success: true,
      });
      expect(await expectStatus(await asked({ member: ['update'] }), 200)).toEqual({ error: null, success: false });
      const viewerRole = await roleBySlug(t, org.owner, 'viewer');
      const role = await expectStatus<{ role: string; roleId: string; permissions: string[] }>(
        await call(t, '/api/auth/organization/get-active-member-role', { jar: viewer.jar }),
        200,
      );
      expect(role).toEqual({ role: 'viewer', roleId: viewerRole.id, permissions: [...viewerRole.permissions].sort() });
    });

    it('invite-member answers the role it stored; create and accept-invitation answer the stored roleId', async () => {
      const admin = await roleBySlug(t, org.owner, 'admin');
      const invited = await expectStatus<{ id: string; role: string }>(
        await invite(t, org.owner, { email: uniqueEmail('invitee'), role: 'admin' }),
        200,
      );
      expect(invited.role).toBe('admin');

      const creator = await signedInUser(t);
      const created = await expectStatus<{ id: string; members: { roleId: string | null }[] }>(
        await call(t, '/api/auth/organization/create', {
          body: { name: 'Truthful', slug: `truthful-${crypto.randomUUID().slice(0, 8)}` },
          jar: creator.jar,
        }),
        200,
      );
      expect(created.members[0]?.roleId).toMatch(UUID_V4);
      expect(created.members[0]?.roleId).toBe((await roleBySlug(t, creator, 'owner')).id);

      const joiner = await signedInUser(t);
      await expectStatus(await invite(t, org.owner, { email: joiner.email, role: 'admin' }), 200);
      const pending = await expectStatus<{ id: string }[]>(
        await call(t, '/api/auth/organization/list-user-invitations', { jar: joiner.jar }),
        200,
      );
      const accepted = await expectStatus<{ member: { roleId: string }; invitation: { role: string } }>(
        await call(t, '/api/auth/organization/accept-invitation', {
          body: { invitationId: pending[0]!.id },
          jar: joiner.jar,
        }),
        200,
      );
      expect(accepted.member.roleId).toBe(admin.id);
      expect(accepted.invitation.role).toBe('admin');
    });

    it('invitations have a mail budget per inviter', async () => {
      const busy = await createOrganization(t, await signedInUser(t));
      for (let i = 0; i < INVITATION_BUDGET.perUser; i += 1)
        await expectStatus(await invite(t, busy.owner, { email: uniqueEmail('bulk') }), 200);
      const over = await invite(t, busy.owner, { email: uniqueEmail('bulk') });
      expect((await expectStatus(over, 429)).code).toBe('RATE_LIMITED');
      expect(over.headers.get('retry-after')).toMatch(/^\d+$/);
    });
  });

  describe('sessions and tokens', () => {
    it('get-session and list-sessions carry no token; revoking a session by id ends it on its next request', async () => {
      const user = await signedInUser(t);
      const laptop = new CookieJar();
      await expectStatus(
        await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, jar: laptop }),
        200,
      );
      const token = decodeURIComponent(laptop.get('gatehouse.session_token')!).split('.')[0]!;

      const session = await call(t, '/api/auth/get-session', { jar: user.jar });
      const sessionText = await session.text();
      expect(JSON.parse(sessionText).session).not.toHaveProperty('token');
      const listed = await call(t, '/api/auth/list-sessions', { jar: user.jar });
      const listText = await listed.text();
      expect(listText).not.toContain(token);
      const sessions = JSON.parse(listText) as {
        id: string;
        current: boolean;
        token?: string;
        userAgent: unknown;
        createdAt: string;
      }[];
      // The user's own sign-in and the laptop.
      expect(sessions).toHaveLength(2);
      expect(sessions.filter((entry) => entry.current)).toHaveLength(1);
      for (const entry of sessions) {
        expect(entry).not.toHaveProperty('token');
        expect(entry.id).toMatch(UUID_V4);
        expect(entry).toHaveProperty('createdAt');
      }
      const laptopSessionId = (
        await expectStatus<{ session: { id: string } }>(await call(t, '/api/session', { jar: laptop }), 200)
      ).session.id;
      const laptopSession = sessions.find((entry) => entry.id === laptopSessionId)!;
      expect(laptopSession.current).toBe(false);
      await expectStatus(
        await call(t, '/api/auth/revoke-session', { body: { id: laptopSession.id }, jar: user.jar }),
        200,
      );
      expect(await (await call(t, '/api/session', { jar: laptop })).json()).toBeNull();
      expect((await call(t, '/api/auth/list-sessions', { jar: laptop })).status).toBe(401);
      // Someone else's session id is not found.
      const stranger = await signedInUser(t);
      expect(
        (
          await call(t, '/api/auth/revoke-session', {
            body: { id: sessions.find((e) => e.current)!.id },
            jar: stranger.jar,
          })
        ).status,
      ).toBe(404);
      expect((await call(t, '/api/session', { jar: user.jar })).status).toBe(200);
    });

    it('sign-in answers without the session token', async () => {
      const user = await signedInUser(t);
      const response = await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD } });
      expect(await expectStatus(response, 200)).not.toHaveProperty('token');
    });
  });

  describe('bounded input', () => {
    it('names, images, organization names, slugs and metadata are bounded: 400, never stored', async () => {
      const cases: [string, unknown][] = [
        ['/api/auth/sign-up/email', { email: uniqueEmail(), password: PASSWORD, name: 'x'.repeat(100_000) }],
        ['/api/auth/sign-up/email', { email: uniqueEmail(), password: PASSWORD, name: 'Eve\r\nSet-Cookie: a=b' }],
        [
          '/api/auth/sign-up/email',
          { email: uniqueEmail(), password: PASSWORD, name: 'Eve', image: `https://example.com/${'a'.repeat(5000)}` },
        ],
        [
          '/api/auth/sign-up/email',
          { email: uniqueEmail(), password: PASSWORD, name: 'Eve', image: 'javascript:alert(1)' },
        ],
      ];
      for (const [path, body] of cases)
        expect((await expectStatus(await call(t, path, { body }), 400)).code).toBe('VALIDATION_ERROR');

      const user = await signedInUser(t);
      const refused: [string, unknown][] = [
        ['/api/auth/update-user', { name: 'y'.repeat(101) }],
        ['/api/auth/update-user', { name: 'line\nbreak' }],
        ['/api/auth/update-user', { role: 'superadmin' }],
        ['/api/auth/organization/create', { name: 'n'.repeat(101), slug: 'long-name' }],
        ['/api/auth/organization/create', { name: 'Bad slug', slug: 'Bad Slug!' }],
        ['/api/auth/organization/create', { name: 'Tab\tname', slug: 'tab-name' }],
        [
          '/api/auth/organization/create',
          { name: 'Big', slug: 'big-metadata', metadata: { blob: 'm'.repeat(10_000) } },
        ],
      ];
      for (const [path, body] of refused)
        expect((await expectStatus(await call(t, path, { body, jar: user.jar }), 400)).code, JSON.stringify(body)).toBe(
          'VALIDATION_ERROR',
        );
      const me = await expectStatus<{ name: string; role: string }>(
        await call(t, '/api/users/me', { jar: user.jar }),
        200,
      );
      expect(me).toMatchObject({ name: user.name, role: 'user' });
    });

    it("the library's query parameters answer 400, never 500", async () => {
      const org = await createOrganization(t, await signedInUser(t));
      const queries = [
        'limit=abc',
        'limit=-1',
        'offset=1e9',
        'sortBy=password',
        'sortDirection=up',
        'filterField=token',
        'filterOperator=like',
        'organizationSlug=a%00b',
        'organizationId=x',
        'limit=1&limit=2',
        'unknown=1',
      ];
      for (const query of queries) {
        const response = await call(t, `/api/auth/organization/list-members?${query}`, { jar: org.owner.jar });
        expect(response.status, query).toBe(400);
        expect(((await response.json()) as { code: string }).code).toBe('VALIDATION_ERROR');
      }
      expect(
        (
          await call(t, '/api/auth/organization/list-members?limit=10&offset=0&sortBy=createdAt&sortDirection=desc', {
            jar: org.owner.jar,
          })
        ).status,
      ).toBe(200);
    });
  });

  describe('API keys of a member who leaves', () => {
    it('are revoked and audited when the member is removed or leaves, and rejoining revives none', async () => {
      const org = await createOrganization(t, await signedInUser(t));
      for (const leaving of ['removed', 'left'] as const) {
        const admin = await newMember(t, org, 'admin');
        const key = await expectStatus<{ id: string }>(
          await call(t, '/api/api-keys', {
            body: { name: `key of ${leaving}`, scopes: ['roles:read'] },
            jar: admin.jar,
          }),
          201,
        );
        if (leaving === 'removed')
          await expectStatus(
            await call(t, '/api/auth/organization/remove-member', {
              body: { memberIdOrEmail: admin.memberId },
              jar: org.owner.jar,
            }),
            200,
          );
        else
          await expectStatus(
            await call(t, '/api/auth/organization/leave', { body: { organizationId: org.id }, jar: admin.jar }),
            200,
          );
        const keys = await expectStatus<{ id: string; revokedAt: string | null }[]>(
          await call(t, '/api/api-keys', { jar: org.owner.jar }),
          200,
        );
        expect(keys.find((k) => k.id === key.id)?.revokedAt).toEqual(expect.any(String));
        const audit = (await auditRows(t, org.id, 'api_key.revoked')).filter((row) => row.metadata.keyId === key.id);
        expect(audit).toHaveLength(1);
        expect(audit[0]!.metadata.reason).toBe('member_removed');

        await addMember(t, org, admin, 'admin');
        const after = await expectStatus<{ id: string; revokedAt: string | null }[]>(
          await call(t, '/api/api-keys', { jar: org.owner.jar }),
          200,
        );
        expect(after.find((k) => k.id === key.id)?.revokedAt).toEqual(expect.any(String));
      }
    });
  });
});
