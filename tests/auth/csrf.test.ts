/**
 * Spec §5 "Session authentication": APP_URL is the only trusted origin, and
 * cross-origin auth requests from untrusted origins are rejected by the
 * library's CSRF protection. These run under NODE_ENV=test, where
 * better-auth switches its origin check off unless told otherwise.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { APP_ORIGIN, CookieJar, call } from '../support/http.js';
import { PASSWORD, type SignedInUser, signedInUser } from '../support/users.js';

const SIGN_IN = '/api/auth/sign-in/email';

function sessionCookiesIn(res: Response): string[] {
  return res.headers
    .getSetCookie()
    .filter((cookie) => /^(__Secure-)?gatehouse\.session_(token|data)=[^;]+/.test(cookie));
}

/** A raw request: exactly the headers given, nothing added. */
function raw(t: TestApp, path: string, headers: Record<string, string>, body: unknown) {
  return t.app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

describe('CSRF / origin checks on /api/auth/*', () => {
  let t: TestApp;
  let user: SignedInUser;
  beforeAll(async () => {
    t = await createTestApp();
    user = await signedInUser(t);
  });
  afterAll(() => t.close());

  it('a cross-origin sign-in (Origin https://evil.example) is refused with 403 FORBIDDEN before the library and sets no session cookie', async () => {
    const res = await raw(t, SIGN_IN, { origin: 'https://evil.example' }, { email: user.email, password: PASSWORD });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
    expect(sessionCookiesIn(res)).toEqual([]);
  });

  it('the same with a session cookie attached: refused by the service before the library (403 FORBIDDEN)', async () => {
    const res = await raw(
      t,
      SIGN_IN,
      { origin: 'https://evil.example', cookie: user.jar.header() },
      { email: user.email, password: PASSWORD },
    );
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
    expect(sessionCookiesIn(res)).toEqual([]);
  });

  it('a form-encoded cross-origin sign-in (no preflight) is refused the same way, before its body is read', async () => {
    const res = await t.app.request(SIGN_IN, {
      method: 'POST',
      headers: { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: user.email, password: PASSWORD }).toString(),
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
    expect(sessionCookiesIn(res)).toEqual([]);
  });

  it('a cookie-bearing POST without any Origin (or Referer) is refused', async () => {
    const res = await raw(t, SIGN_IN, { cookie: user.jar.header() }, { email: user.email, password: PASSWORD });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'MISSING_OR_NULL_ORIGIN' });
    expect(sessionCookiesIn(res)).toEqual([]);
  });

  it('Origin: null is refused', async () => {
    const res = await raw(
      t,
      SIGN_IN,
      { origin: 'null', cookie: user.jar.header() },
      { email: user.email, password: PASSWORD },
    );
    expect(res.status).toBe(403);
    expect(sessionCookiesIn(res)).toEqual([]);
  });

  it('an untrusted Referer stands in for a missing Origin and is refused too', async () => {
    const res = await raw(
      t,
      SIGN_IN,
      { referer: 'https://evil.example/login', cookie: user.jar.header() },
      { email: user.email, password: PASSWORD },
    );
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'INVALID_ORIGIN' });
  });

  it('a cross-site form navigation (Fetch Metadata) is refused even without cookies', async () => {
    const res = await raw(
      t,
      SIGN_IN,
      { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' },
      { email: user.email, password: PASSWORD },
    );
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'CROSS_SITE_NAVIGATION_LOGIN_BLOCKED' });
    expect(sessionCookiesIn(res)).toEqual([]);
  });

  it('a cross-origin state change on an existing session (sign-out) is refused and the session survives', async () => {
    const res = await raw(t, '/api/auth/sign-out', { origin: 'https://evil.example', cookie: user.jar.header() }, {});
    expect(res.status).toBe(403);
    const session = await call(t, '/api/session', { jar: user.jar });
    expect(((await session.json()) as { user: { id: string } } | null)?.user.id).toBe(user.id);
  });

  it('the trusted origin (APP_URL) works', async () => {
    expect(APP_ORIGIN).toBe(t.config.auth.appUrl);
    const jar = new CookieJar();
    const res = await raw(t, SIGN_IN, { origin: APP_ORIGIN }, { email: user.email, password: PASSWORD });
    expect(res.status).toBe(200);
    jar.store(res);
    expect(sessionCookiesIn(res)).toHaveLength(2);
    // and with cookies attached too
    const again = await raw(
      t,
      SIGN_IN,
      { origin: APP_ORIGIN, cookie: jar.header() },
      { email: user.email, password: PASSWORD },
    );
    expect(again.status).toBe(200);
  });
});
