import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeAccount, purgeExpiredAccounts } from '../../../src/db/queries/accounts.js';
import { ApiError } from '../../../src/shared/errors.js';
import { createMemoryLogger } from '../../../src/shared/logger.js';
import { runInRequestScope } from '../../../src/shared/request-scope.js';
import { createTestApp, type TestApp } from '../../support/app.js';
import { call, expectStatus } from '../../support/http.js';
import { addMember, auditRows, createOrganization, newMember, type TestOrganization } from '../../support/orgs.js';
import { type SignedInUser, signedInUser } from '../../support/users.js';

/**
 * purgeAccount and purgeExpiredAccounts (src/db/queries/accounts.ts) on both
 * engines: PGlite here, and a real PostgreSQL server under
 * `npm run test:integration`, where the schema owner is bound by FORCE ROW
 * LEVEL SECURITY like the runtime role, and the cascades from a deleted
 * organization run through row-level-secured tables.
 */

const DAY = 24 * 60 * 60 * 1000;

const PLAIN_TABLES = [
  'users',
  'sessions',
  'accounts',
  'verifications',
  'organizations',
  'members',
  'invitations',
] as const;

/** Reads `fn` as the schema owner in one transaction with the given settings (FORCE RLS binds a non-superuser owner). */
function asOwnerWith<T>(
  t: TestApp,
  settings: { tenant?: string; actor?: string },
  fn: (trx: Kysely<any>) => Promise<T>,
): Promise<T> {
  return t.database.withOwner((owner) =>
    owner.transaction().execute(async (trx) => {
      await sql`select set_config('app.tenant_id', ${settings.tenant ?? ''}, true), set_config('app.actor_id', ${settings.actor ?? ''}, true)`.execute(
        trx,
      );
      return fn(trx);
    }),
  );
}

/**
 * Every row of every table, as far as the owner can see them: the auth tables
 * directly; roles, role_permissions, api_keys and the audit log per
 * organization (tenant named); tenant-less audit entries per user (actor named).
 */
async function snapshot(t: TestApp, tenants: string[], actors: string[]) {
  const plain = await t.database.withOwner(async (owner) => {
    const out: Record<string, unknown[]> = {};
    for (const table of PLAIN_TABLES) out[table] = await owner.selectFrom(table).selectAll().orderBy('id').execute();
    return out;
  });
  const perTenant: Record<string, unknown> = {};
  for (const tenant of [...tenants].sort()) {
    perTenant[tenant] = await asOwnerWith(t, { tenant }, async (trx) => ({
      roles: await trx.selectFrom('roles').selectAll().where('tenant_id', '=', tenant).orderBy('id').execute(),
      rolePermissions: await trx
        .selectFrom('role_permissions as rp')
        .innerJoin('roles as r', 'r.id', 'rp.role_id')
        .select(['rp.role_id', 'rp.permission_id'])
        .where('r.tenant_id', '=', tenant)
        .orderBy('rp.role_id')
        .orderBy('rp.permission_id')
        .execute(),
      apiKeys: await trx.selectFrom('api_keys').selectAll().where('tenant_id', '=', tenant).orderBy('id').execute(),
      audit: await trx.selectFrom('audit_logs').selectAll().where('tenant_id', '=', tenant).orderBy('id').execute(),
    }));
  }
  const perActor: Record<string, unknown> = {};
  for (const actor of [...actors].sort()) {
    perActor[actor] = await asOwnerWith(t, { actor }, (trx) =>
      trx
        .selectFrom('audit_logs')
        .selectAll()
        .where('tenant_id', 'is', null)
        .where('actor_id', '=', actor)
        .orderBy('id')
        .execute(),
    );
  }
  return { plain, perTenant, perActor };
}

