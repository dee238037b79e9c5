/**
 * Two instances of the real Node entry (`src/entries/server.ts` under tsx, as `npm
 * start` runs it), each its own process, on ONE PostgreSQL database and ONE
 * rate-limit store (the Upstash-protocol test server over the real Redis).
 *
 * Each process keeps its own session-state cache (src/auth/session-state-cache.ts),
 * cleared by `NOTIFY gatehouse_session_state` (migrations/0005) on its LISTEN
 * connection. What this file proves is that a change made through instance A
 * bites on the very next request through instance B, whose cache was warmed
 * just before by reading through it:
 *
 *   1. a revoked session (revoke-sessions from another session; sign-out of the same one;
 *      a password change from another session, which ends the others),
 *   2. a member's role change (admin -> viewer),
 *   3. a member's removal, also by the organization's directory (SCIM `active: false`:
 *      their session and their API key),
 *
 * and that the instances share what must be shared:
 *
 *   4. the auth-tier budget of one client address (3 failures on A + 2 on B exhaust it),
 *   5. the purge job run on both at the same moment: each due account purged once,
 *   6. webhook deliveries: both instances' deliverers (woken at commit by
 *      NOTIFY gatehouse_webhooks) at work on one outbox send each event
 *      exactly once to a receiver that answers 200.
 *
 * A third instance, C, runs with RATE_LIMIT_ENABLED=false (docs/api.md "Rate limiting":
 * a supported setting): nothing then stands between a request's arrival and
 * its session lookup, so C shows whether "the next request" holds when the
 * notification has no head start. Case 6 flips a member's role through A many
 * times and reads it back at once through B and C.
 *
 * Everything goes through HTTP as a client sends it (Origin = APP_URL, a
 * cookie jar, the mailed links read from the instances' development-email
 * log lines). The owner connection only inspects (and creates/drops the database).
 */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import * as flows from '../support/instance-flows.js';
import { addressesFor, join, PASSWORD, signIn, type User } from '../support/instance-flows.js';
import { type Answer, type Instance, START_TIMEOUT_MS, sleep, startInstance } from '../support/instances.js';
import { testServers, withDatabaseName } from '../support/servers.js';
import { startUpstashServer, type UpstashServer } from '../support/upstash-server.js';
import { startReceiver, verified } from '../support/webhooks.js';

const CRON_SECRET = `cron-${crypto.randomUUID()}`;
/**
 * This run's addresses: each in a /64 of its own (the limiter keys IPv6
 * clients by their /64), unique, so the shared Redis (fixed key prefix
 * `gatehouse:rl`) never mixes runs.
 */
const RUN = crypto.randomUUID().replaceAll('-', '').slice(0, 8);
const freshAddress = addressesFor(RUN);

/** The status must be `status`; the message carries the answer when it is not. */
function expectAnswer(answer: Answer, status: number): any {
  expect(answer.status, `${answer.status} ${answer.text.slice(0, 300)}`).toBe(status);
  return answer.body;
}

function expectError(answer: Answer, status: number, code: string): void {
  expect({ status: answer.status, code: answer.body?.code }, answer.text.slice(0, 300)).toEqual({ status, code });
}

/** Sign-up through `via`, the verification link it mailed, sign-in (tests/support/instance-flows.ts). */
const newUser = (via: Instance, label: string): Promise<User> => flows.newUser(via, label, RUN, freshAddress());
const newOrganization = (via: Instance, owner: User): Promise<string> => flows.newOrganization(via, owner, RUN);

