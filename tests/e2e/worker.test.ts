import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CookieJar } from '../support/http.js';
import { authenticatorFor, freshCode } from '../support/mfa.js';
import { ALL_PERMISSIONS } from '../support/orgs.js';
import { withDatabaseName } from '../support/servers.js';
import { PASSWORD, uniqueEmail } from '../support/users.js';
import { type Receiver, selfSignedCertificate, startReceiver, verified } from '../support/webhooks.js';
import { firstLink, startMailCapture } from './support/servers.js';
import {
  createMigratedDatabase,
  dropDatabase,
  type RateLimitStoreServer,
  requiredServers,
  startRateLimitStore,
} from './support/worker-env.js';
import { freePort, randomSecret, startWranglerDev, type WranglerDev } from './support/wrangler.js';

/**
 * The deployment artifact itself. src/entries/worker.ts runs in
 * workerd (`wrangler dev --local`, the project's wrangler.toml) with
 * production settings, against the integration PostgreSQL server (as the
 * runtime role, on a freshly migrated database), the Upstash-protocol test
 * server over real Redis, and a local stand-in for the email provider.
 * Runs from `.ci/e2e.sh` after `services_start`; needs TEST_PG_URL,
 * TEST_PG_APP_URL, TEST_POOLER_URL, TEST_POOLER_APP_URL and TEST_REDIS_URL.
 *
 * PostgreSQL through PgBouncer, the local stand-in for Hyperdrive,
 * reached through the Worker's Hyperdrive binding
 * (CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE); DATABASE_URL
 * points nowhere, so a Worker that ignored the binding would fail every
 * query. Migrations also run through the pooler.
 */

const APP_ORIGIN = 'http://localhost:3000';
/**
 * The worker keys its limits `gatehouse:rl:…:ip:127.0.0.1` (wrangler dev's
 * CF-Connecting-IP), the same on every run: a Redis database of its own,
 * emptied before and after, keeps one run's 5-minute auth block out of the next.
 */
const REDIS_DB = 15;
const AUTH_LIMIT = 10;
const SESSION_COOKIE = 'gatehouse.session_token';

