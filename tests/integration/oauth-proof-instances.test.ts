/**
 * docs/security.md "Account linking", across instances: two processes of
 * the real Node entry (`src/entries/server.ts` under tsx) on one PostgreSQL
 * database, each with its own session-state cache. An unverified account
 * holds an attacker's GitHub link and live session (as the pre-account
 * takeover left it); B serves that session (its cache warmed). The owner of
 * the address proves it through A (the verification link, or a password
 * reset): the attacker's very next request through B is signed out, and the
 * link is gone. The instances: tests/support/instances.ts, as in
 * tests/integration/multi-instance.test.ts.
 *
 * The attacker's session is written as a row with its signed cookie (the
 * library's format: the token, `.`, base64 HMAC-SHA-256 under AUTH_SECRET),
 * since no sign-in can create it any more.
 */
import { createHmac } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { CookieJar } from '../support/http.js';
import { type Instance, mailedPath, START_TIMEOUT_MS, startInstance } from '../support/instances.js';
import { testServers, withDatabaseName } from '../support/servers.js';

const AUTH_SECRET = `oauth-proof-${crypto.randomUUID()}-${crypto.randomUUID()}`;

describe('a proof of the address through one instance ends the unproven session on the other', () => {
  let databaseName: string;
  let owner: postgres.Sql;
  let a: Instance;
  let b: Instance;

  beforeAll(async () => {
    const servers = testServers();
    if (!servers) throw new Error('runs only in the integration suite (TEST_PG_URL, TEST_PG_APP_URL)');
    databaseName = `gatehouse_oauth_${crypto.randomUUID().replaceAll('-', '')}`;
    const admin = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${databaseName}"`);
    await admin.end();
    const ownerUrl = withDatabaseName(servers.pgUrl, databaseName);
    const appUrl = withDatabaseName(servers.pgAppUrl, databaseName);
    const migrating = await openPostgres({ url: appUrl, migrationUrl: ownerUrl, poolMax: 1 });
    try {
      await migrateToLatest(migrating);
    } finally {
      await migrating.close();
    }
    owner = postgres(ownerUrl, { max: 2, onnotice: () => {} });
    const env = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      // One secret for both: a cookie signed for one instance is read by the other.
      AUTH_SECRET,
      DATABASE_URL: appUrl,
      DATABASE_MIGRATION_URL: ownerUrl,
      MIGRATE_ON_START: 'false',
      // Each instance's own counters: this file is about sessions, not limits.
      RATE_LIMIT_ENABLED: 'false',
      GITHUB_CLIENT_ID: 'github-id',
      GITHUB_CLIENT_SECRET: 'github-secret',
    };
    [a, b] = await Promise.all([startInstance('A', env), startInstance('B', env)]);
  }, START_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await owner?.end({ timeout: 1 }).catch(() => {});
    if (databaseName) {
      const servers = testServers()!;
      const dropper = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
      await dropper.unsafe(`drop database if exists "${databaseName}" with (force)`).catch(() => {});
      await dropper.end();
    }
  }, 60_000);

  /** The unverified account, the attacker's GitHub link, and the attacker's session cookie. */
  async function takenOver() {
    const email = `victim-${crypto.randomUUID().slice(0, 8)}@example.test`;
    const [user] = await owner`
      INSERT INTO users (name, email, email_verified) VALUES ('Attacker', ${email}, false) RETURNING id`;
    const githubId = String(Math.floor(Math.random() * 1e9));
    await owner`
      INSERT INTO accounts (user_id, account_id, provider_id) VALUES (${user!.id}, ${githubId}, 'github')`;
    const token = crypto.randomUUID().replaceAll('-', '');
    await owner`
      INSERT INTO sessions (user_id, token, expires_at, ip_address, user_agent)
      VALUES (${user!.id}, ${token}, now() + interval '7 days', '192.0.2.66', 'attacker')`;
    const signature = createHmac('sha256', AUTH_SECRET).update(token).digest('base64');
    const cookie = `gatehouse.session_token=${encodeURIComponent(`${token}.${signature}`)}`;
    return { email, userId: user!.id as string, githubId, cookie };
  }

  const proofs: [string, (via: Instance, email: string) => Promise<void>][] = [
    [
      'the verification link',
      async (via, email) => {
        expect((await via.request('/api/auth/send-verification-email', { body: { email } })).status).toBe(200);
        const verified = await via.request(await mailedPath(via, email, 'Verify your email address'), {
          jar: new CookieJar(),
        });
        expect([200, 302]).toContain(verified.status);
      },
    ],
    [
      'a password reset',
      async (via, email) => {
        expect(
          (await via.request('/api/auth/request-password-reset', { body: { email, redirectTo: '/reset' } })).status,
        ).toBe(200);
        const token = (await mailedPath(via, email, 'Reset your password')).split('?')[0]!.split('/').at(-1)!;
        const reset = await via.request('/api/auth/reset-password', {
          body: { newPassword: 'correct horse battery staple', token },
        });
        expect(reset.status, reset.text).toBe(200);
      },
    ],
  ];

  it.each(proofs)('%s through A: the attacker’s next request through B is signed out', async (_, prove) => {
    const { email, userId, githubId, cookie } = await takenOver();
    // B serves the attacker's session, twice (the second from its warm cache).
    for (let i = 0; i < 2; i += 1) {
      const session = await b.request('/api/session', { cookie });
      expect(session.status).toBe(200);
      expect(session.body?.user?.id).toBe(userId);
      expect((await b.request('/api/users/me', { cookie })).status).toBe(200);
    }

    await prove(a, email);

    expect((await b.request('/api/users/me', { cookie })).status).toBe(401);
    expect((await b.request('/api/session', { cookie })).body).toBeNull();
    const [state] = await owner`
      SELECT u.email_verified,
             (SELECT count(*)::int FROM accounts WHERE user_id = u.id AND account_id = ${githubId}) AS links,
             (SELECT count(*)::int FROM sessions WHERE user_id = u.id AND ip_address = '192.0.2.66') AS attacker_sessions
      FROM users u WHERE u.id = ${userId}`;
    expect(state).toEqual({ email_verified: true, links: 0, attacker_sessions: 0 });
  });
});
