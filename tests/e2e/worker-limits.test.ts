import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CookieJar } from '../support/http.js';
import { withDatabaseName } from '../support/servers.js';
import { PASSWORD, uniqueEmail } from '../support/users.js';
import { WEBHOOK_URL_CASES } from '../support/webhook-url-cases.js';
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
 * The Worker's limits in workerd (`wrangler dev --local`, the project's
 * wrangler.toml, production settings), on the same servers as
 * tests/e2e/worker.test.ts (run through `.ci/e2e.sh` after `services_start`):
 * how the rate limiter counts client addresses (CF-Connecting-IP, which
 * wrangler dev passes through when the client sends it), and that a body
 * over the limit leaves nothing behind for the next request; and the webhook
 * URL table of tests/support/webhook-url-cases.ts, walked through
 * POST /api/webhooks (the Worker resolves no names: docs/webhooks.md "Workers").
 */

const APP_ORIGIN = 'http://localhost:3000';
/** A Redis database of its own (worker.test.ts empties 15), emptied before and after. */
const REDIS_DB = 14;
const AUTH_LIMIT = 5;

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One request on a connection of its own (no pool, no keep-alive reuse);
 * a body is written in the chunks given, without Content-Length (chunked).
 * Rejects with what the client saw (ECONNRESET, a timeout) instead of an answer.
 */
function rawRequest(
  url: string,
  {
    method = 'GET',
    path = '/',
    headers = {},
    chunks,
  }: { method?: string; path?: string; headers?: Record<string, string>; chunks?: Buffer[] },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method, headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.setTimeout(15_000, () => req.destroy(new Error(`no answer to ${method} ${path} within 15 s`)));
    req.on('error', reject);
    if (!chunks) {
      req.end();
      return;
    }
    const writeAll = async () => {
      for (const chunk of chunks) {
        if (req.destroyed) return;
        if (!req.write(chunk))
          await new Promise<void>((ok) => {
            const done = () => {
              req.off('drain', done).off('close', done);
              ok();
            };
            req.on('drain', done).on('close', done);
          });
      }
      if (!req.destroyed) req.end();
    };
    void writeAll();
  });
}

