/**
 * Rate limits that cannot be bought: the auth tier counts
 * the client address whatever cookie comes along (and the user too when the
 * request acts for one), the password oracle and second-factor routes are in
 * it, and wrong passwords for one email are counted across every address.
 *
 * Runs on the in-memory store under `npm test` and on the Upstash store over
 * real Redis under `npm run test:integration`, except where a test clock or a
 * failing store is built explicitly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountKey } from '../../src/middleware/rate-limit.js';
import { createMemoryStore, type RateLimitStore } from '../../src/platform/rate-limit-store.js';
import { createTestApp, createTestClock, type TestApp } from '../support/app.js';
import { type CookieJar, call } from '../support/http.js';
import { expectRateLimited, nextIp } from '../support/rate-limit.js';
import { PASSWORD, type SignedInUser, signedInUser, uniqueEmail } from '../support/users.js';

const SIGN_IN = '/api/auth/sign-in/email';
const VERIFY_PASSWORD = '/api/auth/verify-password';
const AUTH_LIMIT = 5;
const ACCOUNT_LIMIT = 6;
const TTL = 86_400; // epoch-aligned day windows: a run straddling a boundary is vanishingly rare

/** A fresh unknown email per attempt: auth-tier tests must not reach any account's failure budget. */
const ghost = () => uniqueEmail('ghost');

const signIn = (t: Pick<TestApp, 'app'>, email: string, password: string, ip: string, jar?: CookieJar) =>
  call(t, SIGN_IN, { body: { email, password }, ip, jar });

const LIMITED_ENV = {
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_GLOBAL_LIMIT: '1000',
  RATE_LIMIT_GLOBAL_TTL: String(TTL),
  RATE_LIMIT_AUTH_TTL: String(TTL),
  RATE_LIMIT_ACCOUNT_LIMIT: String(ACCOUNT_LIMIT),
  RATE_LIMIT_ACCOUNT_TTL: String(TTL),
  RATE_LIMIT_STORE_TIMEOUT_MS: '10000',
};

