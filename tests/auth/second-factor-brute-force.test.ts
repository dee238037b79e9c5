import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError } from '../support/http.js';
import { enableTotp, freshCode, pendingSignIn, type TwoFactorUser, wrongCode } from '../support/mfa.js';
import { expectRateLimited, nextIp } from '../support/rate-limit.js';
import { signedInUser } from '../support/users.js';

/**
 * A 6-digit code must not be guessable: the auth tier stops one address
 * after a handful of tries, and the account lockout stops guesses spread over
 * many addresses, so a day of guessing tries well under 1% of the 10^6 codes.
 */
const CODE_SPACE = 1_000_000;
/** RFC 6238 window of 1: each guess is compared with the codes of three steps. */
const CODES_PER_GUESS = 3;

describe('second-factor brute force', () => {
  let t: TestApp;
  let user: Awaited<ReturnType<typeof signedInUser>>;
  let factor: TwoFactorUser;

  beforeAll(async () => {
    t = await createTestApp({ env: { RATE_LIMIT_ENABLED: 'true' } });
    user = await signedInUser(t);
    factor = await enableTotp(t, user.jar);
  });
  afterAll(() => t?.close());

  const guess = (jar: Awaited<ReturnType<typeof pendingSignIn>>, ip: string, code = wrongCode(factor.authenticator)) =>
    call(t, '/api/auth/two-factor/verify-totp', { body: { code }, jar, ip });

  it('from one address, the auth tier answers 429 RATE_LIMITED within five requests', async () => {
    const ip = nextIp();
    const jar = await pendingSignIn(t, user.email, ip);
    let evaluated = 0;
    for (;;) {
      const response = await guess(jar, ip);
      if (response.status === 429) {
        await expectRateLimited(response, t.config.rateLimit.auth.limit);
        break;
      }
      expect(response.status).toBe(401);
      evaluated += 1;
      expect(evaluated).toBeLessThan(t.config.rateLimit.auth.limit);
    }
  });

  it('over many addresses, the account locks after ten wrong codes; then even the right code is refused', async () => {
    // A fresh service and user: the first test's wrong codes count toward the lockout too,
    // and its requests spent the default address's budget.
    await t.close();
    t = await createTestApp({ env: { RATE_LIMIT_ENABLED: 'true' } });
    user = await signedInUser(t);
    factor = await enableTotp(t, user.jar);
    let evaluated = 0;
    let locked: Response | null = null;
    while (!locked) {
      const ip = nextIp();
      const jar = await pendingSignIn(t, user.email, ip);
      // Two guesses per address and challenge: neither the tier nor the challenge's own limit is what stops it.
      for (let i = 0; i < 2 && !locked; i++) {
        const response = await guess(jar, ip);
        if (response.status === 429) locked = response;
        else {
          expect(response.status).toBe(401);
          evaluated += 1;
        }
      }
      expect(evaluated).toBeLessThanOrEqual(10);
    }
    expect(evaluated).toBe(10);
    expect((await locked.json()).code).toBe('ACCOUNT_TEMPORARILY_LOCKED');

    const ip = nextIp();
    const jar = await pendingSignIn(t, user.email, ip);
    await expectError(await guess(jar, ip, await freshCode(factor.authenticator)), 429, 'ACCOUNT_TEMPORARILY_LOCKED');

    // The bound: ten guesses per lock period, so a day of guessing covers under 1% of the codes.
    const row = await t.database.withOwner((owner) =>
      owner.selectFrom('two_factors').select('locked_until').where('user_id', '=', user.id).executeTakeFirstOrThrow(),
    );
    const lockSeconds = (new Date(row.locked_until!).getTime() - Date.now()) / 1000;
    expect(lockSeconds).toBeGreaterThan(600);
    const codesPerDay = evaluated * CODES_PER_GUESS * Math.ceil(86_400 / lockSeconds);
    expect(codesPerDay).toBeLessThan(CODE_SPACE / 100);
  });
});
