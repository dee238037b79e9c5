import { getCookieCache } from 'better-auth/cookies';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCookieCacheVerifier } from '../../src/auth/cookie-cache.js';
import { parseConfig } from '../../src/shared/config.js';
import { createTestApp, TEST_SECRET, type TestApp } from '../support/app.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

/**
 * The fast cookie-cache check must accept exactly the cookies the
 * library issued and accepts, and refuse tampered, expired and foreign ones;
 * the library's own verifier is the reference.
 */
describe('createCookieCacheVerifier', () => {
  let t: TestApp;
  let user: SignedInUser;
  beforeAll(async () => {
    t = await createTestApp();
    user = await signedInUser(t);
  });
  afterAll(() => t.close());

  const verify = (cookie: string, now = Date.now) => createCookieCacheVerifier(t.config, now)(cookie);
  const library = (cookie: string) =>
    getCookieCache(new Headers({ cookie }), {
      secret: TEST_SECRET,
      cookiePrefix: 'gatehouse',
      isSecure: false,
      strategy: 'compact',
    });
  const tokenCookie = () => `gatehouse.session_token=${user.jar.get('gatehouse.session_token')}`;
  const dataCookie = (value = user.jar.get('gatehouse.session_data')!) => `gatehouse.session_data=${value}`;

  it('accepts the cookies the library issued at sign-in, with the same session and user', async () => {
    const cookie = user.jar.header();
    const ours = verify(cookie);
    const theirs = await library(cookie);
    expect(ours).not.toBeNull();
    expect(ours?.userId).toBe(user.id);
    expect(ours?.sessionId).toBe(theirs?.session.id);
  });

  it('refuses a cache whose payload was altered (the library refuses it too)', async () => {
    const envelope = JSON.parse(Buffer.from(user.jar.get('gatehouse.session_data')!, 'base64url').toString('utf8'));
    envelope.session.user.id = crypto.randomUUID();
    const forged = `${tokenCookie()}; ${dataCookie(Buffer.from(JSON.stringify(envelope)).toString('base64url'))}`;
    expect(verify(forged)).toBeNull();
    expect(await library(forged)).toBeNull();
  });

  it('refuses an expired cache, and a session token that does not match the cache', () => {
    const cookie = user.jar.header();
    expect(verify(cookie, () => Date.now() + 6 * 60 * 1000)).toBeNull();
    const otherToken = `gatehouse.session_token=${encodeURIComponent(`${'x'.repeat(32)}.${'A'.repeat(43)}=`)}`;
    expect(verify(`${otherToken}; ${dataCookie()}`)).toBeNull();
  });

  it('refuses cookies signed with another secret, and a missing token cookie', () => {
    const other = parseConfig({ NODE_ENV: 'test', AUTH_SECRET: `another-${crypto.randomUUID()}` }).config;
    expect(createCookieCacheVerifier(other)(user.jar.header())).toBeNull();
    expect(verify(dataCookie())).toBeNull();
    expect(verify('')).toBeNull();
    expect(verify('gatehouse.session_data=%%%; gatehouse.session_token=a.b')).toBeNull();
  });

  it('one verifier remembers a cookie it verified only while it is valid, and by its exact bytes', () => {
    let now = Date.now();
    const remembering = createCookieCacheVerifier(t.config, () => now);
    const cookie = user.jar.header();
    expect(remembering(cookie)?.userId).toBe(user.id);
    expect(remembering(cookie)?.userId).toBe(user.id);
    // A byte changed in a cookie it has seen: verified afresh, refused.
    const data = user.jar.get('gatehouse.session_data')!;
    const flipped = `${data.slice(0, 40)}${data[40] === 'A' ? 'B' : 'A'}${data.slice(41)}`;
    expect(remembering(`${tokenCookie()}; ${dataCookie(flipped)}`)).toBeNull();
    // Past the cache's five minutes the remembered answer is gone too.
    now += 6 * 60 * 1000;
    expect(remembering(cookie)).toBeNull();
  });
});
