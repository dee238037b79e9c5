/**
 * docs/api.md "Rate limiting" (and "Errors" for the 429), README "Configuration".
 *
 * Runs twice: `npm test` (in-memory store) and `npm run test:integration`
 * (the Upstash store through the test server over real Redis). Tests on the
 * default store check behaviour only; the ones that need to move time build
 * the in-memory store on a test clock explicitly.
 */

import type { AddressInfo } from 'node:net';
import { createServer, type Server, type Socket } from 'node:net';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizePath, rateLimit, rateLimitTiers } from '../../src/middleware/rate-limit.js';
import { renderError } from '../../src/middleware/render-error.js';
import { createMemoryStore, createUpstashStore, type RateLimitStore } from '../../src/platform/rate-limit-store.js';
import { LIBRARY_RATE_LIMITS } from '../../src/routes/auth.js';
import { clientIpFromForwardedFor } from '../../src/shared/client-address.js';
import { parseConfig } from '../../src/shared/config.js';
import type { AppEnv } from '../../src/shared/types.js';
import { createTestApp, createTestClock, TEST_SECRET, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { expectRateLimited, nextIp, RATE_LIMIT_HEADERS } from '../support/rate-limit.js';
import { signedInUser } from '../support/users.js';

// The tiers the app hands the limiter: the library's auth-tier paths from its routes' rows, and the service's.
const tiers = rateLimitTiers(LIBRARY_RATE_LIMITS);
const { authPaths: AUTH_SENSITIVE_PATHS, tierOf } = tiers;
const isAuthSensitive = (path: string) => tierOf(path) === 'auth';

const SIGN_IN = '/api/auth/sign-in/email';
const PURGE = '/api/users/me/purge';

type Requestable = { request: (path: string, init?: RequestInit) => Response | Promise<Response> };

function send(
  app: Requestable,
  path: string,
  options: { xff: string; method?: string; headers?: Record<string, string> },
) {
  return app.request(path, {
    method: options.method ?? 'GET',
    headers: { 'x-forwarded-for': options.xff, ...options.headers },
  });
}

async function sendMany(app: Requestable, count: number, path: string, options: { xff: string; method?: string }) {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await send(app, path, options)).status);
  return statuses;
}

function expectNoRateLimitHeaders(res: Response) {
  for (const name of RATE_LIMIT_HEADERS) expect(res.headers.get(name), name).toBeNull();
}

