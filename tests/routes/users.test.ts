import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectError, expectStatus } from '../support/http.js';
import {
  accountAuditRows,
  addMember,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  newMember,
  setActive,
  type TestOrganization,
} from '../support/orgs.js';
import { PASSWORD, type SignedInUser, signedInUser } from '../support/users.js';
import { createWebhook, deliveriesOf } from '../support/webhooks.js';

/**
 * docs/api.md "Accounts scheduled for deletion" (purge in the auth tier:
 * "Rate limiting"): the /api/users/me routes, their errors and audit actions.
 */

const DAY = 24 * 60 * 60 * 1000;

interface Profile {
  id: string;
  email: string;
  name: string;
  role: string;
  emailVerified: boolean;
  deletedAt: string | null;
}

interface Scheduled {
  deletedAt: string;
  purgeAfter: string;
}

interface Export {
  profile: Profile;
  twoFactor: unknown;
  passkeys: unknown[];
  memberships: {
    memberId: string;
    organizationId: string;
    organizationName: string;
    organizationSlug: string;
    roleId: string | null;
    roleSlug: string | null;
    roleName: string | null;
    joinedAt: string;
  }[];
  apiKeys: Record<string, unknown>[];
  auditEntries: {
    id: string;
    action: string;
    organizationId: string | null;
    metadata: Record<string, unknown>;
    createdAt: string;
  }[];
}

/** 403 ACCOUNT_SCHEDULED_FOR_DELETION naming the purge date in the message and the details. */
async function expectScheduled(response: Response, purgeAfter: string): Promise<void> {
  const body = await expectError(response, 403, 'ACCOUNT_SCHEDULED_FOR_DELETION');
  expect(body.message).toContain(purgeAfter);
  expect(body.details).toEqual([{ path: 'purgeAfter', message: purgeAfter }]);
}

/** The tenant-less audit entries an actor wrote (migration 0003: read back through app.actor_id, no tenant named). */

/** Rows of the non-RLS auth tables that name a user. */
function userRows(t: TestApp, userId: string) {
  return t.database.withOwner(async (owner) => ({
    users: await owner.selectFrom('users').selectAll().where('id', '=', userId).execute(),
    sessions: await owner.selectFrom('sessions').select(['id']).where('user_id', '=', userId).orderBy('id').execute(),
    accounts: await owner.selectFrom('accounts').select(['id']).where('user_id', '=', userId).orderBy('id').execute(),
    members: await owner
      .selectFrom('members')
      .select(['id', 'organization_id', 'role', 'role_id'])
      .where('user_id', '=', userId)
      .orderBy('id')
      .execute(),
  }));
}

function storedKeys(t: TestApp, tenantId: string) {
  return asOwnerInTenant(t, tenantId, (trx) =>
    trx
      .selectFrom('api_keys')
      .select(['id', 'created_by', 'revoked_at', 'key_hash', 'key_salt', 'lookup_digest'])
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at')
      .execute(),
  ) as Promise<
    {
      id: string;
      created_by: string;
      revoked_at: Date | null;
      key_hash: string;
      key_salt: string;
      lookup_digest: string;
    }[]
  >;
}