describe('purgeAccount', { timeout: 120_000 }, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const createKey = async (user: SignedInUser, name: string) =>
    expectStatus<{ id: string }>(
      await call(t, '/api/api-keys', { body: { name, scopes: ['roles:read'] }, jar: user.jar }),
      201,
    );

  const keysOf = (tenant: string) =>
    asOwnerWith(t, { tenant }, (trx) =>
      trx.selectFrom('api_keys').select(['id', 'created_by', 'revoked_at']).where('tenant_id', '=', tenant).execute(),
    ) as Promise<{ id: string; created_by: string; revoked_at: Date | null }[]>;

  /**
   * A user who owns `stuck` together with another member, owns `solo` alone
   * and is an Admin of `shared`; with a key in each and an outstanding
   * password-reset token.
   */
  async function busyUser() {
    const stuck = await createOrganization(t, await signedInUser(t, { name: 'Busy Owner' }));
    const user = stuck.owner;
    const member = await newMember(t, stuck, 'member');
    const stuckKey = await createKey(user, 'stuck key');
    const solo = await createOrganization(t, user);
    const soloKey = await createKey(user, 'solo key');
    const shared = await createOrganization(t, await signedInUser(t, { name: 'Shared Owner' }));
    await addMember(t, shared, user, 'admin');
    const sharedKey = await createKey(user, 'shared key');
    await expectStatus(
      await call(t, '/api/auth/request-password-reset', { body: { email: user.email, redirectTo: '/reset' } }),
      200,
    );
    return { user, member, stuck, solo, shared, keys: { stuckKey, soloKey, sharedKey } };
  }

  const tenantsOf = (...orgs: TestOrganization[]) => orgs.map((o) => o.id);

  it('refuses the only Owner of an organization with other members (OWNERSHIP_CONSTRAINT) and changes nothing anywhere', async () => {
    const { user, member, stuck, solo, shared } = await busyUser();
    const resets = await t.database.withOwner((owner) =>
      owner.selectFrom('verifications').select('id').where('value', '=', user.id).execute(),
    );
    expect(resets).toHaveLength(1);
    const tenants = tenantsOf(stuck, solo, shared);
    const actors = [user.id, member.id, shared.owner.id];
    const before = await snapshot(t, tenants, actors);

    const error = await purgeAccount(t.db, { userId: user.id, actorId: user.id }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe('OWNERSHIP_CONSTRAINT');
    expect((error as ApiError).details).toEqual([{ path: 'organizationId', message: stuck.id }]);

    expect(await snapshot(t, tenants, actors)).toEqual(before);
  });

  it('is all-or-nothing: a failure after the keys are revoked and the solo organization is deleted rolls all of it back', async () => {
    const { user, member, stuck, solo, shared } = await busyUser();
    // The other member leaves `stuck`, so the ownership rule no longer blocks (it is now a solo organization too).
    await expectStatus(
      await call(t, '/api/auth/organization/remove-member', {
        body: { memberIdOrEmail: member.memberId, organizationId: stuck.id },
        jar: user.jar,
      }),
      200,
    );
    const tenants = tenantsOf(stuck, solo, shared);
    const actors = [user.id, member.id, shared.owner.id];
    const before = await snapshot(t, tenants, actors);

    // A real fault in the last steps of the purge: the server refuses to delete this one user row.
    await t.database.withOwner(async (owner) => {
      await sql`
        create function test_refuse_user_delete() returns trigger language plpgsql as $$
        begin
          if old.id = ${sql.lit(user.id)}::uuid then raise exception 'test: refusing to delete %', old.id; end if;
          return old;
        end $$`.execute(owner);
      await sql`create trigger test_refuse_user_delete before delete on users for each row execute function test_refuse_user_delete()`.execute(
        owner,
      );
    });
    try {
      await expect(purgeAccount(t.db, { userId: user.id, actorId: user.id })).rejects.toThrow(/refusing to delete/);
    } finally {
      await t.database.withOwner(async (owner) => {
        await sql`drop trigger if exists test_refuse_user_delete on users`.execute(owner);
        await sql`drop function if exists test_refuse_user_delete()`.execute(owner);
      });
    }

    expect(await snapshot(t, tenants, actors)).toEqual(before);

    // Without the fault the same purge goes through: the rollback above was not a no-op purge.
    await purgeAccount(t.db, { userId: user.id, actorId: user.id });
    const after = await snapshot(t, tenants, actors);
    expect(after).not.toEqual(before);
    expect((after.plain.users as { id: string }[]).some((u) => u.id === user.id)).toBe(false);
  });

  it('revokes the keys of a user in every organization, with an api_key.revoked entry in each, and deletes the solo organization with its roles', async () => {
    const first = await createOrganization(t, await signedInUser(t, { name: 'First Owner' }));
    const second = await createOrganization(t, await signedInUser(t, { name: 'Second Owner' }));
    const user = await newMember(t, first, 'admin', { name: 'Keith Keys' });
    const firstKey = await createKey(user, 'first key');
    await addMember(t, second, user, 'admin');
    const secondKey = await createKey(user, 'second key');
    const solo = await createOrganization(t, user);
    const soloKey = await createKey(user, 'solo key');
    const ownersKey = await createKey(first.owner, 'owner key');
    const roleCount = async (tenant: string) =>
      (
        await asOwnerWith(t, { tenant }, (trx) =>
          trx.selectFrom('roles').select('id').where('tenant_id', '=', tenant).execute(),
        )
      ).length;
    expect(await roleCount(solo.id)).toBe(4);

    // The request id travels in the request scope, as in a request, not as an argument.
    await runInRequestScope({ requestId: 'purge-test-request', apiKeyId: null }, () =>
      purgeAccount(t.db, { userId: user.id, actorId: user.id }),
    );

    for (const [org, key] of [
      [first, firstKey],
      [second, secondKey],
      [solo, soloKey],
    ] as const) {
      const stored = (await keysOf(org.id)).find((k) => k.id === key.id);
      expect(stored?.revoked_at, org.name).not.toBeNull();
      const revoked = await auditRows(t, org.id, 'api_key.revoked');
      expect(revoked, org.name).toHaveLength(1);
      expect(revoked[0]).toMatchObject({
        tenant_id: org.id,
        actor_id: user.id,
        metadata: { keyId: key.id, reason: 'account_purged' },
      });
      expect(JSON.stringify(revoked[0]!.metadata)).not.toMatch(/sk_live_|hash|salt/i);
    }
    expect((await keysOf(first.id)).find((k) => k.id === ownersKey.id)?.revoked_at).toBeNull();

    const purged = await asOwnerWith(t, { actor: user.id }, (trx) =>
      trx
        .selectFrom('audit_logs')
        .selectAll()
        .where('action', '=', 'account.purged')
        .where('actor_id', '=', user.id)
        .execute(),
    );
    expect(purged).toHaveLength(1);
    expect(purged[0]).toMatchObject({
      tenant_id: null,
      metadata: { userId: user.id },
      request_id: 'purge-test-request',
    });
    expect(Object.keys(purged[0]!.metadata)).toEqual(['userId']);

    const left = await t.database.withOwner(async (owner) => ({
      users: await owner.selectFrom('users').select('id').where('id', '=', user.id).execute(),
      members: await owner.selectFrom('members').select('id').where('user_id', '=', user.id).execute(),
      organizations: await owner
        .selectFrom('organizations')
        .select('id')
        .where('id', 'in', [first.id, second.id, solo.id])
        .orderBy('id')
        .execute(),
    }));
    expect(left.users).toEqual([]);
    expect(left.members).toEqual([]);
    expect(left.organizations.map((o: { id: string }) => o.id)).toEqual([first.id, second.id].sort());
    expect(await roleCount(solo.id)).toBe(0);
    expect(await roleCount(first.id)).toBe(4);
    expect(await roleCount(second.id)).toBe(4);
  });

  it('with dueBy (the scheduled job) re-checks the schedule under the row lock: an account reactivated or no longer due since it was picked is left alone', async () => {
    const T = Date.UTC(2036, 0, 1);
    t.clock.set(T);
    const never = await signedInUser(t);
    const reactivated = await signedInUser(t);
    const scheduled = await signedInUser(t);
    await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: reactivated.jar }), 202);
    await expectStatus(await call(t, '/api/users/me/reactivate', { method: 'POST', jar: reactivated.jar }), 200);
    await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: scheduled.jar }), 202);
    const exists = async (id: string) =>
      (await t.database.withOwner((owner) => owner.selectFrom('users').select('id').where('id', '=', id).execute()))
        .length === 1;

    expect(await purgeAccount(t.db, { userId: never.id, actorId: null, dueBy: new Date(T + 100 * DAY) })).toBe(false);
    expect(await purgeAccount(t.db, { userId: reactivated.id, actorId: null, dueBy: new Date(T + 100 * DAY) })).toBe(
      false,
    );
    expect(await purgeAccount(t.db, { userId: scheduled.id, actorId: null, dueBy: new Date(T - 1) })).toBe(false);
    expect(await exists(never.id)).toBe(true);
    expect(await exists(reactivated.id)).toBe(true);
    expect(await exists(scheduled.id)).toBe(true);

    expect(await purgeAccount(t.db, { userId: scheduled.id, actorId: null, dueBy: new Date(T) })).toBe(true);
    expect(await exists(scheduled.id)).toBe(false);
    // Gone already (a concurrent run, or its owner): nothing to do for the job; a direct call says NOT_FOUND.
    expect(await purgeAccount(t.db, { userId: scheduled.id, actorId: null, dueBy: new Date(T) })).toBe(false);
    await expect(purgeAccount(t.db, { userId: scheduled.id, actorId: null })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('purgeExpiredAccounts purges the due accounts (actor: none) and leaves the others', async () => {
    const T = Date.UTC(2035, 0, 1);
    t.clock.set(T);
    const due = await signedInUser(t);
    const org = await createOrganization(t, due);
    const key = await createKey(due, 'due key');
    await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: due.jar }), 202);
    t.clock.set(T + DAY);
    // Signed in when it schedules its deletion (a sensitive action needs a recent sign-in).
    const notYet = await signedInUser(t);
    await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: notYet.jar }), 202);

    const logger = createMemoryLogger();
    expect(await purgeExpiredAccounts(t.db, { now: new Date(T + 30 * DAY), graceDays: 30, logger })).toEqual({
      purged: 1,
      failed: 0,
    });

    const users = await t.database.withOwner((owner) =>
      owner.selectFrom('users').select('id').where('id', 'in', [due.id, notYet.id]).execute(),
    );
    expect(users.map((u: { id: string }) => u.id)).toEqual([notYet.id]);
    expect((await keysOf(org.id)).find((k) => k.id === key.id)?.revoked_at).not.toBeNull();
    const revoked = await auditRows(t, org.id, 'api_key.revoked');
    expect(revoked).toHaveLength(1);
    expect(revoked[0]).toMatchObject({ actor_id: null, metadata: { keyId: key.id } });
    expect(logger.lines.find((l) => l.event === 'account.purge_run')).toMatchObject({ due: 1, purged: 1, failed: 0 });
  });
});