describe('rate limits that cannot be bought', () => {
  /** Accounts are made on an unlimited app over the same database; their cookies work on both. */
  let open: TestApp;
  let t: TestApp;
  let attackerA: SignedInUser;
  let attackerB: SignedInUser;
  let bystander: SignedInUser;

  beforeAll(async () => {
    open = await createTestApp();
    [attackerA, attackerB, bystander] = [await signedInUser(open), await signedInUser(open), await signedInUser(open)];
    t = await createTestApp({ database: open.database, env: LIMITED_ENV });
  });
  afterAll(async () => {
    await t?.close();
    await open?.close();
  });

  describe('the auth tier keys by address whatever cookie is sent', () => {
    it('from an address blocked in the auth tier, the sessions of other accounts the caller owns are still refused', async () => {
      const ip = nextIp();
      for (let i = 0; i < AUTH_LIMIT; i++) expect((await signIn(t, ghost(), `wrong-${i}`, ip)).status).toBe(401);
      await expectRateLimited(await signIn(t, ghost(), 'wrong-again', ip), AUTH_LIMIT);
      for (const attacker of [attackerA, attackerB]) {
        await expectRateLimited(await signIn(t, ghost(), 'wrong-with-cookie', ip, attacker.jar), AUTH_LIMIT);
      }
      // Every auth-sensitive path, with or without a session: the address is blocked.
      await expectRateLimited(
        await call(t, VERIFY_PASSWORD, { body: { password: PASSWORD }, ip, jar: attackerA.jar }),
        AUTH_LIMIT,
      );
      await expectRateLimited(
        await call(t, '/api/auth/request-password-reset', { body: { email: ghost() }, ip, jar: attackerB.jar }),
        AUTH_LIMIT,
      );
    });

    it('a cookie does not start a fresh address budget: attempts with and without sessions share it', async () => {
      const ip = nextIp();
      const statuses = [
        (await signIn(t, ghost(), 'w1', ip, attackerA.jar)).status,
        (await signIn(t, ghost(), 'w2', ip, attackerB.jar)).status,
        (await call(t, VERIFY_PASSWORD, { body: { password: 'w3' }, ip, jar: attackerA.jar })).status,
        (await call(t, VERIFY_PASSWORD, { body: { password: 'w4' }, ip, jar: attackerB.jar })).status,
        (await signIn(t, ghost(), 'w5', ip)).status,
      ];
      expect(statuses).not.toContain(429);
      await expectRateLimited(await signIn(t, ghost(), 'w6', ip, bystander.jar), AUTH_LIMIT);
      await expectRateLimited(await signIn(t, ghost(), 'w7', ip), AUTH_LIMIT);
    });

    it('verify-password (a password oracle) is in the auth tier, and its block covers sign-in', async () => {
      const ip = nextIp();
      for (let i = 0; i < AUTH_LIMIT; i++) {
        expect(
          (await call(t, VERIFY_PASSWORD, { body: { password: `guess-${i}` }, ip })).status,
          `attempt ${i + 1}`,
        ).not.toBe(429);
      }
      await expectRateLimited(await call(t, VERIFY_PASSWORD, { body: { password: 'guess' }, ip }), AUTH_LIMIT);
      await expectRateLimited(await signIn(t, bystander.email, PASSWORD, ip), AUTH_LIMIT);
    });

    it.each([
      '/api/auth/two-factor/verify-totp',
      '/api/auth/two-factor/verify-backup-code',
      '/api/auth/two-factor/verify-otp',
    ])('%s (a pending sign-in, no session) counts by address', async (path) => {
      const ip = nextIp();
      for (let i = 0; i < AUTH_LIMIT; i++)
        expect((await call(t, path, { body: { code: '000000' }, ip })).status, `attempt ${i + 1}`).not.toBe(429);
      await expectRateLimited(await call(t, path, { body: { code: '000000' }, ip }), AUTH_LIMIT);
      await expectRateLimited(await call(t, path, { body: { code: '000000' }, ip, jar: attackerA.jar }), AUTH_LIMIT);
    });

    it('an attempt made for a signed-in user also counts against the user: changing address buys nothing', async () => {
      const user = await signedInUser(open);
      for (let i = 0; i < AUTH_LIMIT; i++) {
        expect(
          (await call(t, VERIFY_PASSWORD, { body: { password: `guess-${i}` }, ip: nextIp(), jar: user.jar })).status,
          `attempt ${i + 1}`,
        ).not.toBe(429);
      }
      await expectRateLimited(
        await call(t, VERIFY_PASSWORD, { body: { password: 'guess' }, ip: nextIp(), jar: user.jar }),
        AUTH_LIMIT,
      );
      await expectRateLimited(
        await call(t, '/api/auth/change-password', {
          body: { currentPassword: 'guess', newPassword: 'another long password' },
          ip: nextIp(),
          jar: user.jar,
        }),
        AUTH_LIMIT,
      );
      // The addresses it used keep their own budgets for everyone else.
      expect((await signIn(t, bystander.email, PASSWORD, nextIp())).status).toBe(200);
    });

    it('the global tier still keys a signed-in user on the user id (docs/security.md "Client addresses")', async () => {
      const small = await createTestApp({
        database: open.database,
        env: { ...LIMITED_ENV, RATE_LIMIT_GLOBAL_LIMIT: '3' },
      });
      try {
        const ip = nextIp();
        for (let i = 0; i < 3; i++) expect((await call(small, '/api/health', { ip })).status).toBe(200);
        expect((await call(small, '/api/health', { ip })).status).toBe(429);
        expect((await call(small, '/api/session', { ip, jar: attackerA.jar })).status).toBe(200);
      } finally {
        await small.close();
      }
    });
  });

  describe('wrong passwords for one account, from any address', () => {
    it('failures from three addresses reach the threshold; then any address is refused for that email, not for another account', async () => {
      const target = await signedInUser(open);
      const [a, b, c] = [nextIp(), nextIp(), nextIp()];
      for (const ip of [a, a, b, b, c, c])
        expect((await signIn(t, target.email, 'not-the-password', ip)).status).toBe(401);
      const fresh = nextIp();
      const { retryAfter } = await expectRateLimited(
        await signIn(t, target.email, 'not-the-password', fresh),
        ACCOUNT_LIMIT,
      );
      expect(retryAfter).toBeLessThanOrEqual(TTL);
      // Even the right password, and in any spelling of the address.
      await expectRateLimited(await signIn(t, target.email, PASSWORD, nextIp()), ACCOUNT_LIMIT);
      await expectRateLimited(await signIn(t, target.email.toUpperCase(), PASSWORD, nextIp()), ACCOUNT_LIMIT);
      // Another account signs in from the same fresh address.
      const other = await signIn(t, bystander.email, PASSWORD, fresh);
      expect(other.status).toBe(200);
      // A signed-in session of the target is untouched: the counter limits password guessing only.
      expect((await call(t, '/api/session', { ip: fresh, jar: target.jar })).status).toBe(200);
    });

    it('failures in different spellings of one email share the counter', async () => {
      const target = await signedInUser(open);
      const upperFirst = target.email.replace(/^./, (ch) => ch.toUpperCase());
      const spellings = [
        target.email,
        target.email.toUpperCase(),
        upperFirst,
        target.email.toUpperCase(),
        upperFirst,
        target.email,
      ];
      for (const email of spellings) expect((await signIn(t, email, 'wrong', nextIp())).status, email).toBe(401);
      await expectRateLimited(await signIn(t, target.email, PASSWORD, nextIp()), ACCOUNT_LIMIT);
    });

    it('successful sign-ins spend nothing', async () => {
      const target = await signedInUser(open);
      for (let i = 0; i < ACCOUNT_LIMIT + 2; i++)
        expect((await signIn(t, target.email, PASSWORD, nextIp())).status, `sign-in ${i + 1}`).toBe(200);
      for (let i = 0; i < ACCOUNT_LIMIT; i++)
        expect((await signIn(t, target.email, 'wrong', nextIp())).status).toBe(401);
      await expectRateLimited(await signIn(t, target.email, PASSWORD, nextIp()), ACCOUNT_LIMIT);
    });

    it('a success does not clear earlier failures', async () => {
      const target = await signedInUser(open);
      for (let i = 0; i < ACCOUNT_LIMIT - 1; i++)
        expect((await signIn(t, target.email, 'wrong', nextIp())).status).toBe(401);
      expect((await signIn(t, target.email, PASSWORD, nextIp())).status).toBe(200);
      expect((await signIn(t, target.email, 'wrong', nextIp())).status).toBe(401);
      await expectRateLimited(await signIn(t, target.email, 'wrong', nextIp()), ACCOUNT_LIMIT);
    });

    it('unknown emails are counted too (no account is revealed by the counter)', async () => {
      const ghost = uniqueEmail('ghost');
      for (let i = 0; i < ACCOUNT_LIMIT; i++) expect((await signIn(t, ghost, 'wrong', nextIp())).status).toBe(401);
      await expectRateLimited(await signIn(t, ghost, 'wrong', nextIp()), ACCOUNT_LIMIT);
    });

    it('a parallel burst from many addresses gets at most the limit of guesses', async () => {
      const target = await signedInUser(open);
      const responses = await Promise.all(
        Array.from({ length: 3 * ACCOUNT_LIMIT }, () => signIn(t, target.email, 'wrong', nextIp())),
      );
      const statuses = responses.map((res) => res.status);
      expect(statuses.filter((status) => status === 401)).toHaveLength(ACCOUNT_LIMIT);
      expect(statuses.filter((status) => status === 429)).toHaveLength(2 * ACCOUNT_LIMIT);
    });

    it('a body without a usable email is not tied to an account (and is refused further on)', async () => {
      const target = await signedInUser(open);
      for (let i = 0; i < ACCOUNT_LIMIT; i++)
        expect((await signIn(t, target.email, 'wrong', nextIp())).status).toBe(401);
      const malformed = await call(t, SIGN_IN, { body: '{"email":', ip: nextIp() });
      expect(malformed.status).toBe(400);
      const noEmail = await call(t, SIGN_IN, { body: { password: 'x' }, ip: nextIp() });
      expect(noEmail.status).not.toBe(429);
    });
  });
});