describe('account deletion (users/me)', { timeout: 120_000 }, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const schedule = async (user: SignedInUser, app: Pick<TestApp, 'app'> = t) =>
    expectStatus<Scheduled>(await call(app, '/api/users/me/deletion', { method: 'POST', jar: user.jar }), 202);
  const profileOf = async (user: SignedInUser) =>
    expectStatus<Profile>(await call(t, '/api/users/me', { jar: user.jar }), 200);
  const createKey = async (user: SignedInUser, name = `key ${crypto.randomUUID().slice(0, 6)}`) =>
    expectStatus<{ id: string; key: string; lastFour: string }>(
      await call(t, '/api/api-keys', { body: { name, scopes: ['roles:read'] }, jar: user.jar }),
      201,
    );
  const purge = (user: SignedInUser, body: unknown, app: Pick<TestApp, 'app'> = t) =>
    call(app, '/api/users/me/purge', { body, jar: user.jar });

  describe('scheduling', () => {
    it('answers 202 with deletedAt (now) and purgeAfter 30 days later, and writes a tenant-less account.deletion_scheduled entry', async () => {
      const user = await signedInUser(t);
      const body = await schedule(user);
      expect(Object.keys(body).sort()).toEqual(['deletedAt', 'purgeAfter']);
      expect(body.deletedAt).toBe(t.clock().toISOString());
      expect(new Date(body.purgeAfter).getTime() - new Date(body.deletedAt).getTime()).toBe(30 * DAY);

      const stored = await userRows(t, user.id);
      expect(new Date(stored.users[0]!.deleted_at).toISOString()).toBe(body.deletedAt);

      const entries = await accountAuditRows(t, user.id, 'account.deletion_scheduled');
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({ tenant_id: null, actor_id: user.id });
      expect(entries[0]!.metadata.userId).toBe(user.id);
    });

    it('uses ACCOUNT_DELETION_GRACE_DAYS for purgeAfter and for the date in the refusal', async () => {
      const seven = await createTestApp({
        database: t.database,
        clock: t.clock,
        env: { ACCOUNT_DELETION_GRACE_DAYS: '7' },
      });
      try {
        const user = await signedInUser(t);
        const body = await schedule(user, seven);
        expect(body.deletedAt).toBe(t.clock().toISOString());
        expect(new Date(body.purgeAfter).getTime() - new Date(body.deletedAt).getTime()).toBe(7 * DAY);
        await expectScheduled(
          await call(seven, '/api/auth/update-user', { body: { name: 'Renamed' }, jar: user.jar }),
          body.purgeAfter,
        );
      } finally {
        await seven.close();
      }
    });

    it('cannot be scheduled twice: the scheduling route is not on the allowlist', async () => {
      const user = await signedInUser(t);
      const first = await schedule(user);
      t.clock.advance(60_000);
      await expectScheduled(
        await call(t, '/api/users/me/deletion', { method: 'POST', jar: user.jar }),
        first.purgeAfter,
      );
      expect((await profileOf(user)).deletedAt).toBe(first.deletedAt);
      expect(await accountAuditRows(t, user.id, 'account.deletion_scheduled')).toHaveLength(1);
    });

    it('needs a session', async () => {
      await expectError(await call(t, '/api/users/me/deletion', { method: 'POST' }), 401, 'UNAUTHORIZED');
      await expectError(await call(t, '/api/users/me'), 401, 'UNAUTHORIZED');
      await expectError(await call(t, '/api/users/me/export'), 401, 'UNAUTHORIZED');
      await expectError(await call(t, '/api/users/me/reactivate', { method: 'POST' }), 401, 'UNAUTHORIZED');
      await expectError(
        await call(t, '/api/users/me/purge', { body: { confirmEmail: 'x@example.test' } }),
        401,
        'UNAUTHORIZED',
      );
    });
  });

  describe('a scheduled account', () => {
    let org: TestOrganization;
    let user: SignedInUser;
    let scheduled: Scheduled;

    beforeAll(async () => {
      org = await createOrganization(t, await signedInUser(t, { name: 'Sally Scheduled' }));
      user = org.owner;
    });

    const refusable = (label: string) => [
      () => call(t, '/api/roles', { jar: user.jar }),
      () => call(t, '/api/members', { jar: user.jar }),
      () => call(t, '/api/api-keys', { jar: user.jar }),
      () => call(t, '/api/audit-logs', { jar: user.jar }),
      () => call(t, '/api/api-keys', { body: { name: 'while scheduled', scopes: ['roles:read'] }, jar: user.jar }),
      () =>
        call(t, '/api/roles', {
          body: { name: `Scheduled ${crypto.randomUUID().slice(0, 6)}`, description: 'x', permissions: ['roles:read'] },
          jar: user.jar,
        }),
      () =>
        call(t, '/api/auth/organization/create', {
          body: { name: 'Later', slug: `later-${crypto.randomUUID().slice(0, 8)}` },
          jar: user.jar,
        }),
      () => call(t, '/api/auth/update-user', { body: { name: `Renamed ${label}` }, jar: user.jar }),
      () => call(t, '/api/auth/organization/set-active', { body: { organizationId: org.id }, jar: user.jar }),
      () => call(t, '/api/auth/list-sessions', { jar: user.jar }),
    ];

    it('works normally before it is scheduled (control)', async () => {
      for (const request of refusable('control')) {
        const response = await request();
        expect(response.status, `${response.url} ${await response.clone().text()}`).toBeLessThan(300);
      }
    });

    it('is refused with 403 ACCOUNT_SCHEDULED_FOR_DELETION and the purge date on the very next request, and nothing is done', async () => {
      const keysBefore = (await storedKeys(t, org.id)).length;
      const orgsBefore = (await userRows(t, user.id)).members.length;
      const nameBefore = (await profileOf(user)).name;

      scheduled = await schedule(user);
      for (const request of refusable('while scheduled')) await expectScheduled(await request(), scheduled.purgeAfter);

      expect((await storedKeys(t, org.id)).length).toBe(keysBefore);
      expect((await userRows(t, user.id)).members.length).toBe(orgsBefore);
      expect((await profileOf(user)).name).toBe(nameBefore);
    });

    it('still reaches the allowlist: profile, session, export, purge confirmation, sign-out and signing in again', async () => {
      const profile = await profileOf(user);
      expect(Object.keys(profile).sort()).toEqual(['deletedAt', 'email', 'emailVerified', 'id', 'name', 'role']);
      expect(profile).toEqual({
        id: user.id,
        email: user.email,
        name: 'Renamed control',
        role: 'user',
        emailVerified: true,
        deletedAt: scheduled.deletedAt,
      });

      const session = await expectStatus<{ user: { id: string } } | null>(
        await call(t, '/api/session', { jar: user.jar }),
        200,
      );
      expect(session?.user.id).toBe(user.id);

      const exported = await expectStatus<Export>(await call(t, '/api/users/me/export', { jar: user.jar }), 200);
      expect(exported.profile.deletedAt).toBe(scheduled.deletedAt);

      // Reaches the handler (400 for the wrong email), not the deletion gate.
      await expectError(await purge(user, { confirmEmail: 'someone-else@example.test' }), 400, 'VALIDATION_ERROR');
      expect((await userRows(t, user.id)).users).toHaveLength(1);

      const second = new CookieJar();
      await expectStatus(
        await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, jar: second }),
        200,
      );
      await expectStatus(await call(t, '/api/users/me', { jar: second }), 200);
      await expectScheduled(await call(t, '/api/roles', { jar: second }), scheduled.purgeAfter);

      await expectStatus(await call(t, '/api/auth/sign-out', { method: 'POST', body: {}, jar: second }), 200);
      await expectError(await call(t, '/api/users/me', { jar: second }), 401, 'UNAUTHORIZED');
      expect(await expectStatus(await call(t, '/api/session', { jar: second }), 200)).toBeNull();
    });

    it('reactivates: 200 profile with deletedAt null, account.reactivated, and the routes work again on the next request', async () => {
      const response = await call(t, '/api/users/me/reactivate', { method: 'POST', jar: user.jar });
      const profile = await expectStatus<Profile>(response, 200);
      expect(profile).toEqual({
        id: user.id,
        email: user.email,
        name: 'Renamed control',
        role: 'user',
        emailVerified: true,
        deletedAt: null,
      });
      expect((await userRows(t, user.id)).users[0]!.deleted_at).toBeNull();

      const entries = await accountAuditRows(t, user.id, 'account.reactivated');
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({ tenant_id: null, actor_id: user.id, metadata: { userId: user.id } });

      for (const request of refusable('again')) {
        const again = await request();
        expect(again.status, `${again.url} ${await again.clone().text()}`).toBeLessThan(300);
      }
    });

    it('reactivating an account that is not scheduled answers 200 and writes no audit entry', async () => {
      const profile = await expectStatus<Profile>(
        await call(t, '/api/users/me/reactivate', { method: 'POST', jar: user.jar }),
        200,
      );
      expect(profile.deletedAt).toBeNull();
      expect(await accountAuditRows(t, user.id, 'account.reactivated')).toHaveLength(1);
    });
  });

  describe('export', () => {
    it("holds the user's profile, memberships with organization and role, keys' metadata and own audit entries, and nobody else's data", async () => {
      const org = await createOrganization(t, await signedInUser(t, { name: 'Erin Exporter' }));
      const user = org.owner;
      // Another user of the same organization, with their own key and actions.
      const other = await newMember(t, org, 'admin', { name: 'Oscar Other' });
      const othersKey = await createKey(other, 'not yours');
      const othersRole = await expectStatus<{ id: string }>(
        await call(t, '/api/roles', {
          body: { name: 'Other Role', description: 'by other', permissions: ['roles:read'] },
          jar: other.jar,
        }),
        201,
      );
      // A second organization, owned by the other user, which the user joins as a member.
      const second = await createOrganization(t, other, { name: 'Second Org' });
      const secondMemberId = await addMember(t, second, user, 'member');
      await setActive(t, user, org.id);
      const othersSecondKey = await createKey(other, 'also not yours');

      const mine = await createKey(user, 'mine');
      const revoked = await createKey(user, 'mine, revoked');
      await expectStatus(await call(t, `/api/api-keys/${revoked.id}`, { method: 'DELETE', jar: user.jar }), 200);
      const scheduled = await schedule(user);

      const response = await call(t, '/api/users/me/export', { jar: user.jar });
      const text = await response.clone().text();
      const body = await expectStatus<Export>(response, 200);
      expect(Object.keys(body).sort()).toEqual([
        'apiKeys',
        'auditEntries',
        'memberships',
        'passkeys',
        'profile',
        'twoFactor',
      ]);
      // No second factor enrolled (tests/auth/second-factor.test.ts covers the enrolled case).
      expect(body.twoFactor).toBeNull();
      expect(body.passkeys).toEqual([]);

      expect(body.profile).toEqual({
        id: user.id,
        email: user.email,
        name: 'Erin Exporter',
        role: 'user',
        emailVerified: true,
        deletedAt: scheduled.deletedAt,
      });

      expect(body.memberships).toHaveLength(2);
      expect(body.memberships).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            memberId: org.ownerMemberId,
            organizationId: org.id,
            organizationName: org.name,
            organizationSlug: org.slug,
            roleSlug: 'owner',
            roleName: 'Owner',
          }),
          expect.objectContaining({
            memberId: secondMemberId,
            organizationId: second.id,
            organizationName: 'Second Org',
            roleSlug: 'member',
            roleName: 'Member',
          }),
        ]),
      );

      // Metadata of the keys the user created, never the secret material.
      expect(body.apiKeys.map((k) => k.id).sort()).toEqual([mine.id, revoked.id].sort());
      for (const key of body.apiKeys) {
        expect(Object.keys(key).sort()).toEqual([
          'createdAt',
          'expiresAt',
          'id',
          'lastFour',
          'name',
          'organizationId',
          'revokedAt',
          'scopes',
        ]);
        expect(key.organizationId).toBe(org.id);
      }
      expect(body.apiKeys.find((k) => k.id === mine.id)).toMatchObject({
        name: 'mine',
        scopes: ['roles:read'],
        lastFour: mine.lastFour,
        revokedAt: null,
      });
      expect(body.apiKeys.find((k) => k.id === revoked.id)?.revokedAt).toEqual(expect.any(String));
      expect(text).not.toMatch(/sk_live_/);
      expect(text).not.toMatch(/keyHash|keySalt|lookupDigest|key_hash|key_salt|lookup_digest/);
      for (const stored of (await storedKeys(t, org.id)).filter((k) => k.created_by === user.id)) {
        expect(text).not.toContain(stored.key_hash);
        expect(text).not.toContain(stored.key_salt);
        expect(text).not.toContain(stored.lookup_digest);
      }

      // The audit entries the user acted in, tenant-less ones included.
      const actions = body.auditEntries.map((e) => `${e.action}@${e.organizationId}`);
      expect(actions).toEqual(
        expect.arrayContaining([
          `api_key.created@${org.id}`,
          `api_key.revoked@${org.id}`,
          `account.deletion_scheduled@null`,
        ]),
      );
      const ownIds = new Set(
        [...(await auditRows(t, org.id)), ...(await auditRows(t, second.id)), ...(await accountAuditRows(t, user.id))]
          .filter((r) => r.actor_id === user.id)
          .map((r) => r.id),
      );
      expect(new Set(body.auditEntries.map((e) => e.id))).toEqual(ownIds);

      // Nothing that belongs to the other user appears anywhere.
      const othersAudit = [...(await auditRows(t, org.id)), ...(await auditRows(t, second.id))].filter(
        (r) => r.actor_id === other.id,
      );
      expect(othersAudit.length).toBeGreaterThanOrEqual(3);
      for (const foreign of [
        other.id,
        other.email,
        other.name,
        other.memberId,
        othersKey.id,
        othersSecondKey.id,
        othersRole.id,
        'not yours',
        ...othersAudit.map((r) => r.id),
      ]) {
        expect(text).not.toContain(foreign);
      }
    });
  });

  describe('purge', () => {
    it('is refused with 400 while the account is not scheduled', async () => {
      const user = await signedInUser(t);
      await expectError(await purge(user, { confirmEmail: user.email }), 400, 'VALIDATION_ERROR');
      expect((await userRows(t, user.id)).users).toHaveLength(1);
      await expectStatus(await call(t, '/api/users/me', { jar: user.jar }), 200);
    });

    it('is refused with 400 when confirmEmail differs, is missing, or the body has unknown fields', async () => {
      const user = await signedInUser(t);
      await schedule(user);
      await expectError(await purge(user, { confirmEmail: `x${user.email}` }), 400, 'VALIDATION_ERROR');
      await expectError(await purge(user, {}), 400, 'VALIDATION_ERROR');
      await expectError(await purge(user, { confirmEmail: user.email, force: true }), 400, 'VALIDATION_ERROR');
      expect((await userRows(t, user.id)).users).toHaveLength(1);
      await expectStatus(await call(t, '/api/users/me', { jar: user.jar }), 200);
    });

    it('removes the account: user, sessions, accounts and memberships go, keys are revoked with audit entries, a solo organization is deleted', async () => {
      // The user owns an organization alone and is an Admin of another one.
      const solo = await createOrganization(t, await signedInUser(t, { name: 'Paula Purged' }));
      const user = solo.owner;
      const soloKey = await createKey(user, 'solo key');
      const shared = await createOrganization(t, await signedInUser(t, { name: 'Sam Stays' }));
      await addMember(t, shared, user, 'admin');
      const sharedKey = await createKey(user, 'shared key');
      const stayersKey = await createKey(shared.owner, 'stayer key');
      const hook = await createWebhook(t, shared.owner, {
        url: 'https://hooks.example.com/purge',
        events: ['member.removed'],
      });
      const membership = (
        await expectStatus<{ id: string; userId: string }[]>(
          await call(t, '/api/members', { jar: shared.owner.jar }),
          200,
        )
      ).find((m) => m.userId === user.id)!;
      const secondSession = new CookieJar();
      await expectStatus(
        await call(t, '/api/auth/sign-in/email', {
          body: { email: user.email, password: PASSWORD },
          jar: secondSession,
        }),
        200,
      );

      await schedule(user);
      const before = await userRows(t, user.id);
      expect(before.sessions.length).toBeGreaterThanOrEqual(2);
      expect(before.accounts).toHaveLength(1);
      expect(before.members).toHaveLength(2);

      const body = await expectStatus(await purge(user, { confirmEmail: `  ${user.email.toUpperCase()} ` }), 200);
      expect(body).toEqual({ purged: true });

      const after = await userRows(t, user.id);
      expect(after).toEqual({ users: [], sessions: [], accounts: [], members: [] });
      await expectError(await call(t, '/api/users/me', { jar: user.jar }), 401, 'UNAUTHORIZED');
      expect(await expectStatus(await call(t, '/api/session', { jar: user.jar }), 200)).toBeNull();
      expect(await expectStatus(await call(t, '/api/session', { jar: secondSession }), 200)).toBeNull();
      expect(
        (await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD } })).status,
      ).toBe(401);

      // Keys revoked, each with an api_key.revoked entry in its organization; the other member's key untouched.
      const sharedKeys = await storedKeys(t, shared.id);
      expect(sharedKeys.find((k) => k.id === sharedKey.id)?.revoked_at).not.toBeNull();
      expect(sharedKeys.find((k) => k.id === stayersKey.id)?.revoked_at).toBeNull();
      expect((await storedKeys(t, solo.id)).find((k) => k.id === soloKey.id)?.revoked_at).not.toBeNull();
      const sharedRevoked = await auditRows(t, shared.id, 'api_key.revoked');
      expect(sharedRevoked).toHaveLength(1);
      expect(sharedRevoked[0]).toMatchObject({
        actor_id: user.id,
        metadata: { keyId: sharedKey.id, name: 'shared key' },
      });
      const soloRevoked = await auditRows(t, solo.id, 'api_key.revoked');
      expect(soloRevoked.map((r) => r.metadata.keyId)).toEqual([soloKey.id]);

      // The organization that stays hears that it lost a member, as when one leaves: audited, and its webhook event queued.
      const removed = await auditRows(t, shared.id, 'member.removed');
      expect(removed).toHaveLength(1);
      expect(removed[0]).toMatchObject({
        actor_id: user.id,
        metadata: { userId: user.id, memberId: membership.id, reason: 'account_purged' },
      });
      expect(
        (await deliveriesOf(t, shared.owner, hook.id)).map((d) => ({ eventId: d.eventId, eventType: d.eventType })),
      ).toEqual([{ eventId: removed[0]!.id, eventType: 'member.removed' }]);

      // The account.purged entry names nothing but the user id.
      const purged = await accountAuditRows(t, user.id, 'account.purged');
      expect(purged).toHaveLength(1);
      expect(purged[0]!.metadata).toEqual({ userId: user.id });
      expect(JSON.stringify(purged[0])).not.toContain(user.email);
      expect(JSON.stringify(purged[0])).not.toContain('Paula');

      // The organization where the user was alone is gone; the shared one stays, without them.
      const orgs = await t.database.withOwner((owner) =>
        owner.selectFrom('organizations').select('id').where('id', 'in', [solo.id, shared.id]).execute(),
      );
      expect(orgs.map((o: { id: string }) => o.id)).toEqual([shared.id]);
      const members = await expectStatus<{ userId: string }[]>(
        await call(t, '/api/members', { jar: shared.owner.jar }),
        200,
      );
      expect(members.map((m) => m.userId)).toEqual([shared.owner.id]);
    });

    it('is refused with 409 OWNERSHIP_CONSTRAINT for the only Owner of an organization with other members, and nothing changes', async () => {
      const org = await createOrganization(t, await signedInUser(t, { name: 'Olga Owner' }));
      const user = org.owner;
      const member = await newMember(t, org, 'member');
      const key = await createKey(user, 'kept');
      await schedule(user);
      const before = await userRows(t, user.id);
      const auditBefore = await auditRows(t, org.id);

      const body = await expectError(await purge(user, { confirmEmail: user.email }), 409, 'OWNERSHIP_CONSTRAINT');
      expect(body.details).toEqual([{ path: 'organizationId', message: org.id }]);

      expect(await userRows(t, user.id)).toEqual(before);
      expect(await auditRows(t, org.id)).toEqual(auditBefore);
      expect(await accountAuditRows(t, user.id, 'account.purged')).toEqual([]);
      const keys = await expectStatus<{ id: string; revokedAt: string | null }[]>(
        await call(t, '/api/api-keys', { jar: member.jar }),
        200,
      );
      expect(keys.find((k) => k.id === key.id)?.revokedAt).toBeNull();
      const members = await expectStatus<{ userId: string; roleSlug: string }[]>(
        await call(t, '/api/members', { jar: member.jar }),
        200,
      );
      expect(members.find((m) => m.userId === user.id)?.roleSlug).toBe('owner');
      await expectStatus(await call(t, '/api/users/me', { jar: user.jar }), 200);
    });

    it('is in the auth rate-limit tier: the third call within the window answers 429', async () => {
      const limited = await createTestApp({
        database: t.database,
        clock: t.clock,
        env: { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_AUTH_LIMIT: '2' },
      });
      try {
        const user = await signedInUser(t);
        await schedule(user);
        await expectError(await purge(user, { confirmEmail: 'wrong@example.test' }, limited), 400, 'VALIDATION_ERROR');
        await expectError(await purge(user, { confirmEmail: 'wrong@example.test' }, limited), 400, 'VALIDATION_ERROR');
        const refused = await purge(user, { confirmEmail: user.email }, limited);
        await expectError(refused, 429, 'RATE_LIMITED');
        expect(refused.headers.get('x-ratelimit-limit')).toBe('2');
        expect((await userRows(t, user.id)).users).toHaveLength(1);
        // The profile route is not in the auth tier.
        await expectStatus(await call(limited, '/api/users/me', { jar: user.jar }), 200);
      } finally {
        await limited.close();
      }
    });
  });
});