describe('rate limit helpers', () => {
  it('normalizePath folds case, repeated slashes, `.` segments, a trailing slash and percent-encoding', () => {
    for (const path of [
      '/api/auth/sign-in/email',
      '/api/auth/sign-in/email/',
      '/api/auth//sign-in/email',
      '//api///auth/sign-in//email//',
      '/API/AUTH/SIGN-IN/EMAIL',
      '/Api/Auth/Sign-In/Email',
      '/api/auth/./sign-in/email',
      '/./api/auth/sign-in/./email/.',
      '/api/auth/sign%2Din/email',
      '/api/auth/%73ign-in/email',
      '/api/auth/SIGN%2din/email',
      '/api/auth%2Fsign-in/email',
    ]) {
      expect(normalizePath(path), path).toBe('/api/auth/sign-in/email');
    }
    expect(normalizePath('/')).toBe('/');
    expect(normalizePath('')).toBe('/');
    // A malformed escape is kept, not thrown on.
    expect(normalizePath('/api/auth/sign-in/%E0%A4%A')).toBe('/api/auth/sign-in/%e0%a4%a');
  });

  it('isAuthSensitive covers every auth-sensitive path, the paths below each, and their disguises', () => {
    for (const prefix of AUTH_SENSITIVE_PATHS) {
      expect(isAuthSensitive(prefix), prefix).toBe(true);
      expect(isAuthSensitive(`${prefix}/`), `${prefix}/`).toBe(true);
      expect(isAuthSensitive(`${prefix}/sub`), `${prefix}/sub`).toBe(true);
      expect(isAuthSensitive(prefix.toUpperCase()), prefix.toUpperCase()).toBe(true);
      expect(isAuthSensitive(prefix.replaceAll('/', '//')), 'doubled slashes').toBe(true);
    }
    expect(AUTH_SENSITIVE_PATHS).toEqual(
      expect.arrayContaining([
        '/api/auth/sign-in',
        '/api/auth/sign-up',
        '/api/auth/request-password-reset',
        '/api/auth/reset-password',
        '/api/auth/magic-link',
        '/api/auth/change-password',
        '/api/auth/verify-email',
        '/api/auth/send-verification-email',
        '/api/users/me/purge',
      ]),
    );
    for (const path of [
      '/api/auth/sign-in/email/',
      '/api/auth//sign-in/email',
      '/API/AUTH/SIGN-IN/EMAIL',
      '/api/auth/./sign-in/email',
      '/api/auth/sign%2Din/email',
      '/api/auth/sign-up/email',
      '/api/auth/sign-in/social',
    ]) {
      expect(isAuthSensitive(path), path).toBe(true);
    }
    for (const path of [
      '/',
      '/api/health',
      '/api/auth/get-session',
      '/api/auth/sign-out',
      '/api/auth/sign-inx',
      '/api/auth/sign-in-other',
      '/api/users/me',
      '/api/users/me/purgeall',
      '/api/users/me/export',
      '/sign-in',
    ]) {
      expect(isAuthSensitive(path), path).toBe(false);
    }
  });

  it('clientIpFromForwardedFor trusts one hop: the right-most entry', () => {
    expect(clientIpFromForwardedFor('203.0.113.7')).toBe('203.0.113.7');
    expect(clientIpFromForwardedFor('1.2.3.4, 203.0.113.7')).toBe('203.0.113.7');
    expect(clientIpFromForwardedFor('1.2.3.4,5.6.7.8 ,  203.0.113.7 ')).toBe('203.0.113.7');
    expect(clientIpFromForwardedFor('2001:db8::1')).toBe('2001:db8::1');
    expect(clientIpFromForwardedFor(undefined)).toBeNull();
    expect(clientIpFromForwardedFor('')).toBeNull();
    expect(clientIpFromForwardedFor(' , ')).toBeNull();
  });
});