describe('the worker in workerd (wrangler dev) against PostgreSQL and the Upstash protocol', () => {
  const servers = requiredServers();
  const databaseName = `gatehouse_e2e_${crypto.randomUUID().replaceAll('-', '')}`;
  let upstash: RateLimitStoreServer;
  let mail: Awaited<ReturnType<typeof startMailCapture>>;
  let worker: WranglerDev;
  let receiver: Receiver;
  const emailKey = `re_e2e_${randomSecret(24)}`;

  beforeAll(async () => {
    await createMigratedDatabase(servers, databaseName);
    upstash = await startRateLimitStore(servers, REDIS_DB);
    mail = await startMailCapture();
    // An https:// webhook receiver (production takes no other), trusted by workerd through SSL_CERT_FILE:
    // its first answer is a 500, so the retry is the cron trigger's.
    const tls = selfSignedCertificate();
    receiver = await startReceiver((index) => (index === 0 ? { status: 500 } : { status: 200 }), { tls });
    const port = await freePort();
    worker = await startWranglerDev({
      port,
      vars: (p) => ({
        NODE_ENV: 'production',
        AUTH_SECRET: randomSecret(40),
        AUTH_URL: `http://127.0.0.1:${p}`,
        APP_URL: APP_ORIGIN,
        CORS_ORIGIN: APP_ORIGIN,
        // Unused: the Hyperdrive binding wins (a refused login if it did not).
        DATABASE_URL: withDatabaseName(servers.pgAppUrl.replace(':runtime@', ':not-the-password@'), databaseName),
        KV_REST_API_URL: upstash.url,
        KV_REST_API_TOKEN: upstash.token,
        RATE_LIMIT_AUTH_LIMIT: String(AUTH_LIMIT),
        RATE_LIMIT_GLOBAL_LIMIT: '1000',
        EMAIL_API_KEY: emailKey,
        EMAIL_API_URL: mail.url,
        EMAIL_FROM: 'Gatehouse <no-reply@gatehouse.test>',
        CRON_SECRET: randomSecret(32),
        // The receiver is on loopback; retries after 1 s.
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_RETRY_SCHEDULE: '1',
      }),
      // The runtime role (not the owner), through PgBouncer: row-level security applies as in production.
      env: {
        CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: withDatabaseName(servers.poolerAppUrl, databaseName),
        SSL_CERT_FILE: tls.certFile,
      },
    });
  });

  afterAll(async () => {
    await worker?.stop();
    if (upstash) await upstash.flush();
    await Promise.all([upstash?.close(), mail?.close(), receiver?.close()]);
    await dropDatabase(servers, databaseName);
  });

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => console.error(`----- wrangler dev output (tail) -----\n${worker?.log().slice(-8_000)}`));
  });

  /** A request as the SPA on APP_URL sends it: JSON, its Origin, the jar's cookies. */
  async function call(
    path: string,
    options: { method?: string; body?: unknown; jar?: CookieJar; cookie?: string; redirect?: RequestRedirect } = {},
  ) {
    const headers: Record<string, string> = { origin: APP_ORIGIN };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const cookie = options.cookie ?? options.jar?.header();
    if (cookie) headers.cookie = cookie;
    const res = await fetch(`${worker.url}${path}`, {
      method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      redirect: options.redirect ?? 'follow',
    });
    options.jar?.store(res);
    return res;
  }

  async function json<T = any>(res: Response, status: number): Promise<T> {
    const text = await res.text();
    expect(res.status, `${res.status} ${text}`).toBe(status);
    return (text ? JSON.parse(text) : null) as T;
  }

  const email = uniqueEmail('worker');
  const jar = new CookieJar();

  it('answers through the full middleware chain (health, security headers, CORS, docs off in production)', async () => {
    const res = await call('/api/health');
    expect(await json(res, 200)).toEqual({ status: 'ok' });
    expect(res.headers.get('content-security-policy')).toMatch(/^default-src 'none'; /);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    // wrangler.toml: DOCS_ENABLED=false, and production's default is off.
    expect(await json(await call('/api/docs'), 404)).toEqual({ code: 'NOT_FOUND', message: 'Not found' });
  });

  it('signs up; the verification mail goes to the provider; sign-in waits for verification', async () => {
    await json(
      await call('/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: 'Wendy Worker' } }),
      200,
    );
    await expect
      .poll(() => mail.emails.filter((m) => [m.to].flat().includes(email)).length, { timeout: 10_000 })
      .toBe(1);
    const sent = mail.emails.find((m) => [m.to].flat().includes(email))!;
    expect(sent.authorization).toBe(`Bearer ${emailKey}`);
    expect(sent.from).toBe('Gatehouse <no-reply@gatehouse.test>');
    expect(sent.subject).toBe('Verify your email address');
    // Verification is required before the first sign-in (docs/api.md "Sign-in").
    const early = await json(await call('/api/auth/sign-in/email', { body: { email, password: PASSWORD } }), 403);
    expect(early.code).toBe('EMAIL_NOT_VERIFIED');
  });

  it('verifies through the mailed link and signs in with an HttpOnly, SameSite=Lax cookie', async () => {
    const sent = mail.emails.find((m) => [m.to].flat().includes(email))!;
    const link = firstLink(sent.text ?? sent.html ?? '');
    expect(link.startsWith(`${worker.url}/api/auth/verify-email?token=`), link).toBe(true);
    const verify = await call(new URL(link).pathname + new URL(link).search, { redirect: 'manual' });
    expect([200, 302]).toContain(verify.status);

    const signIn = await call('/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar });
    const body = await json<{ user: { email: string; emailVerified: boolean } }>(signIn, 200);
    expect(body.user).toMatchObject({ email, emailVerified: true });
    const cookie = signIn.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`));
    expect(cookie, signIn.headers.getSetCookie().join('\n')).toBeDefined();
    expect(cookie).toMatch(/;\s*HttpOnly/i);
    expect(cookie).toMatch(/;\s*SameSite=Lax/i);

    const session = await json(await call('/api/session', { jar }), 200);
    expect(session.user).toMatchObject({ email, emailVerified: true, role: 'user' });
    expect(session.permissions).toEqual([]);
  });

  it('creates an organization (default roles seeded) and lists and creates roles in it', async () => {
    const slug = `worker-${crypto.randomUUID().slice(0, 8)}`;
    const org = await json<{ id: string; slug: string }>(
      await call('/api/auth/organization/create', { body: { name: 'Worker Org', slug }, jar }),
      200,
    );
    expect(org.slug).toBe(slug);
    await json(await call('/api/auth/organization/set-active', { body: { organizationId: org.id }, jar }), 200);

    const session = await json(await call('/api/session', { jar }), 200);
    expect(session.session.activeOrganizationId).toBe(org.id);
    expect([...session.permissions].sort()).toEqual(ALL_PERMISSIONS);

    const roles = await json<{ slug: string; isDefault: boolean }[]>(await call('/api/roles', { jar }), 200);
    expect(roles.map((r) => r.slug)).toEqual(['owner', 'admin', 'member', 'viewer']);
    expect(roles.every((r) => r.isDefault)).toBe(true);

    const created = await json(
      await call('/api/roles', {
        body: { name: 'Edge Readers', description: 'from workerd', permissions: ['roles:read'] },
        jar,
      }),
      201,
    );
    expect(created).toMatchObject({ slug: 'edge-readers', permissions: ['roles:read'], isDefault: false });
    expect((await json<{ slug: string }[]>(await call('/api/roles', { jar }), 200)).map((r) => r.slug)).toEqual([
      'owner',
      'admin',
      'member',
      'viewer',
      'edge-readers',
    ]);
  });

  /** Signs up, follows the mailed verification link and signs in: three requests of the auth tier. */
  async function verifiedUser(address: string, into: CookieJar): Promise<void> {
    await json(
      await call('/api/auth/sign-up/email', { body: { email: address, password: PASSWORD, name: 'Second Tenant' } }),
      200,
    );
    await expect.poll(() => mail.emails.some((m) => [m.to].flat().includes(address)), { timeout: 10_000 }).toBe(true);
    const link = firstLink(mail.emails.find((m) => [m.to].flat().includes(address))!.text ?? '');
    await call(new URL(link).pathname + new URL(link).search, { redirect: 'manual' });
    await json(await call('/api/auth/sign-in/email', { body: { email: address, password: PASSWORD }, jar: into }), 200);
  }

  async function runtimeSessionsSince(since: Date): Promise<number> {
    const owner = postgres(servers.pgUrl, { max: 1, onnotice: () => {} });
    try {
      const [row] =
        await owner`select count(*)::int as n from pg_stat_activity where datname = ${databaseName} and usename = 'gatehouse_runtime' and backend_start > ${since}`;
      return row!.n as number;
    } finally {
      await owner.end();
    }
  }

  it('serves two tenants concurrently from one isolate: no shared connection, transaction or tenant; failures poison nothing; sessions reused through the pooler', async () => {
    const other = new CookieJar();
    await verifiedUser(uniqueEmail('worker-b'), other);
    const orgB = await json<{ id: string }>(
      await call('/api/auth/organization/create', {
        body: { name: 'Tenant B', slug: `tenant-b-${crypto.randomUUID().slice(0, 8)}` },
        jar: other,
      }),
      200,
    );
    await json(await call('/api/auth/organization/set-active', { body: { organizationId: orgB.id }, jar: other }), 200);
    await json(await call('/api/roles', { body: { name: 'Only B', permissions: ['roles:read'] }, jar: other }), 201);
    const orgA = (await json(await call('/api/session', { jar }), 200)).session.activeOrganizationId as string;

    const tenants = [
      { jar, org: orgA, slugs: ['owner', 'admin', 'member', 'viewer', 'edge-readers'], duplicate: 'Edge Readers' },
      { jar: other, org: orgB.id, slugs: ['owner', 'admin', 'member', 'viewer', 'only-b'], duplicate: 'Only B' },
    ];
    const burst = () =>
      Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const tenant = tenants[i % 2]!;
          const kind = Math.floor(i / 2) % 3;
          if (kind === 0) {
            const roles = await json<{ slug: string }[]>(await call('/api/roles', { jar: tenant.jar }), 200);
            expect(roles.map((r) => r.slug)).toEqual(tenant.slugs);
          } else if (kind === 1) {
            const session = await json(await call('/api/session', { jar: tenant.jar }), 200);
            expect(session.session.activeOrganizationId).toBe(tenant.org);
          } else {
            // A write that fails in its transaction (the slug exists in this tenant only).
            const refused = await json(
              await call('/api/roles', {
                body: { name: tenant.duplicate, permissions: ['roles:read'] },
                jar: tenant.jar,
              }),
              409,
            );
            expect(refused.code).toBe('SLUG_CONFLICT');
          }
        }),
      );
    await burst();
    // Warm: the pooler's server sessions exist now; a second burst reuses them.
    await new Promise((r) => setTimeout(r, 1_100));
    const since = new Date();
    await burst();
    expect(await runtimeSessionsSince(since)).toBeLessThanOrEqual(3);
    // And the next requests of each tenant still see their own roles only.
    for (const tenant of tenants) {
      expect(
        (await json<{ slug: string }[]>(await call('/api/roles', { jar: tenant.jar }), 200)).map((r) => r.slug),
      ).toEqual(tenant.slugs);
    }
  });

  it('revocation bites on the next request through the pooler; the statements that decide it are never cached by Hyperdrive', async () => {
    const second = new CookieJar();
    await json(await call('/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar: second }), 200);
    expect((await json(await call('/api/session', { jar: second }), 200)).user.email).toBe(email);
    const revoked = second.header();
    await json(await call('/api/auth/sign-out', { method: 'POST', body: {}, jar: second }), 200);
    // The same cookies (a still-valid cookie cache included) after sign-out: signed out at once.
    expect(await json(await call('/api/session', { cookie: revoked }), 200)).toBeNull();
    expect((await call('/api/roles', { cookie: revoked })).status).toBe(401);
    // Hyperdrive never caches a statement calling a VOLATILE function (docs/workers.md).
    const owner = postgres(withDatabaseName(servers.pgUrl, databaseName), { max: 1, onnotice: () => {} });
    try {
      const rows =
        await owner`select proname, provolatile from pg_proc where proname in ('session_state', 'tenant_roles') order by proname`;
      expect(rows.map((r) => [r.proname, r.provolatile])).toEqual([
        ['session_state', 'v'],
        ['tenant_roles', 'v'],
      ]);
    } finally {
      await owner.end();
    }
  });

  it('enables TOTP and signs in with the second factor: held back, then a multi-factor session', async () => {
    // A fresh auth-tier budget for this address: the walk above spent most of it.
    await upstash.flush();
    // A sensitive action (docs/security.md "Sensitive actions and step-up"): the password sign-in above may be
    // more than STEP_UP_MAX_AGE (600 s) old on a slow machine, so this session proves the password again first.
    const wrong = await json(await call('/api/session/step-up', { body: { password: 'not the password' }, jar }), 401);
    expect(wrong.code).toBe('INVALID_CREDENTIALS');
    const { stepUpUntil } = await json<{ stepUpUntil: string }>(
      await call('/api/session/step-up', { body: { password: PASSWORD }, jar }),
      200,
    );
    expect(Date.parse(stepUpUntil)).toBeGreaterThan(Date.now() + 500_000);
    expect((await json(await call('/api/session', { jar }), 200)).session.stepUpUntil).toBe(stepUpUntil);
    const enable = await json<{ totpURI: string; backupCodes: string[] }>(
      await call('/api/auth/two-factor/enable', { body: { password: PASSWORD }, jar }),
      200,
    );
    expect(enable.backupCodes).toHaveLength(10);
    const authenticator = authenticatorFor(enable.totpURI);
    await json(
      await call('/api/auth/two-factor/verify-totp', { body: { code: await freshCode(authenticator) }, jar }),
      200,
    );
    expect((await json(await call('/api/session', { jar }), 200)).session.mfa).toBe(true);

    const pending = new CookieJar();
    const signIn = await call('/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar: pending });
    expect(await json(signIn, 200)).toMatchObject({ twoFactorRedirect: true });
    expect(pending.get(SESSION_COOKIE)).toBeUndefined();
    expect(await json(await call('/api/session', { jar: pending }), 200)).toBeNull();
    await json(
      await call('/api/auth/two-factor/verify-totp', { body: { code: await freshCode(authenticator) }, jar: pending }),
      200,
    );
    expect(await json(await call('/api/session', { jar: pending }), 200)).toMatchObject({
      user: { email, twoFactorEnabled: true },
      session: { mfa: true },
    });
  });

  it('delivers a webhook after the answer (waitUntil) and retries it from the every-minute cron trigger, signed', async () => {
    const webhook = await json<{ id: string; secret: string }>(
      await call('/api/webhooks', { body: { url: receiver.url, events: ['role.created'] }, jar }),
      201,
    );
    await json(await call('/api/roles', { body: { name: 'Hooked', permissions: ['roles:read'] }, jar }), 201);
    // Sent right after the answer; the receiver refuses it (500).
    await expect.poll(() => receiver.received.length, { timeout: 15_000 }).toBe(1);
    await expect
      .poll(async () => (await json(await call(`/api/webhooks/${webhook.id}/deliveries`, { jar }), 200)).items[0], {
        timeout: 10_000,
      })
      .toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: 500 });
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // The cron trigger of wrangler.toml that sends what is due.
    const scheduled = await fetch(`${worker.url}/__scheduled?cron=${encodeURIComponent('* * * * *')}`);
    expect(scheduled.status).toBe(200);
    await expect.poll(() => receiver.received.length, { timeout: 15_000 }).toBe(2);
    const [first, second] = receiver.received;
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    const event = verified(webhook.secret, second!);
    expect(event).toMatchObject({ type: 'role.created', data: { action: 'role.created' } });
    expect(verified(webhook.secret, first!)).toEqual(event);
    await expect
      .poll(async () => (await json(await call(`/api/webhooks/${webhook.id}/deliveries`, { jar }), 200)).items[0], {
        timeout: 10_000,
      })
      .toMatchObject({ status: 'succeeded', attempts: 2, lastStatusCode: 200 });
  });

  it('answers 429 RATE_LIMITED from the auth tier, with its four headers, once the limit is spent', async () => {
    // The walk above already spent some of this address's auth-tier budget
    // (sign-up, the early sign-in, verify-email, sign-in); wrong passwords
    // spend the rest. Windows are fixed and aligned to the minute, so one
    // boundary may fall inside this loop and restart the count: up to
    // 2 × limit + 1 attempts always reach a 429.
    let limited: Response | null = null;
    const before: number[] = [];
    for (let attempt = 0; attempt < 2 * AUTH_LIMIT + 1 && !limited; attempt++) {
      const res = await call('/api/auth/sign-in/email', { body: { email, password: 'wrong password, wrong' } });
      if (res.status === 429) limited = res;
      else {
        before.push(res.status);
        await res.body?.cancel();
      }
    }
    expect(limited, `statuses before: ${before.join(', ')}`).not.toBeNull();
    expect(before.every((status) => status === 401)).toBe(true);
    expect(await limited!.json()).toMatchObject({ code: 'RATE_LIMITED' });
    expect(limited!.headers.get('x-ratelimit-limit')).toBe(String(AUTH_LIMIT));
    expect(limited!.headers.get('x-ratelimit-remaining')).toBe('0');
    const reset = Number(limited!.headers.get('x-ratelimit-reset'));
    const retryAfter = Number(limited!.headers.get('retry-after'));
    const now = Math.floor(Date.now() / 1000);
    // The auth tier blocks for RATE_LIMIT_AUTH_BLOCK_DURATION (300 s by default).
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(300);
    expect(reset).toBeGreaterThanOrEqual(now);
    expect(reset).toBeLessThanOrEqual(now + 301);
    // Blocked now even with the right password; routes outside the auth tier still answer.
    expect((await call('/api/auth/sign-in/email', { body: { email, password: PASSWORD } })).status).toBe(429);
    const session = await json(await call('/api/session', { jar }), 200);
    expect(session.user.email).toBe(email);
  });
});
