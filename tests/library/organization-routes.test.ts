import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus, mailsTo, PASSWORD } from '../support/http.js';
import { enableTotp } from '../support/mfa.js';
import {
  type Actor,
  addMember,
  createOrganization,
  createRole,
  invitationIdFromMail,
  invite,
  listMembers,
  newMember,
  READ_PERMISSIONS,
  roleSlugsByMember,
  setActive,
  storedRoles,
  type TestMember,
  type TestOrganization,
  uniqueSlug,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

const ORG = '/api/auth/organization';

/** docs/api.md "Organizations": the plugin routes, authorized by our permission strings. */
describe('organization plugin routes', () => {
  let t: TestApp;

  let org: TestOrganization;
  let admin: TestMember;
  let member: TestMember;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t, { name: 'Olive Owner' }));
    admin = await newMember(t, org, 'admin');
    member = await newMember(t, org, 'member');
  });
  afterAll(() => t.close());

  const post = (path: string, actor: Actor | null, body: unknown) =>
    call(t, `${ORG}/${path}`, { body, ...(actor ? { jar: actor.jar } : {}) });

  const invitationRows = (organizationId: string) =>
    t.database.withOwner((owner) =>
      owner
        .selectFrom('invitations')
        .select(['id', 'email', 'role', 'status'])
        .where('organization_id', '=', organizationId)
        .execute(),
    ) as Promise<{ id: string; email: string; role: string | null; status: string }[]>;

  describe('invite-member', () => {
    it('needs invitations:write: a Member gets 403 INSUFFICIENT_PERMISSIONS and nothing is sent or stored', async () => {
      const email = `nobody-${crypto.randomUUID().slice(0, 8)}@example.test`;
      const before = (await invitationRows(org.id)).length;
      const body = await expectStatus(await invite(t, member, { email, role: 'viewer', organizationId: org.id }), 403);
      expect(body).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS', message: 'Insufficient permissions' });
      // Without organizationId the active organization is the one checked.
      expect(await expectStatus(await invite(t, member, { email, role: 'viewer' }), 403)).toMatchObject({
        code: 'INSUFFICIENT_PERMISSIONS',
      });
      expect((await invitationRows(org.id)).length).toBe(before);
      expect(mailsTo(t, email)).toHaveLength(0);
      expect(
        await expectStatus(await post('invite-member', null, { email, role: 'viewer', organizationId: org.id }), 401),
      ).toMatchObject({ code: 'UNAUTHORIZED' });
    });

    it('refuses a role slug the organization does not have, and Owner, with 400', async () => {
      const before = (await invitationRows(org.id)).length;
      const email = `x-${crypto.randomUUID().slice(0, 8)}@example.test`;
      for (const role of ['no-such-role', 'owner', ['owner'], ['admin', 'owner'], 42]) {
        const body = await expectStatus(await invite(t, org.owner, { email, role, organizationId: org.id }), 400);
        expect(body.code, JSON.stringify(role)).toBe('VALIDATION_ERROR');
      }
      // A custom role of another organization is no role of this one.
      const elsewhere = await createOrganization(t, await signedInUser(t));
      await createRole(t, elsewhere.owner, { name: 'Only Elsewhere', permissions: [] });
      expect(
        await expectStatus(await invite(t, org.owner, { email, role: 'only-elsewhere', organizationId: org.id }), 400),
      ).toMatchObject({ code: 'VALIDATION_ERROR' });
      expect((await invitationRows(org.id)).length).toBe(before);
      expect(mailsTo(t, email)).toHaveLength(0);
    });

    it('refuses an Admin inviting into a role that holds what the Admin lacks (403)', async () => {
      await createRole(t, org.owner, { name: 'Wrecking Crew', permissions: ['organizations:delete'] });
      const email = `y-${crypto.randomUUID().slice(0, 8)}@example.test`;
      expect(
        await expectStatus(await invite(t, admin, { email, role: 'wrecking-crew', organizationId: org.id }), 403),
      ).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS' });
      expect((await invitationRows(org.id)).some((i) => i.email === email)).toBe(false);
    });

    it('defaults to the member role', async () => {
      const user = await signedInUser(t);
      await expectStatus(await invite(t, org.owner, { email: user.email, organizationId: org.id }), 200);
      expect((await invitationRows(org.id)).find((i) => i.email === user.email)).toMatchObject({
        role: 'member',
        status: 'pending',
      });
      const accepted = await expectStatus(
        await post('accept-invitation', user, { invitationId: invitationIdFromMail(t, user.email) }),
        200,
      );
      expect((await roleSlugsByMember(t, org.owner))[accepted.member.id]).toBe('member');
    });

    it('gives the accepted member the invited role: a custom role, Admin, Viewer', async () => {
      await createRole(t, org.owner, { name: 'Billing Manager', permissions: ['members:read', 'api_keys:read'] });
      for (const role of ['billing-manager', 'admin', 'viewer']) {
        const user = await signedInUser(t);
        const memberId = await addMember(t, org, user, role);
        const mine = (await listMembers(t, org.owner)).find((m) => m.id === memberId);
        expect(mine, role).toMatchObject({ userId: user.id, roleSlug: role });
      }
    });

    it('lets an Admin invite (invitations:write), never into Owner', async () => {
      const user = await signedInUser(t);
      const memberId = await addMember(t, org, user, 'viewer', admin);
      expect((await roleSlugsByMember(t, org.owner))[memberId]).toBe('viewer');
      expect(
        await expectStatus(
          await invite(t, admin, {
            email: `z-${crypto.randomUUID().slice(0, 8)}@example.test`,
            role: 'owner',
            organizationId: org.id,
          }),
          400,
        ),
      ).toMatchObject({
        code: 'VALIDATION_ERROR',
      });
    });
  });

  describe('cancel-invitation', () => {
    it('needs invitations:delete: a role that may invite but not cancel gets 403; an Admin cancels', async () => {
      // Everything a Viewer holds (so it may invite Viewers), and invitations:write, but not invitations:delete.
      await createRole(t, org.owner, { name: 'Recruiter', permissions: [...READ_PERMISSIONS, 'invitations:write'] });
      const recruiter = await newMember(t, org, 'recruiter');
      const invitee = await signedInUser(t);
      await expectStatus(
        await invite(t, recruiter, { email: invitee.email, role: 'viewer', organizationId: org.id }),
        200,
      );
      const invitationId = invitationIdFromMail(t, invitee.email);

      for (const actor of [recruiter, member]) {
        expect(await expectStatus(await post('cancel-invitation', actor, { invitationId }), 403)).toMatchObject({
          code: 'INSUFFICIENT_PERMISSIONS',
        });
      }
      expect((await invitationRows(org.id)).find((i) => i.id === invitationId)?.status).toBe('pending');

      await expectStatus(await post('cancel-invitation', admin, { invitationId }), 200);
      expect((await invitationRows(org.id)).find((i) => i.id === invitationId)?.status).toBe('canceled');
      const late = await post('accept-invitation', invitee, { invitationId });
      expect(late.status).toBeGreaterThanOrEqual(400);
      expect(late.status).toBeLessThan(500);
      expect((await listMembers(t, org.owner)).some((m) => m.userId === invitee.id)).toBe(false);
    });
  });

  describe('remove-member', () => {
    it('needs members:delete: a Member gets 403; an Admin removes', async () => {
      const target = await newMember(t, org, 'viewer');
      expect(
        await expectStatus(
          await post('remove-member', member, { memberIdOrEmail: target.memberId, organizationId: org.id }),
          403,
        ),
      ).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS' });
      expect((await listMembers(t, org.owner)).some((m) => m.id === target.memberId)).toBe(true);

      await expectStatus(
        await post('remove-member', admin, { memberIdOrEmail: target.memberId, organizationId: org.id }),
        200,
      );
      expect((await listMembers(t, org.owner)).some((m) => m.id === target.memberId)).toBe(false);
    });

    it('answers 4xx for a member of another organization and removes nobody', async () => {
      const elsewhere = await createOrganization(t, await signedInUser(t));
      const theirs = await newMember(t, elsewhere, 'viewer');
      const res = await post('remove-member', org.owner, { memberIdOrEmail: theirs.memberId, organizationId: org.id });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect((await listMembers(t, elsewhere.owner)).some((m) => m.id === theirs.memberId)).toBe(true);
    });
  });

  describe('the last Owner', () => {
    it('can neither leave nor be removed (4xx, still Owner)', async () => {
      const attempts = [
        post('leave', org.owner, { organizationId: org.id }),
        post('remove-member', org.owner, { memberIdOrEmail: org.ownerMemberId, organizationId: org.id }),
        post('remove-member', org.owner, { memberIdOrEmail: org.owner.email, organizationId: org.id }),
        post('remove-member', admin, { memberIdOrEmail: org.ownerMemberId, organizationId: org.id }),
        post('remove-member', admin, { memberIdOrEmail: org.owner.email, organizationId: org.id }),
      ];
      for (const attempt of attempts) {
        const res = await attempt;
        expect(res.status, await res.clone().text()).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
        expect((await roleSlugsByMember(t, admin))[org.ownerMemberId]).toBe('owner');
      }
    });

    it('one of two Owners can leave, after which the other is the last', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      const second = await newMember(t, fresh, 'admin');
      const ownerRole = (await storedRoles(t, fresh.id)).find((r) => r.slug === 'owner')!.id;
      await expectStatus(
        await call(t, `/api/admin/members/${second.memberId}`, {
          method: 'PATCH',
          body: { roleId: ownerRole },
          jar: fresh.owner.jar,
        }),
        200,
      );
      await expectStatus(await post('leave', fresh.owner, { organizationId: fresh.id }), 200);
      expect(await roleSlugsByMember(t, second)).toEqual({ [second.memberId]: 'owner' });
      const stays = await post('leave', second, { organizationId: fresh.id });
      expect(stays.status).toBeGreaterThanOrEqual(400);
      expect(stays.status).toBeLessThan(500);
      expect(await roleSlugsByMember(t, second)).toEqual({ [second.memberId]: 'owner' });
    });
  });

  describe('update and delete', () => {
    it('update needs organizations:write: a Member gets 403, an Admin renames', async () => {
      const name = () =>
        t.database.withOwner(
          async (owner) =>
            (await owner.selectFrom('organizations').select('name').where('id', '=', org.id).executeTakeFirstOrThrow())
              .name as string,
        );
      const before = await name();
      expect(
        await expectStatus(await post('update', member, { data: { name: 'Hijacked' }, organizationId: org.id }), 403),
      ).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS' });
      expect(await expectStatus(await post('update', member, { data: { name: 'Hijacked' } }), 403)).toMatchObject({
        code: 'INSUFFICIENT_PERMISSIONS',
      });
      expect(await name()).toBe(before);
      await expectStatus(
        await post('update', admin, { data: { name: 'Renamed By Admin' }, organizationId: org.id }),
        200,
      );
      expect(await name()).toBe('Renamed By Admin');
    });

    it('delete needs organizations:delete: an Admin gets 403; the Owner deletes, and its roles and members go with it', async () => {
      const fresh = await createOrganization(t, await signedInUser(t));
      const freshAdmin = await newMember(t, fresh, 'admin');
      const exists = () =>
        t.database.withOwner(
          async (owner) =>
            (await owner.selectFrom('organizations').select('id').where('id', '=', fresh.id).execute()).length,
        );

      expect(await expectStatus(await post('delete', freshAdmin, { organizationId: fresh.id }), 403)).toMatchObject({
        code: 'INSUFFICIENT_PERMISSIONS',
      });
      expect(await exists()).toBe(1);
      expect((await storedRoles(t, fresh.id)).length).toBe(4);

      await expectStatus(await post('delete', fresh.owner, { organizationId: fresh.id }), 200);
      expect(await exists()).toBe(0);
      expect(await storedRoles(t, fresh.id)).toEqual([]);
      const members = await t.database.withOwner(
        async (owner) =>
          (await owner.selectFrom('members').select('id').where('organization_id', '=', fresh.id).execute()).length,
      );
      expect(members).toBe(0);
    });

    it('a Member of one organization gains nothing from being Owner of another', async () => {
      const own = await createOrganization(t, member);
      // `member` now owns `own` (active), but is still only a Member of `org`.
      expect(await expectStatus(await post('delete', member, { organizationId: org.id }), 403)).toMatchObject({
        code: 'INSUFFICIENT_PERMISSIONS',
      });
      expect(
        await expectStatus(await post('update', member, { data: { name: 'Nope' }, organizationId: org.id }), 403),
      ).toMatchObject({ code: 'INSUFFICIENT_PERMISSIONS' });
      await setActive(t, member, org.id);
      expect(own.id).not.toBe(org.id);
    });
  });

  it('does not serve the plugin update-member-role route (404)', async () => {
    const target = await newMember(t, org, 'viewer');
    for (const role of ['owner', 'admin']) {
      const res = await post('update-member-role', org.owner, {
        memberId: target.memberId,
        role,
        organizationId: org.id,
      });
      expect(res.status).toBe(404);
    }
    expect((await roleSlugsByMember(t, org.owner))[target.memberId]).toBe('viewer');
  });

  describe('malformed ids', () => {
    it.each([
      ['set-active', { organizationId: 'x' }],
      ['delete', { organizationId: 'x' }],
      ['leave', { organizationId: 'x' }],
      ['update', { data: { name: 'X' }, organizationId: 'x' }],
      ['invite-member', { email: 'a@example.test', role: 'member', organizationId: 'x' }],
      ['remove-member', { memberIdOrEmail: 'x', organizationId: 'x' }],
      ['remove-member', { memberIdOrEmail: 'x' }],
      ['accept-invitation', { invitationId: 'x' }],
      ['cancel-invitation', { invitationId: 'x' }],
      ['reject-invitation', { invitationId: 'x' }],
      ['set-active', { organizationId: 'c232ab00-9414-11ec-b3c8-9e6bdeced846x' }],
      ['set-active', { organizationId: 42 }],
    ])('%s with %j answers 400 VALIDATION_ERROR, not 500', async (path, body) => {
      const res = await post(path, org.owner, body);
      const answer = await expectStatus(res, 400);
      expect(answer.code).toBe('VALIDATION_ERROR');
    });

    it('a malformed id in the query string answers 400 too', async () => {
      expect(
        await expectStatus(await call(t, `${ORG}/get-invitation?id=x`, { jar: org.owner.jar }), 400),
      ).toMatchObject({ code: 'VALIDATION_ERROR' });
      const full = await call(t, `${ORG}/get-full-organization?organizationId=x`, { jar: org.owner.jar });
      expect(await expectStatus(full, 400)).toMatchObject({ code: 'VALIDATION_ERROR' });
    });
  });

  describe('an organization that requires MFA binds a platform admin who is not a member', () => {
    let guarded: TestOrganization;
    let superadmin: Awaited<ReturnType<typeof signedInUser>>;
    beforeAll(async () => {
      guarded = await createOrganization(t, await signedInUser(t));
      // The policy as PATCH /api/organization/security leaves it (tests/routes/organization-security covers that route).
      await t.database.withOwner((owner) =>
        owner.updateTable('organizations').set({ require_mfa: true }).where('id', '=', guarded.id).execute(),
      );
      superadmin = await signedInUser(t);
      await t.database.withOwner((owner) =>
        owner.updateTable('users').set({ role: 'superadmin' }).where('id', '=', superadmin.id).execute(),
      );
    });

    /** The organization calls a platform admin makes naming an organization it is not a member of. */
    const callsIn = (organizationId: string) =>
      [
        ['has-permission', { body: { organizationId, permissions: { members: ['read'] } } }],
        ['get-active-member-role', { query: `organizationId=${organizationId}` }],
        ['get-full-organization', { query: `organizationId=${organizationId}` }],
        ['list-members', { query: `organizationId=${organizationId}` }],
        ['list-invitations', { query: `organizationId=${organizationId}` }],
        ['update', { body: { organizationId, data: { name: 'Renamed by a platform admin' } } }],
        ['invite-member', { body: { organizationId, email: 'invitee@example.test', role: 'member' } }],
      ] as const;
    const send = (jar: Actor['jar'], path: string, input: { body?: unknown; query?: string }) =>
      call(t, `${ORG}/${path}${input.query ? `?${input.query}` : ''}`, { jar, body: input.body });

    it('answers 403 MFA_REQUIRED to its single-factor session, has-permission and get-active-member-role included', async () => {
      for (const [path, input] of callsIn(guarded.id)) {
        expect(await expectStatus(await send(superadmin.jar, path, input), 403), path).toEqual({
          code: 'MFA_REQUIRED',
          message: 'Multi-factor authentication required',
        });
      }
      const stored = await t.database.withOwner((owner) =>
        owner.selectFrom('organizations').select('name').where('id', '=', guarded.id).executeTakeFirstOrThrow(),
      );
      expect(stored.name).toBe(guarded.name);
      expect(await invitationRows(guarded.id)).toEqual([]);
    });

    it('in an organization without the policy the same session passes the guard', async () => {
      const answer = await expectStatus(await send(superadmin.jar, 'has-permission', callsIn(org.id)[0][1]), 200);
      expect(answer).toMatchObject({ success: true });
      // Past the guard: the service answers that it is no member there.
      expect(
        await expectStatus(await send(superadmin.jar, 'get-active-member-role', callsIn(org.id)[1][1]), 404),
      ).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
    });

    it('a multi-factor session of the platform admin passes the guard', async () => {
      const jar = new CookieJar();
      expect(
        (await call(t, '/api/auth/sign-in/email', { body: { email: superadmin.email, password: PASSWORD }, jar }))
          .status,
      ).toBe(200);
      await enableTotp(t, jar);
      const answer = await expectStatus(await send(jar, 'has-permission', callsIn(guarded.id)[0][1]), 200);
      expect(answer).toMatchObject({ success: true });
      expect(await expectStatus(await send(jar, 'get-active-member-role', callsIn(guarded.id)[1][1]), 404)).toEqual({
        code: 'NOT_FOUND',
        message: 'Member not found',
      });
    });
  });

  describe('creation', () => {
    it("is atomic: when the creation's role seeding fails, no organization, member or role remains", async () => {
      const user = await signedInUser(t);
      const slug = uniqueSlug('atomic');
      // The database refuses the last step of the seeding (the creator made
      // Owner) for this slug only: the default roles are written by then, so
      // the test proves they roll back too. The error names the organization.
      await t.database.withOwner(async (owner) => {
        await sql`
          create function test_refuse_owner() returns trigger language plpgsql as $$
          begin
            if new.role_id is not null and exists (
              select 1 from organizations o where o.id = new.organization_id and o.slug = ${sql.lit(slug)}
            ) then
              raise exception 'seeding refused for organization %', new.organization_id;
            end if;
            return new;
          end $$`.execute(owner);
        await sql`create trigger refuse_owner after update of role_id on members
          for each row execute function test_refuse_owner()`.execute(owner);
      });
      const logged = t.logger.lines.length;
      const res = await post('create', user, { name: 'Half Made', slug }).finally(() =>
        t.database.withOwner(async (owner) => {
          await sql`drop trigger refuse_owner on members`.execute(owner);
          await sql`drop function test_refuse_owner()`.execute(owner);
        }),
      );
      expect(res.status).toBeGreaterThanOrEqual(400);
      const refused = /seeding refused for organization ([0-9a-f-]{36})/.exec(
        JSON.stringify(t.logger.lines.slice(logged)),
      );
      expect(refused).not.toBeNull();
      const organizationId = refused![1]!;

      const leftovers = await t.database.withOwner(async (owner) => ({
        organizations: (
          await owner
            .selectFrom('organizations')
            .select('id')
            .where((eb: any) => eb.or([eb('id', '=', organizationId), eb('slug', '=', slug)]))
            .execute()
        ).length,
        members: (
          await owner
            .selectFrom('members')
            .select('id')
            .where((eb: any) => eb.or([eb('organization_id', '=', organizationId), eb('user_id', '=', user.id)]))
            .execute()
        ).length,
        sessionsPointingThere: (
          await owner.selectFrom('sessions').select('id').where('active_organization_id', '=', organizationId).execute()
        ).length,
      }));
      expect(leftovers).toEqual({ organizations: 0, members: 0, sessionsPointingThere: 0 });
      // Roles (and their permissions) are under row-level security: read them in that tenant.
      expect(await storedRoles(t, organizationId)).toEqual([]);
      const orphanPermissions = await t.database.withOwner((owner) =>
        owner.transaction().execute(async (trx) => {
          await sql`select set_config('app.tenant_id', ${organizationId}, true)`.execute(trx);
          const { rows } = await sql<{
            n: number;
          }>`select count(*)::int as n from role_permissions rp where not exists (select 1 from roles r where r.id = rp.role_id)`.execute(
            trx,
          );
          return rows[0]!.n;
        }),
      );
      expect(orphanPermissions).toBe(0);
      const session = await expectStatus(await call(t, '/api/session', { jar: user.jar }), 200);
      expect(session.session.activeOrganizationId).toBeNull();
      expect(session.permissions).toEqual([]);

      // The slug is free again, and a normal creation works on the same app.
      const made = await expectStatus(await post('create', user, { name: 'Whole', slug }), 200);
      expect(made.id).not.toBe(organizationId);
      expect((await listMembers(t, user)).map((m) => m.roleSlug)).toEqual(['owner']);
      expect((await storedRoles(t, made.id)).map((r) => r.slug)).toEqual(['admin', 'member', 'owner', 'viewer']);
    });
  });
});