describe('rate limiting on the default store', () => {
  const GLOBAL_LIMIT = 10;
  const AUTH_LIMIT = 5; // the default: RATE_LIMIT_AUTH_LIMIT is not set
  const TTL = 86_400; // long (epoch-aligned) windows: a run straddling a window boundary is vanishingly rare on the Redis store
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({
      env: {
        RATE_LIMIT_ENABLED: 'true',
        RATE_LIMIT_GLOBAL_LIMIT: String(GLOBAL_LIMIT),
        RATE_LIMIT_GLOBAL_TTL: String(TTL),
        RATE_LIMIT_AUTH_TTL: String(TTL),
        // A loaded machine must not turn a slow store into the failure rule in
        // these counting tests; the timeout has tests of its own below.
        RATE_LIMIT_STORE_TIMEOUT_MS: '10000',
      },
    });
  });
  afterAll(() => t?.close());

  it('uses the default of 5 for the auth tier', () => {
    expect(t.config.rateLimit.auth.limit).toBe(AUTH_LIMIT);
    expect(t.config.rateLimit.auth.blockDuration).toBe(300);
  });

  it('global tier: N requests pass without rate-limit headers, then 429 RATE_LIMITED with all four headers', async () => {
    const ip = nextIp();
    for (let i = 0; i < GLOBAL_LIMIT; i++) {
      const res = await send(t.app, '/api/health', { xff: ip });
      expect(res.status, `request ${i + 1}`).toBe(200);
      expectNoRateLimitHeaders(res);
    }
    const before = Math.floor(Math.min(t.clock().getTime(), Date.now()) / 1000);
    const res = await send(t.app, '/api/health', { xff: ip });
    const after = Math.ceil(Math.max(t.clock().getTime(), Date.now()) / 1000);
    const { reset, retryAfter } = await expectRateLimited(res, GLOBAL_LIMIT);
    // Unix seconds (not milliseconds), at the end of the current window.
    expect(reset).toBeGreaterThan(before);
    expect(reset).toBeLessThanOrEqual(after + TTL);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(TTL + 60);
    // Stays limited.
    expect((await send(t.app, '/api/health', { xff: ip })).status).toBe(429);
  });

  it('keys on the right-most x-forwarded-for entry: varying the left-most entry buys nothing', async () => {
    const proxyAdded = nextIp();
    const statuses: number[] = [];
    for (let n = 0; n < GLOBAL_LIMIT + 3; n++) {
      statuses.push((await send(t.app, '/api/health', { xff: `1.2.3.${n}, ${proxyAdded}` })).status);
    }
    expect(statuses.slice(0, GLOBAL_LIMIT)).toEqual(Array(GLOBAL_LIMIT).fill(200));
    expect(statuses.slice(GLOBAL_LIMIT)).toEqual([429, 429, 429]);
    // Same right-most entry, any (or no) left part: still limited.
    expect((await send(t.app, '/api/health', { xff: proxyAdded })).status).toBe(429);
    expect((await send(t.app, '/api/health', { xff: `9.9.9.9,${proxyAdded}` })).status).toBe(429);
  });

  it('gives different right-most entries separate budgets', async () => {
    const exhausted = nextIp();
    const other = nextIp();
    expect(await sendMany(t.app, GLOBAL_LIMIT + 1, '/api/health', { xff: `10.0.0.1, ${exhausted}` })).toEqual([
      ...Array(GLOBAL_LIMIT).fill(200),
      429,
    ]);
    // The same left part in front of another right-most entry: a full budget of its own.
    expect(await sendMany(t.app, GLOBAL_LIMIT, '/api/health', { xff: `10.0.0.1, ${other}` })).toEqual(
      Array(GLOBAL_LIMIT).fill(200),
    );
    expect((await send(t.app, '/api/health', { xff: `10.0.0.1, ${other}` })).status).toBe(429);
    expect((await send(t.app, '/api/health', { xff: exhausted })).status).toBe(429);
  });

  it('keys a signed-in user on the user id: changing address buys nothing, and the address keeps its own budget', async () => {
    const user = await signedInUser(t);
    const addresses = Array.from({ length: GLOBAL_LIMIT + 1 }, () => nextIp());
    const statuses: number[] = [];
    for (const address of addresses.slice(0, GLOBAL_LIMIT)) {
      statuses.push((await call(t, '/api/session', { jar: user.jar, ip: address })).status);
    }
    expect(statuses).toEqual(Array(GLOBAL_LIMIT).fill(200));
    await expectRateLimited(
      await call(t, '/api/session', { jar: user.jar, ip: addresses[GLOBAL_LIMIT] }),
      GLOBAL_LIMIT,
    );
    // The same addresses without the session are keyed by address: untouched budgets.
    expect((await send(t.app, '/api/health', { xff: addresses[0]! })).status).toBe(200);
    expect((await send(t.app, '/api/health', { xff: addresses[GLOBAL_LIMIT]! })).status).toBe(200);
  });

  it('auth tier: 5 sign-in attempts, then 429 (the limiter runs before routing)', async () => {
    const ip = nextIp();
    for (let i = 0; i < AUTH_LIMIT; i++) {
      const res = await send(t.app, SIGN_IN, { xff: ip, method: 'POST' });
      expect(res.status, `attempt ${i + 1}`).not.toBe(429);
      expectNoRateLimitHeaders(res);
    }
    const before = Math.floor(Math.min(t.clock().getTime(), Date.now()) / 1000);
    const { reset, retryAfter } = await expectRateLimited(
      await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }),
      AUTH_LIMIT,
    );
    // The later of the window end and the block end (5 min).
    expect(reset).toBeGreaterThanOrEqual(before + 300 - 1);
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + TTL + 300);
    expect(retryAfter).toBeGreaterThanOrEqual(300 - 5);
    // Blocked: every auth-sensitive path, not only the one that was hammered.
    await expectRateLimited(await send(t.app, '/api/auth/sign-up/email', { xff: ip, method: 'POST' }), AUTH_LIMIT);
    // The global tier still has budget left for this identity (5 of 10 used).
    expect((await send(t.app, '/api/health', { xff: ip })).status).toBe(200);
  });

  it('auth tier also covers POST /api/users/me/purge', async () => {
    const ip = nextIp();
    const statuses = await sendMany(t.app, AUTH_LIMIT, PURGE, { xff: ip, method: 'POST' });
    expect(statuses).not.toContain(429);
    await expectRateLimited(await send(t.app, PURGE, { xff: ip, method: 'POST' }), AUTH_LIMIT);
  });

  it('requests to paths that are not auth-sensitive do not consume the auth budget', async () => {
    const ip = nextIp();
    // 4 non-sensitive requests (global budget 10 covers them plus the 5 sign-ins).
    for (const path of ['/api/health', '/api/users/me', '/api/auth/get-session', '/api/users/me/export']) {
      expect((await send(t.app, path, { xff: ip })).status, path).not.toBe(429);
    }
    expect(await sendMany(t.app, AUTH_LIMIT, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
    await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), AUTH_LIMIT);
  });

  it.each([
    '/api/auth/sign-in/email/',
    '/api/auth//sign-in/email',
    '/API/AUTH/SIGN-IN/EMAIL',
    '/api/auth/./sign-in/email',
    '/api/auth/sign%2Din/email',
    '/api/auth/%73ign-in/email',
  ])('%s counts against the same auth budget as /api/auth/sign-in/email', async (variant) => {
    const ip = nextIp();
    // Mixed: the variant spends budget, and is refused once the canonical path spent the rest.
    expect((await send(t.app, variant, { xff: ip, method: 'POST' })).status).not.toBe(429);
    expect(await sendMany(t.app, AUTH_LIMIT - 1, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
    await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), AUTH_LIMIT);
    await expectRateLimited(await send(t.app, variant, { xff: ip, method: 'POST' }), AUTH_LIMIT);
  });

  it('all the disguises of one path share one budget', async () => {
    const ip = nextIp();
    const variants = [
      '/api/auth/sign-in/email/',
      '/api/auth//sign-in/email',
      '/API/AUTH/SIGN-IN/EMAIL',
      '/api/auth/./sign-in/email',
      '/api/auth/sign%2Din/email',
    ];
    for (const variant of variants)
      expect((await send(t.app, variant, { xff: ip, method: 'POST' })).status, variant).not.toBe(429);
    await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), AUTH_LIMIT);
  });

  it('does not count OPTIONS (CORS preflight) requests', async () => {
    const ip = nextIp();
    for (let i = 0; i < GLOBAL_LIMIT + 2; i++) {
      const res = await send(t.app, SIGN_IN, {
        xff: ip,
        method: 'OPTIONS',
        headers: { Origin: 'http://localhost:3000', 'Access-Control-Request-Method': 'POST' },
      });
      expect(res.status).not.toBe(429);
    }
    expect((await send(t.app, '/api/health', { xff: ip, method: 'OPTIONS' })).status).not.toBe(429);
    expect(await sendMany(t.app, AUTH_LIMIT, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
    expect(await sendMany(t.app, GLOBAL_LIMIT - AUTH_LIMIT, '/api/health', { xff: ip })).toEqual(
      Array(GLOBAL_LIMIT - AUTH_LIMIT).fill(200),
    );
    expect((await send(t.app, '/api/health', { xff: ip })).status).toBe(429);
  });

  it('a parallel burst of 3×limit from one identity lets exactly `limit` through (global tier)', async () => {
    const ip = nextIp();
    const responses = await Promise.all(
      Array.from({ length: 3 * GLOBAL_LIMIT }, () => send(t.app, '/api/health', { xff: ip })),
    );
    const statuses = responses.map((res) => res.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(GLOBAL_LIMIT);
    expect(statuses.filter((status) => status === 429)).toHaveLength(2 * GLOBAL_LIMIT);
  });

  it('a parallel burst of 3×limit from one identity lets exactly `limit` through (auth tier)', async () => {
    const ip = nextIp();
    const responses = await Promise.all(
      Array.from({ length: 3 * AUTH_LIMIT }, () => send(t.app, SIGN_IN, { xff: ip, method: 'POST' })),
    );
    const statuses = responses.map((res) => res.status);
    expect(statuses.filter((status) => status !== 429)).toHaveLength(AUTH_LIMIT);
    for (const res of responses)
      if (res.status === 429) expect(res.headers.get('X-RateLimit-Limit')).toBe(String(AUTH_LIMIT));
  });

  it('RATE_LIMIT_ENABLED=false never answers 429', async () => {
    const off = await createTestApp({
      database: t.database,
      env: {
        RATE_LIMIT_ENABLED: 'false',
        RATE_LIMIT_GLOBAL_LIMIT: '2',
        RATE_LIMIT_AUTH_LIMIT: '1',
        RATE_LIMIT_GLOBAL_TTL: String(TTL),
        RATE_LIMIT_AUTH_TTL: String(TTL),
      },
    });
    try {
      const ip = nextIp();
      const global = await sendMany(off.app, 6, '/api/health', { xff: ip });
      expect(global).toEqual(Array(6).fill(200));
      const auth = await sendMany(off.app, 6, SIGN_IN, { xff: ip, method: 'POST' });
      expect(auth).not.toContain(429);
      const burst = await Promise.all(
        Array.from({ length: 6 }, () => send(off.app, PURGE, { xff: ip, method: 'POST' })),
      );
      expect(burst.map((res) => res.status)).not.toContain(429);
    } finally {
      await off.close();
    }
  });
});

describe('rate limiting on a controlled clock (in-memory store)', () => {
  // One second into an epoch-aligned minute (and hour): windows end where the test says.
  const START = Date.UTC(2030, 0, 1, 0, 0, 1);
  let shared: TestApp;

  beforeAll(async () => {
    shared = await createTestApp();
  });
  afterAll(() => shared?.close());

  async function appOnClock(env: Record<string, string>) {
    const clock = createTestClock(START);
    return createTestApp({
      database: shared.database,
      clock,
      store: createMemoryStore(clock),
      env: { RATE_LIMIT_ENABLED: 'true', ...env },
    });
  }

  it('global tier: Reset is the window end in Unix seconds, Retry-After the seconds to it; a new window brings a new budget', async () => {
    const t = await appOnClock({ RATE_LIMIT_GLOBAL_LIMIT: '3', RATE_LIMIT_GLOBAL_TTL: '60' });
    try {
      const ip = nextIp();
      expect(await sendMany(t.app, 3, '/api/health', { xff: ip })).toEqual([200, 200, 200]);
      t.clock.advance(10_000);
      const windowEnd = START - 1000 + 60_000;
      const { reset, retryAfter } = await expectRateLimited(await send(t.app, '/api/health', { xff: ip }), 3);
      expect(reset).toBe(windowEnd / 1000);
      expect(retryAfter).toBe(49);
      t.clock.set(windowEnd - 1);
      expect((await send(t.app, '/api/health', { xff: ip })).status).toBe(429);
      t.clock.set(windowEnd);
      const res = await send(t.app, '/api/health', { xff: ip });
      expect(res.status).toBe(200);
      expectNoRateLimitHeaders(res);
    } finally {
      await t.close();
    }
  });

  it('auth tier: after exceeding, the block outlasts the window and ends at the block end', async () => {
    const t = await appOnClock({
      RATE_LIMIT_GLOBAL_LIMIT: '1000',
      RATE_LIMIT_AUTH_TTL: '60',
      RATE_LIMIT_AUTH_BLOCK_DURATION: '300',
    });
    try {
      const ip = nextIp();
      expect(await sendMany(t.app, 5, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
      const blockEnd = START + 300_000;
      let limited = await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      expect(limited.reset).toBe(blockEnd / 1000);
      expect(limited.retryAfter).toBe(300);

      // The window (ends START + 59 s) is over; the block is not.
      t.clock.advance(61_000);
      limited = await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      expect(limited.reset).toBe(blockEnd / 1000);
      expect(limited.retryAfter).toBe(239);
      await expectRateLimited(await send(t.app, PURGE, { xff: ip, method: 'POST' }), 5);

      t.clock.set(blockEnd - 1);
      limited = await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      expect(limited.reset).toBe(blockEnd / 1000);
      expect(limited.retryAfter).toBe(1);

      // Block over: a fresh budget of 5, then blocked again.
      t.clock.set(blockEnd);
      const res = await send(t.app, SIGN_IN, { xff: ip, method: 'POST' });
      expect(res.status).not.toBe(429);
      expectNoRateLimitHeaders(res);
      expect(await sendMany(t.app, 4, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
      limited = await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      expect(limited.reset).toBe((blockEnd + 300_000) / 1000);
    } finally {
      await t.close();
    }
  });

  it('auth tier: requests refused during the block do not extend it', async () => {
    const t = await appOnClock({
      RATE_LIMIT_GLOBAL_LIMIT: '1000',
      RATE_LIMIT_AUTH_TTL: '60',
      RATE_LIMIT_AUTH_BLOCK_DURATION: '120',
    });
    try {
      const ip = nextIp();
      expect(await sendMany(t.app, 5, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
      await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      for (let i = 0; i < 5; i++) {
        t.clock.advance(20_000);
        await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      }
      t.clock.set(START + 120_000);
      expect((await send(t.app, SIGN_IN, { xff: ip, method: 'POST' })).status).not.toBe(429);
    } finally {
      await t.close();
    }
  });

  it('auth tier with RATE_LIMIT_AUTH_BLOCK_DURATION=0: no block, the next window is open', async () => {
    const t = await appOnClock({
      RATE_LIMIT_GLOBAL_LIMIT: '1000',
      RATE_LIMIT_AUTH_TTL: '60',
      RATE_LIMIT_AUTH_BLOCK_DURATION: '0',
    });
    try {
      const ip = nextIp();
      expect(await sendMany(t.app, 5, SIGN_IN, { xff: ip, method: 'POST' })).not.toContain(429);
      const windowEnd = START - 1000 + 60_000;
      const limited = await expectRateLimited(await send(t.app, SIGN_IN, { xff: ip, method: 'POST' }), 5);
      expect(limited.reset).toBe(windowEnd / 1000);
      t.clock.set(windowEnd);
      expect((await send(t.app, SIGN_IN, { xff: ip, method: 'POST' })).status).not.toBe(429);
    } finally {
      await t.close();
    }
  });

  it('blocks one identity only', async () => {
    const t = await appOnClock({ RATE_LIMIT_GLOBAL_LIMIT: '1000', RATE_LIMIT_AUTH_TTL: '60' });
    try {
      const blocked = nextIp();
      const other = nextIp();
      expect(await sendMany(t.app, 6, SIGN_IN, { xff: blocked, method: 'POST' })).toContain(429);
      t.clock.advance(61_000);
      expect((await send(t.app, SIGN_IN, { xff: blocked, method: 'POST' })).status).toBe(429);
      expect(await sendMany(t.app, 5, SIGN_IN, { xff: `${blocked}, ${other}`, method: 'POST' })).not.toContain(429);
      // Global-tier requests of the blocked identity still pass.
      expect((await send(t.app, '/api/health', { xff: blocked })).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('the middleware on its own', () => {
  it('skips OPTIONS requests without touching the store', async () => {
    const { config } = parseConfig({
      NODE_ENV: 'test',
      AUTH_SECRET: TEST_SECRET,
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_GLOBAL_LIMIT: '1',
      RATE_LIMIT_AUTH_LIMIT: '1',
    });
    const calls: string[] = [];
    const inner = createMemoryStore();
    const store: RateLimitStore = {
      kind: 'memory',
      limit: (tier, id) => {
        calls.push(`limit:${tier.name}`);
        return inner.limit(tier, id);
      },
      blockedUntil: (tier, id) => {
        calls.push(`blockedUntil:${tier.name}`);
        return inner.blockedUntil(tier, id);
      },
      block: (tier, id, until) => {
        calls.push(`block:${tier.name}`);
        return inner.block(tier, id, until);
      },
      refund: (tier, id, reset) => {
        calls.push(`refund:${tier.name}`);
        return inner.refund(tier, id, reset);
      },
    };
    const app = new Hono<AppEnv>();
    app.use('*', rateLimit({ config: config.rateLimit, store, tiers }));
    app.all('*', (c) => c.text('ok'));
    app.onError(renderError);

    for (let i = 0; i < 5; i++) {
      expect((await send(app, SIGN_IN, { xff: '203.0.113.1', method: 'OPTIONS' })).status).toBe(200);
      expect((await send(app, '/api/health', { xff: '203.0.113.1', method: 'OPTIONS' })).status).toBe(200);
    }
    expect(calls).toEqual([]);
    expect((await send(app, '/api/health', { xff: '203.0.113.1' })).status).toBe(200);
    expect((await send(app, '/api/health', { xff: '203.0.113.1' })).status).toBe(429);
  });
});

describe('when the rate-limit store fails', () => {
  let shared: TestApp;
  beforeAll(async () => {
    shared = await createTestApp();
  });
  afterAll(() => shared?.close());

  const env = { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_GLOBAL_LIMIT: '2', RATE_LIMIT_AUTH_LIMIT: '1' };

  const failingStore: RateLimitStore = {
    kind: 'upstash',
    limit: async () => {
      throw new Error('store down');
    },
    blockedUntil: async () => {
      throw new Error('store down');
    },
    block: async () => {
      throw new Error('store down');
    },
    refund: async () => {
      throw new Error('store down');
    },
  };

  async function expectFailureRules(t: TestApp, maxMs: number) {
    const ip = nextIp();
    // Auth tier: fail closed.
    let started = performance.now();
    const auth = await send(t.app, SIGN_IN, { xff: ip, method: 'POST' });
    expect(performance.now() - started).toBeLessThan(maxMs);
    expect(auth.status).toBe(503);
    expect(await auth.json()).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
    expectNoRateLimitHeaders(auth);
    expect((await send(t.app, PURGE, { xff: ip, method: 'POST' })).status).toBe(503);

    // Global tier: fail open, with an error-level log line; more requests than the limit all pass.
    for (let i = 0; i < 4; i++) {
      started = performance.now();
      const res = await send(t.app, '/api/health', { xff: ip });
      expect(performance.now() - started).toBeLessThan(maxMs);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok' });
    }
    const failures = t.logger.lines.filter((line) => line.event === 'rate_limit.store_failed');
    expect(failures).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ level: 'error', tier: 'global' }),
        expect.objectContaining({ level: 'error', tier: 'auth' }),
      ]),
    );
    expect(failures.filter((line) => line.tier === 'global')).toHaveLength(4);
  }

  it('a store whose calls reject: auth tier 503 SERVICE_UNAVAILABLE, global tier passes and logs rate_limit.store_failed', async () => {
    const t = await createTestApp({ database: shared.database, store: failingStore, env });
    try {
      await expectFailureRules(t, 2000);
    } finally {
      await t.close();
    }
  });

  it('an unreachable Upstash store (closed port): the same rules', async () => {
    const store = createUpstashStore({ url: 'http://127.0.0.1:1', token: 'test-token', timeoutMs: 200 });
    const t = await createTestApp({ database: shared.database, store, env });
    try {
      await expectFailureRules(t, 2000);
    } finally {
      await t.close();
    }
  });

  it('an Upstash store that accepts and never answers: each tier decides within the timeout', async () => {
    const sockets = new Set<Socket>();
    let connections = 0;
    const server: Server = createServer((socket) => {
      connections += 1;
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const store = createUpstashStore({ url: `http://127.0.0.1:${port}`, token: 'test-token', timeoutMs: 300 });
    const t = await createTestApp({ database: shared.database, store, env });
    try {
      await expectFailureRules(t, 2000);
      expect(connections).toBeGreaterThan(0); // it really did connect and wait
    } finally {
      await t.close();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