describe('the worker in workerd: client addresses and body limits', () => {
  const servers = requiredServers();
  const databaseName = `gatehouse_e2e_${crypto.randomUUID().replaceAll('-', '')}`;
  let upstash: RateLimitStoreServer;
  let mail: Awaited<ReturnType<typeof startMailCapture>>;
  let worker: WranglerDev;

  beforeAll(async () => {
    await createMigratedDatabase(servers, databaseName);
    upstash = await startRateLimitStore(servers, REDIS_DB);
    mail = await startMailCapture();
    const port = await freePort();
    worker = await startWranglerDev({
      port,
      vars: (p) => ({
        NODE_ENV: 'production',
        AUTH_SECRET: randomSecret(40),
        AUTH_URL: `http://127.0.0.1:${p}`,
        APP_URL: APP_ORIGIN,
        CORS_ORIGIN: APP_ORIGIN,
        DATABASE_URL: withDatabaseName(servers.pgAppUrl.replace(':runtime@', ':not-the-password@'), databaseName),
        KV_REST_API_URL: upstash.url,
        KV_REST_API_TOKEN: upstash.token,
        RATE_LIMIT_AUTH_LIMIT: String(AUTH_LIMIT),
        // Windows are fixed and aligned to the epoch: an hour-long one makes a
        // count split by a window's end (a minute's would be, about once a
        // hundred runs) all but impossible within one test.
        RATE_LIMIT_AUTH_TTL: '3600',
        RATE_LIMIT_GLOBAL_LIMIT: '1000',
        EMAIL_API_KEY: `re_e2e_${randomSecret(24)}`,
        EMAIL_API_URL: mail.url,
        EMAIL_FROM: 'Gatehouse <no-reply@gatehouse.test>',
        CRON_SECRET: randomSecret(32),
      }),
      env: {
        CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: withDatabaseName(servers.poolerAppUrl, databaseName),
      },
    });
  });

  afterAll(async () => {
    await worker?.stop();
    if (upstash) await upstash.flush();
    await Promise.all([upstash?.close(), mail?.close()]);
    await dropDatabase(servers, databaseName);
  });

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => console.error(`----- wrangler dev output (tail) -----\n${worker?.log().slice(-8_000)}`));
  });

  /** A password sign-in with a wrong password for a fresh email, as the client `address` (CF-Connecting-IP). */
  async function wrongSignIn(address: string): Promise<number> {
    const res = await fetch(`${worker.url}/api/auth/sign-in/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: APP_ORIGIN, 'cf-connecting-ip': address },
      body: JSON.stringify({ email: uniqueEmail('worker-v6'), password: 'not the password at all' }),
    });
    await res.arrayBuffer();
    return res.status;
  }

  /** A /64 of the documentation range (RFC 3849) of this run's own. */
  function freshPrefix(): string {
    const hextet = () => Math.floor(Math.random() * 0x10000).toString(16);
    return `2001:db8:${hextet()}:${hextet()}`;
  }

  it('counts eight IPv6 addresses of one /64 as one client of the auth tier; another /64 is another client', async () => {
    const prefix = freshPrefix();
    const addresses = Array.from({ length: 8 }, (_, i) => `${prefix}:${(i * 0x1111 + 1).toString(16)}::${i + 1}`);
    const statuses: number[] = [];
    for (const address of addresses) statuses.push(await wrongSignIn(address));
    expect(statuses).toEqual([...Array(AUTH_LIMIT).fill(401), ...Array(8 - AUTH_LIMIT).fill(429)]);
    expect(await wrongSignIn(`${freshPrefix()}::1`)).toBe(401);
  });

  it('counts an IPv4-mapped address as the IPv4 address inside it', async () => {
    const ip = `198.18.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 250)}`;
    const statuses: number[] = [];
    for (const address of [ip, `::ffff:${ip}`, ip, `::FFFF:${ip}`, ip]) statuses.push(await wrongSignIn(address));
    expect(statuses).toEqual(Array(AUTH_LIMIT).fill(401));
    expect(await wrongSignIn(`::ffff:${ip}`)).toBe(429);
    expect(await wrongSignIn(ip)).toBe(429);
  });

  it('answers a 2 MiB chunked body with 413, and the next request, from another connection, normally (6 rounds)', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const rounds: string[] = [];
    for (let round = 0; round < 6; round++) {
      const refused = await rawRequest(worker.url, {
        method: 'POST',
        path: '/api/roles',
        headers: { 'content-type': 'application/json', origin: APP_ORIGIN },
        chunks: Array.from({ length: 32 }, () => chunk),
      }).catch((error: Error) => ({ status: 0, headers: {}, body: String(error) }) as RawAnswer);
      const next = await rawRequest(worker.url, { path: '/api/health', headers: { origin: APP_ORIGIN } }).catch(
        (error: Error) => ({ status: 0, headers: {}, body: String(error) }) as RawAnswer,
      );
      rounds.push(`${refused.status} ${refused.body.slice(0, 80)} | ${next.status} ${next.body.slice(0, 80)}`);
      expect(refused.status, rounds.join('\n')).toBe(413);
      expect(JSON.parse(refused.body)).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) });
      expect(refused.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(next.status, rounds.join('\n')).toBe(200);
      expect(JSON.parse(next.body)).toEqual({ status: 'ok' });
      expect(next.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(next.headers['content-security-policy']).toMatch(/^default-src 'none'; /);
    }
  });

  it('answers a Content-Length over the limit with 413, and the next request normally', async () => {
    for (let round = 0; round < 3; round++) {
      const refused = await fetch(`${worker.url}/api/roles`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: APP_ORIGIN },
        body: new Uint8Array(2 * 1024 * 1024),
      });
      expect(refused.status).toBe(413);
      expect(await refused.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
      const next = await rawRequest(worker.url, { path: '/api/health' });
      expect(next.status).toBe(200);
      expect(next.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('walks the webhook URL table through POST /api/webhooks: refused ones 400 on `url`, accepted ones 201', async () => {
    // The organization owner's own client address, so the other tests' auth-tier counts do not touch it.
    const address = `198.18.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 250)}`;
    const jar = new CookieJar();
    const call = async (path: string, body?: unknown, redirect: RequestRedirect = 'follow') => {
      const headers: Record<string, string> = { origin: APP_ORIGIN, 'cf-connecting-ip': address };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const cookie = jar.header();
      if (cookie) headers.cookie = cookie;
      const res = await fetch(`${worker.url}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect,
      });
      jar.store(res);
      const text = await res.text();
      return { status: res.status, text, body: text ? JSON.parse(text) : null };
    };
    // Sign up, follow the mailed link, sign in once: three requests of the auth tier (limit 5).
    const email = uniqueEmail('worker-hooks');
    expect((await call('/api/auth/sign-up/email', { email, password: PASSWORD, name: 'Hook Owner' })).status).toBe(200);
    await expect.poll(() => mail.emails.some((m) => [m.to].flat().includes(email)), { timeout: 10_000 }).toBe(true);
    const link = new URL(firstLink(mail.emails.find((m) => [m.to].flat().includes(email))!.text ?? ''));
    expect([200, 302]).toContain((await call(link.pathname + link.search, undefined, 'manual')).status);
    const signIn = await call('/api/auth/sign-in/email', { email, password: PASSWORD });
    expect(signIn.status, signIn.text).toBe(200);
    const org = await call('/api/auth/organization/create', {
      name: 'Hook Org',
      slug: `hooks-${crypto.randomUUID().slice(0, 8)}`,
    });
    expect(org.status, org.text).toBe(200);
    const active = await call('/api/auth/organization/set-active', { organizationId: org.body.id });
    expect(active.status, active.text).toBe(200);

    const answers: string[] = [];
    const wrong: string[] = [];
    for (const { url, refused, why, reason } of WEBHOOK_URL_CASES) {
      const res = await call('/api/webhooks', { url, events: ['role.created'] });
      const line = `${url} (${why}): ${res.status} ${res.text.slice(0, 160)}`;
      answers.push(line);
      const right = refused
        ? res.status === 400 &&
          res.body?.code === 'VALIDATION_ERROR' &&
          res.body.details?.length === 1 &&
          res.body.details[0].path === 'url' &&
          res.body.details[0].message === reason
        : res.status === 201 && res.body?.url === url;
      if (!right) wrong.push(`expected ${refused ? `400 url: ${reason}` : '201'} for ${line}`);
    }
    expect(wrong, answers.join('\n')).toEqual([]);
    const listed = await call('/api/webhooks');
    expect(listed.status, listed.text).toBe(200);
    const urls = (Array.isArray(listed.body) ? listed.body : listed.body.items).map((w: { url: string }) => w.url);
    expect([...urls].sort()).toEqual(
      WEBHOOK_URL_CASES.filter((c) => !c.refused)
        .map((c) => c.url)
        .sort(),
    );
  });
});