describe('two Node instances on one PostgreSQL and one Redis', { timeout: 180_000 }, () => {
  let databaseName: string;
  let ownerUrl: string;
  let owner: postgres.Sql;
  let upstash: UpstashServer;
  let a: Instance;
  let b: Instance;
  let c: Instance;

  beforeAll(
    async () => {
      const servers = testServers();
      if (!servers)
        throw new Error('runs only in the integration suite (TEST_PG_URL, TEST_PG_APP_URL, TEST_REDIS_URL)');
      databaseName = `gatehouse_multi_${crypto.randomUUID().replaceAll('-', '')}`;
      const admin = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database "${databaseName}"`);
      await admin.end();
      ownerUrl = withDatabaseName(servers.pgUrl, databaseName);
      const appUrl = withDatabaseName(servers.pgAppUrl, databaseName);

      // Migrated once, before either instance starts (both run with MIGRATE_ON_START=false).
      const migrating = await openPostgres({ url: appUrl, migrationUrl: ownerUrl, poolMax: 1 });
      try {
        await migrateToLatest(migrating);
      } finally {
        await migrating.close();
      }
      owner = postgres(ownerUrl, { max: 2, onnotice: () => {} });

      const token = crypto.randomUUID();
      upstash = await startUpstashServer({ redisUrl: servers.redisUrl, token });
      const env = {
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        // One secret for both: a cookie signed by one instance is read by the other.
        AUTH_SECRET: `multi-instance-${crypto.randomUUID()}-${crypto.randomUUID()}`,
        DATABASE_URL: appUrl,
        DATABASE_MIGRATION_URL: ownerUrl,
        MIGRATE_ON_START: 'false',
        KV_REST_API_URL: upstash.url,
        KV_REST_API_TOKEN: token,
        RATE_LIMIT_ENABLED: 'true',
        // Every user has an address (and, signed in, an id) of its own; the
        // global tier is raised so no case meets it, the auth tier keeps its default.
        RATE_LIMIT_GLOBAL_LIMIT: '100000',
        RATE_LIMIT_AUTH_LIMIT: '5',
        RATE_LIMIT_AUTH_TTL: '60',
        RATE_LIMIT_AUTH_BLOCK_DURATION: '300',
        CRON_SECRET,
        // Scheduling deletion makes the account due at once (case 5).
        ACCOUNT_DELETION_GRACE_DAYS: '0',
        // The webhook receiver of case 6 is on loopback.
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        // The SCIM case's member holds an API key in the organization.
        API_KEY_AUTH: 'enabled',
      };
      [a, b, c] = await Promise.all([
        startInstance('A', env),
        startInstance('B', env),
        startInstance('C', { ...env, RATE_LIMIT_ENABLED: 'false' }),
      ]);
    },
    2 * START_TIMEOUT_MS + 60_000,
  );

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
    await upstash?.close().catch(() => {});
    await owner?.end({ timeout: 1 }).catch(() => {});
    if (databaseName) {
      const servers = testServers()!;
      const dropper = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
      await dropper.unsafe(`drop database if exists "${databaseName}" with (force)`).catch(() => {});
      await dropper.end();
    }
  }, 60_000);

  it('runs two processes of the real entry on the PostgreSQL server and the shared store', () => {
    expect(new Set([a.child.pid, b.child.pid, c.child.pid]).size).toBe(3);
    for (const instance of [a, b, c]) {
      expect(instance.lines.find((line) => line.event === 'server.listening')).toMatchObject({
        engine: 'postgres',
        env: 'test',
        port: instance.port,
      });
      // No instance fell back to its own in-memory counters.
      expect(instance.lines.filter((line) => line.event === 'config.rate_limit_memory_store')).toEqual([]);
    }
  });

  describe('a revoked session', () => {
    it('revoke-sessions through A (from another session of the user): the next request through B is signed out', async () => {
      const user = await newUser(a, 'revoked');
      await newOrganization(a, user);
      const other = await signIn(a, user);

      // B reads the session (twice: the second answer comes from its warm cache).
      for (let i = 0; i < 2; i += 1) {
        const session = expectAnswer(await b.request('/api/session', { jar: user.jar, ip: user.ip }), 200);
        expect(session?.user?.id).toBe(user.id);
        expectAnswer(await b.request('/api/roles', { jar: user.jar, ip: user.ip }), 200);
      }

      expectAnswer(await a.request('/api/auth/revoke-sessions', { body: {}, jar: other.jar, ip: user.ip }), 200);

      expect(expectAnswer(await b.request('/api/session', { jar: user.jar, ip: user.ip }), 200)).toBeNull();
      expectError(await b.request('/api/roles', { jar: user.jar, ip: user.ip }), 401, 'UNAUTHORIZED');
      // The session that revoked them all is gone too.
      expectError(await b.request('/api/roles', { jar: other.jar, ip: user.ip }), 401, 'UNAUTHORIZED');
    });

    it('sign-out through A: the same cookies replayed on B are signed out on the next request', async () => {
      const user = await newUser(a, 'signout');
      await newOrganization(a, user);
      const cookies = user.jar.header();

      const session = expectAnswer(await b.request('/api/session', { cookie: cookies, ip: user.ip }), 200);
      expect(session?.user?.id).toBe(user.id);
      expectAnswer(await b.request('/api/roles', { cookie: cookies, ip: user.ip }), 200);
      expectAnswer(await b.request('/api/roles', { cookie: cookies, ip: user.ip }), 200);

      expectAnswer(await a.request('/api/auth/sign-out', { body: {}, jar: user.jar, ip: user.ip }), 200);

      // The first request through B, with the cookies as they were before the sign-out
      // (the library's signed cookie cache among them, valid for minutes yet).
      expectError(await b.request('/api/roles', { cookie: cookies, ip: user.ip }), 401, 'UNAUTHORIZED');
      expect(expectAnswer(await b.request('/api/session', { cookie: cookies, ip: user.ip }), 200)).toBeNull();
    });
  });

  it("a password change through A ends the user's other session on its next request through B", async () => {
    const user = await newUser(a, 'password');
    // The session that changes it: a second password sign-in, from another address (the auth tier counts each).
    const changer = await signIn(a, { email: user.email, ip: freshAddress() });

    // B reads the other session (twice: the second answer comes from its warm cache, where it keeps one).
    for (let i = 0; i < 2; i += 1) {
      expect(expectAnswer(await b.request('/api/users/me', { jar: user.jar, ip: user.ip }), 200).id).toBe(user.id);
    }

    expectAnswer(
      await a.request('/api/auth/change-password', {
        body: { currentPassword: PASSWORD, newPassword: 'a new passphrase for two instances' },
        jar: changer.jar,
        ip: freshAddress(),
      }),
      200,
    );

    expectError(await b.request('/api/users/me', { jar: user.jar, ip: user.ip }), 401, 'UNAUTHORIZED');
    expect(expectAnswer(await b.request('/api/session', { jar: user.jar, ip: user.ip }), 200)).toBeNull();
    // The session that made the change stays, on either instance.
    expect(expectAnswer(await b.request('/api/users/me', { jar: changer.jar, ip: user.ip }), 200).id).toBe(user.id);
    expect(expectAnswer(await c.request('/api/users/me', { jar: changer.jar, ip: user.ip }), 200).id).toBe(user.id);
  });

  it("a member's role change through A (admin -> viewer) bites on the member's next request through B", async () => {
    const boss = await newUser(a, 'owner');
    const organizationId = await newOrganization(a, boss);
    const member = await newUser(b, 'admin');
    const memberId = await join(organizationId, boss, a, member, b, 'admin');
    const roles = expectAnswer(await a.request('/api/roles', { jar: boss.jar, ip: boss.ip }), 200) as {
      id: string;
      slug: string;
      permissions: string[];
    }[];
    const admin = roles.find((role) => role.slug === 'admin')!;
    const viewer = roles.find((role) => role.slug === 'viewer')!;
    expect(viewer.permissions).not.toContain('roles:write');

    // As an Admin, through B: roles:write is held and used.
    expectAnswer(
      await b.request('/api/roles', {
        body: { name: `Ops ${RUN} one`, description: 'made by an admin', permissions: ['roles:read'] },
        jar: member.jar,
        ip: member.ip,
      }),
      201,
    );
    // Warm B's cache with reads (a POST clears the instance's own cache when it ends).
    const before = expectAnswer(await b.request('/api/session', { jar: member.jar, ip: member.ip }), 200);
    expect(before.session.activeOrganizationId).toBe(organizationId);
    expect(before.permissions).toContain('roles:write');
    expectAnswer(await b.request('/api/roles', { jar: member.jar, ip: member.ip }), 200);

    const changed = expectAnswer(
      await a.request(`/api/admin/members/${memberId}`, {
        method: 'PATCH',
        body: { roleId: viewer.id },
        jar: boss.jar,
        ip: boss.ip,
      }),
      200,
    );
    expect(changed).toEqual({ memberId, roleId: viewer.id, previousRoleId: admin.id });

    // The very next request through B.
    const refused = await b.request('/api/roles', {
      body: { name: `Ops ${RUN} two`, description: 'made by a viewer', permissions: ['roles:read'] },
      jar: member.jar,
      ip: member.ip,
    });
    expectError(refused, 403, 'INSUFFICIENT_PERMISSIONS');
    const after = expectAnswer(await b.request('/api/session', { jar: member.jar, ip: member.ip }), 200);
    expect([...after.permissions].sort()).toEqual([...viewer.permissions].sort());
    const names = (
      expectAnswer(await a.request('/api/roles', { jar: boss.jar, ip: boss.ip }), 200) as { name: string }[]
    ).map((role) => role.name);
    expect(names).toContain(`Ops ${RUN} one`);
    expect(names).not.toContain(`Ops ${RUN} two`);
  });

  it("a member's removal through A bites on the member's next request through B", async () => {
    const boss = await newUser(a, 'owner');
    const organizationId = await newOrganization(a, boss);
    const member = await newUser(b, 'removed');
    const memberId = await join(organizationId, boss, a, member, b, 'admin');

    const before = expectAnswer(await b.request('/api/session', { jar: member.jar, ip: member.ip }), 200);
    expect(before.session.activeOrganizationId).toBe(organizationId);
    expectAnswer(await b.request('/api/roles', { jar: member.jar, ip: member.ip }), 200);
    expectAnswer(await b.request('/api/roles', { jar: member.jar, ip: member.ip }), 200);

    expectAnswer(
      await a.request('/api/auth/organization/remove-member', {
        body: { memberIdOrEmail: memberId, organizationId },
        jar: boss.jar,
        ip: boss.ip,
      }),
      200,
    );

    // The very next request through B. The session row may still name the
    // organization, but session_state finds no membership there, so the
    // enriched session has no active organization (docs/api.md "Access"): 403
    // NO_ACTIVE_ORGANIZATION, not INSUFFICIENT_PERMISSIONS.
    const refused = await b.request('/api/roles', { jar: member.jar, ip: member.ip });
    expectError(refused, 403, 'NO_ACTIVE_ORGANIZATION');
    expect(refused.body.message).toBe('No active organization');
    const after = expectAnswer(await b.request('/api/session', { jar: member.jar, ip: member.ip }), 200);
    expect(after.user.id).toBe(member.id);
    expect(after.session.activeOrganizationId).toBeNull();
    expect(after.permissions).toEqual([]);
  });

  it("the directory deactivating a member through A (SCIM): their session and API key are refused on B's next request", async () => {
    const boss = await newUser(a, 'owner');
    const organizationId = await newOrganization(a, boss);
    const member = await newUser(b, 'provisioned');
    const token = expectAnswer(
      await a.request('/api/scim/tokens', { body: { name: 'directory' }, jar: boss.jar, ip: boss.ip }),
      201,
    ).token as string;
    const scim = { authorization: `Bearer ${token}` };
    // The directory provisions the existing account: it becomes a member.
    const created = expectAnswer(
      await a.request('/api/scim/v2/Users', {
        body: { schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], userName: member.email, active: true },
        headers: scim,
      }),
      201,
    );
    expect(created.id).toBe(member.id);
    // An Admin, so that they hold an API key in the organization.
    const members = expectAnswer(await a.request('/api/members', { jar: boss.jar, ip: boss.ip }), 200) as {
      id: string;
      userId: string;
    }[];
    const roles = expectAnswer(await a.request('/api/roles', { jar: boss.jar, ip: boss.ip }), 200) as {
      id: string;
      slug: string;
    }[];
    expectAnswer(
      await a.request(`/api/admin/members/${members.find((m) => m.userId === member.id)!.id}`, {
        method: 'PATCH',
        body: { roleId: roles.find((role) => role.slug === 'admin')!.id },
        jar: boss.jar,
        ip: boss.ip,
      }),
      200,
    );
    expectAnswer(
      await b.request('/api/auth/organization/set-active', {
        body: { organizationId },
        jar: member.jar,
        ip: member.ip,
      }),
      200,
    );
    const key = expectAnswer(
      await b.request('/api/api-keys', {
        body: { name: 'laptop', scopes: ['roles:read'] },
        jar: member.jar,
        ip: member.ip,
      }),
      201,
    ).key as string;
    const withKey = { authorization: `Bearer ${key}` };
    // Both work through B (and B has read their state just now).
    expectAnswer(await b.request('/api/roles', { jar: member.jar, ip: member.ip }), 200);
    expectAnswer(await b.request('/api/roles', { headers: withKey, ip: member.ip }), 200);

    expectAnswer(
      await a.request(`/api/scim/v2/Users/${member.id}`, {
        method: 'PATCH',
        body: {
          schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
          Operations: [{ op: 'Replace', path: 'active', value: 'False' }],
        },
        headers: scim,
      }),
      200,
    );

    // The very next requests through B.
    expectError(await b.request('/api/roles', { jar: member.jar, ip: member.ip }), 403, 'NO_ACTIVE_ORGANIZATION');
    expectError(await b.request('/api/roles', { headers: withKey, ip: member.ip }), 401, 'UNAUTHORIZED');
  });

  it("a member's role flipped 30 times through A is seen by the very next read through B and through C, every time", async () => {
    const boss = await newUser(a, 'owner');
    const organizationId = await newOrganization(a, boss);
    const member = await newUser(b, 'flipped');
    const memberId = await join(organizationId, boss, a, member, b, 'admin');
    const roles = expectAnswer(await a.request('/api/roles', { jar: boss.jar, ip: boss.ip }), 200) as {
      id: string;
      slug: string;
      permissions: string[];
    }[];
    const admin = roles.find((role) => role.slug === 'admin')!;
    const viewer = roles.find((role) => role.slug === 'viewer')!;
    const sorted = (permissions: string[]) => [...permissions].sort().join(' ');

    const stale: string[] = [];
    for (let i = 0; i < 30; i += 1) {
      const target = i % 2 === 0 ? viewer : admin;
      const readers = i % 4 < 2 ? [c, b] : [b, c];
      // Warm both readers' caches with the role as it stands.
      for (const reader of readers)
        expectAnswer(await reader.request('/api/session', { jar: member.jar, ip: member.ip }), 200);
      expectAnswer(
        await a.request(`/api/admin/members/${memberId}`, {
          method: 'PATCH',
          body: { roleId: target.id },
          jar: boss.jar,
          ip: boss.ip,
        }),
        200,
      );
      for (const reader of readers) {
        const seen = expectAnswer(await reader.request('/api/session', { jar: member.jar, ip: member.ip }), 200);
        if (sorted(seen.permissions) !== sorted(target.permissions))
          stale.push(`flip ${i} to ${target.slug}: ${reader.name} answered the previous role's permissions`);
      }
    }
    expect(stale).toEqual([]);
  });

  it('shares the auth-tier budget: 3 failed sign-ins through A and 2 through B exhaust it; the next on either is 429', async () => {
    // Fixed windows aligned to the epoch: start early in one, so all attempts count in the same.
    const intoWindow = Date.now() % 60_000;
    if (intoWindow > 45_000) await sleep(60_000 - intoWindow + 200);
    const ip = freshAddress();
    const attempt = (via: Instance) =>
      via.request('/api/auth/sign-in/email', {
        body: { email: `nobody-${RUN}-${crypto.randomUUID().slice(0, 8)}@example.test`, password: 'wrong password' },
        ip,
      });

    for (const via of [a, a, a, b, b]) {
      const answer = await attempt(via);
      expect(answer.status, `${via.name}: ${answer.text}`).toBe(401);
      expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
    }

    // B has seen 2 of them, A 3: only the shared store knows there were 5.
    for (const via of [b, a]) {
      const started = Date.now();
      const limited = await attempt(via);
      expectError(limited, 429, 'RATE_LIMITED');
      expect(limited.headers.get('x-ratelimit-limit')).toBe('5');
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
      const retryAfter = Number(limited.headers.get('retry-after'));
      const reset = Number(limited.headers.get('x-ratelimit-reset'));
      // The 5-minute block, not only the end of the 60 s window.
      expect(retryAfter).toBeGreaterThan(240);
      expect(retryAfter).toBeLessThanOrEqual(300);
      expect(Math.abs(reset - Math.ceil(started / 1000) - retryAfter)).toBeLessThanOrEqual(3);
    }

    // Another address is not affected, on either instance.
    const elsewhere = await b.request('/api/auth/sign-in/email', {
      body: { email: `nobody-${RUN}@example.test`, password: 'wrong password' },
      ip: freshAddress(),
    });
    expect(elsewhere.status).toBe(401);
  });

  it('the purge job run on both at the same moment purges each due account exactly once', async () => {
    const first = await newUser(a, 'purge-one');
    const second = await newUser(b, 'purge-two');
    const firstScheduled = expectAnswer(
      await a.request('/api/users/me/deletion', { method: 'POST', jar: first.jar, ip: first.ip }),
      202,
    );
    const secondScheduled = expectAnswer(
      await b.request('/api/users/me/deletion', { method: 'POST', jar: second.jar, ip: second.ip }),
      202,
    );
    // ACCOUNT_DELETION_GRACE_DAYS=0 on both: due the moment it is scheduled.
    expect(firstScheduled.purgeAfter).toBe(firstScheduled.deletedAt);
    expect(secondScheduled.purgeAfter).toBe(secondScheduled.deletedAt);
    const ids = [first.id, second.id];
    const due = await owner<
      { id: string }[]
    >`select id from users where deleted_at is not null and deleted_at <= now()`;
    expect(due.map((row) => row.id).sort()).toEqual([...ids].sort());

    const cron = (via: Instance) =>
      via.request('/api/cron/purge-accounts', {
        method: 'POST',
        headers: { authorization: `Bearer ${CRON_SECRET}` },
        ip: freshAddress(),
      });
    const answers = await Promise.all([cron(a), cron(b)]);
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(200);
      expect(answer.body.failed).toBe(0);
    }
    expect(answers[0]!.body.purged + answers[1]!.body.purged).toBe(2);

    // Gone, with everything that hangs off the user row.
    expect(await owner`select id from users where id in ${owner(ids)}`).toHaveLength(0);
    expect(await owner`select id from sessions where user_id in ${owner(ids)}`).toHaveLength(0);
    expect(expectAnswer(await a.request('/api/session', { jar: first.jar, ip: first.ip }), 200)).toBeNull();
    expect(expectAnswer(await b.request('/api/session', { jar: second.jar, ip: second.ip }), 200)).toBeNull();

    // One account.purged entry each. Those entries name no tenant and no
    // actor, and FORCE ROW LEVEL SECURITY hides them even from the owner; so
    // the owner lifts FORCE inside a transaction it rolls back (nothing stays changed).
    const purgedEntries = await owner
      .begin(async (trx) => {
        await trx`alter table audit_logs no force row level security`;
        const rows = await trx<{ user_id: string; actor_id: string | null; tenant_id: string | null }[]>`
          select metadata->>'userId' as user_id, actor_id, tenant_id from audit_logs where action = 'account.purged'`;
        throw Object.assign(new Error('rollback'), { rows });
      })
      .catch((error: { message: string; rows?: unknown }) => {
        if (error.message !== 'rollback') throw error;
        return error.rows as { user_id: string; actor_id: string | null; tenant_id: string | null }[];
      });
    for (const id of ids) {
      expect(
        purgedEntries.filter((entry) => entry.user_id === id),
        id,
      ).toEqual([{ user_id: id, actor_id: null, tenant_id: null }]);
    }

    // Neither instance logged a failed purge or an unexpected error.
    for (const instance of [a, b]) {
      expect(
        instance.lines.filter(
          (line) =>
            line.event === 'account.purge_failed' ||
            (line.level === 'error' && line.event !== 'rate_limit.store_failed'),
        ),
      ).toEqual([]);
    }
  });

  it('two deliverers on one outbox send each webhook event exactly once, signed', async () => {
    const receiver = await startReceiver(async () => {
      // A little slow, so both instances are sending at the same time.
      await sleep(20);
      return { status: 200 };
    });
    try {
      const admin = await newUser(a, 'webhook-owner');
      await newOrganization(a, admin);
      const created = expectAnswer(
        await a.request('/api/webhooks', {
          body: { url: receiver.url, events: ['role.created'] },
          jar: admin.jar,
          ip: admin.ip,
        }),
        201,
      );
      const count = 30;
      await Promise.all(
        Array.from({ length: count }, (_, i) =>
          (i % 2 ? a : b)
            .request('/api/roles', {
              body: { name: `Hook role ${i}`, permissions: ['roles:read'] },
              jar: admin.jar,
              ip: admin.ip,
            })
            .then((answer) => expectAnswer(answer, 201)),
        ),
      );
      const deadline = Date.now() + 30_000;
      while (receiver.received.length < count && Date.now() < deadline) await sleep(50);
      // Anything sent twice would arrive within this.
      await sleep(1_000);
      const ids = receiver.received.map((r) => String(r.headers['webhook-id']));
      expect(ids).toHaveLength(count);
      expect(new Set(ids).size).toBe(count);
      const events = receiver.received.map((r) => verified(created.secret, r));
      expect(new Set(events.map((e) => e.data.id)).size).toBe(count);
      expect(events.every((e) => e.type === 'role.created')).toBe(true);
      // Row-level security binds the owner too (FORCE): it reads as the deliverer does.
      const rows = await owner.begin(async (trx) => {
        await trx`select set_config('app.webhook_deliverer', 'on', true)`;
        return trx<{ status: string; attempts: number }[]>`
          select status, attempts from webhook_deliveries where endpoint_id = ${created.id}`;
      });
      expect(rows).toHaveLength(count);
      expect(rows.every((row) => row.status === 'succeeded' && row.attempts === 1)).toBe(true);
    } finally {
      await receiver.close();
    }
  });
});