describe('the account counter on a controlled clock and store', () => {
  const START = Date.UTC(2030, 0, 1, 0, 0, 1);
  let open: TestApp;
  let user: SignedInUser;

  beforeAll(async () => {
    open = await createTestApp();
    user = await signedInUser(open);
  });
  afterAll(() => open?.close());

  it('refuses until the window ends, then counts afresh; Reset is the window end', async () => {
    const clock = createTestClock(START);
    const t = await createTestApp({
      database: open.database,
      clock,
      store: createMemoryStore(clock),
      env: {
        RATE_LIMIT_ENABLED: 'true',
        RATE_LIMIT_GLOBAL_LIMIT: '1000',
        RATE_LIMIT_ACCOUNT_LIMIT: '3',
        RATE_LIMIT_ACCOUNT_TTL: '900',
      },
    });
    try {
      for (let i = 0; i < 3; i++) expect((await signIn(t, user.email, 'wrong', nextIp())).status).toBe(401);
      const windowEnd = START - 1000 + 900_000;
      clock.advance(60_000);
      const limited = await expectRateLimited(await signIn(t, user.email, PASSWORD, nextIp()), 3);
      expect(limited.reset).toBe(windowEnd / 1000);
      expect(limited.retryAfter).toBe(839);
      clock.set(windowEnd - 1);
      await expectRateLimited(await signIn(t, user.email, PASSWORD, nextIp()), 3);
      clock.set(windowEnd);
      expect((await signIn(t, user.email, PASSWORD, nextIp())).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('keys the store by a SHA-256 of the normalised email, never the email', async () => {
    const identifiers: string[] = [];
    const inner = createMemoryStore();
    const store: RateLimitStore = {
      kind: 'memory',
      limit: (tier, id) => {
        identifiers.push(`${tier.name}|${id}`);
        return inner.limit(tier, id);
      },
      blockedUntil: (tier, id) => {
        identifiers.push(`${tier.name}|${id}`);
        return inner.blockedUntil(tier, id);
      },
      block: (tier, id, until) => {
        identifiers.push(`${tier.name}|${id}`);
        return inner.block(tier, id, until);
      },
      refund: (tier, id, reset) => {
        identifiers.push(`${tier.name}|${id}`);
        return inner.refund(tier, id, reset);
      },
    };
    const t = await createTestApp({ database: open.database, store, env: { RATE_LIMIT_ENABLED: 'true' } });
    try {
      expect((await signIn(t, user.email.toUpperCase(), 'wrong', nextIp())).status).toBe(401);
      expect((await signIn(t, user.email, PASSWORD, nextIp())).status).toBe(200);
      const hex = (await import('node:crypto')).createHash('sha256').update(user.email.toLowerCase()).digest('hex');
      expect(await accountKey(user.email)).toBe(`email:${hex}`);
      expect(await accountKey(` \t${user.email.toUpperCase()} `)).toBe(`email:${hex}`);
      expect(identifiers.filter((id) => id.startsWith('account|'))).toEqual([
        `account|email:${hex}`,
        `account|email:${hex}`,
        `account|email:${hex}`,
      ]);
      for (const id of identifiers) expect(id).not.toContain('@');
    } finally {
      await t.close();
    }
  });

  it('fails closed when the store cannot count the account: 503, while other routes pass', async () => {
    const inner = createMemoryStore();
    const store: RateLimitStore = {
      ...inner,
      limit: async (tier, id) => {
        if (tier.name === 'account') throw new Error('store down');
        return inner.limit(tier, id);
      },
    };
    const t = await createTestApp({ database: open.database, store, env: { RATE_LIMIT_ENABLED: 'true' } });
    try {
      const res = await signIn(t, user.email, PASSWORD, nextIp());
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
      expect(t.logger.lines).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ event: 'rate_limit.store_failed', level: 'error', tier: 'account' }),
        ]),
      );
      expect((await call(t, '/api/health', { ip: nextIp() })).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
