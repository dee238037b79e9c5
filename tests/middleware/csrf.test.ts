/**
 * A cookie-bearing state change (any method but GET, HEAD, OPTIONS) whose
 * Origin, or without one whose Sec-Fetch-Site, is not the
 * app's is refused with 403 FORBIDDEN, on the service's routes and the
 * library's alike, before anything runs. Trusted: APP_URL's and AUTH_URL's
 * origins. Requests without cookies are not this check's business.
 */
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csrf } from '../../src/middleware/csrf.js';
import { renderError } from '../../src/middleware/render-error.js';
import type { AppEnv } from '../../src/shared/types.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { APP_ORIGIN, CookieJar, call } from '../support/http.js';
import { PASSWORD, type SignedInUser, signedInUser } from '../support/users.js';

const EVIL = 'https://evil.example';
const SIGN_IN = '/api/auth/sign-in/email';
const AUTH_ORIGIN = 'http://localhost:4000';

/** Headers a forged cross-site request carries, in each form a browser may send. */
const FORGED: [string, Record<string, string>][] = [
  ['Origin https://evil.example', { origin: EVIL }],
  ['Origin null', { origin: 'null' }],
  ['Sec-Fetch-Site cross-site without Origin', { 'sec-fetch-site': 'cross-site' }],
  ['Sec-Fetch-Site same-site without Origin', { 'sec-fetch-site': 'same-site' }],
  ['an Origin that only starts like the app', { origin: `${APP_ORIGIN}.evil.example` }],
  ['the app origin over another scheme', { origin: APP_ORIGIN.replace('http:', 'https:') }],
];

function sessionCookiesIn(res: Response): string[] {
  return res.headers
    .getSetCookie()
    .filter((cookie) => /^(__Secure-)?gatehouse\.session_(token|data)=[^;]+/.test(cookie));
}

function expectRefused(res: Response, body: unknown, label: string) {
  expect(res.status, label).toBe(403);
  expect(body, label).toEqual({ code: 'FORBIDDEN', message: 'Cross-site request refused' });
}

describe('csrf middleware (the decision, on a bare app)', () => {
  const app = new Hono<AppEnv>();
  app.use('*', csrf({ trustedOrigins: ['http://localhost:3000/', 'HTTP://LocalHost:4000'] }));
  app.all('/x', (c) => c.text('ran'));
  app.onError(renderError);
  const send = (method: string, headers: Record<string, string>) => app.request('/x', { method, headers });

  it('refuses every forged form of a cookie-bearing POST, PUT, PATCH and DELETE', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      for (const [label, headers] of FORGED) {
        const res = await send(method, { cookie: 'a=b', ...headers });
        expectRefused(res, await res.json(), `${method} ${label}`);
      }
      const odd = await send(method, { cookie: 'a=b', 'sec-fetch-site': 'something-else' });
      expect(odd.status).toBe(403);
    }
  });

  it('lets through the trusted origins (normalized: lower-case, no trailing slash), same-origin and user-typed navigations, and non-browsers', async () => {
    const allowed: Record<string, string>[] = [
      { origin: 'http://localhost:3000' },
      { origin: 'http://localhost:4000' },
      { origin: 'HTTP://LOCALHOST:3000' },
      { origin: 'http://localhost:3000', 'sec-fetch-site': 'same-site' },
      { 'sec-fetch-site': 'same-origin' },
      { 'sec-fetch-site': 'none' },
      {},
    ];
    for (const headers of allowed) {
      const res = await send('POST', { cookie: 'a=b', ...headers });
      expect(res.status, JSON.stringify(headers)).toBe(200);
      expect(await res.text()).toBe('ran');
    }
  });

  it('ignores safe methods and requests without cookies', async () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS'])
      expect((await send(method, { cookie: 'a=b', origin: EVIL })).status, method).toBe(200);
    for (const [label, headers] of FORGED) expect((await send('POST', headers)).status, label).toBe(200);
  });
});

describe('CSRF through the app', () => {
  let t: TestApp;
  let user: SignedInUser;

  /** Exactly the headers given, plus the user's cookies: what a forged page's request carries. */
  const raw = (path: string, headers: Record<string, string>, body?: unknown, who: SignedInUser = user) =>
    t.app.request(path, {
      method: 'POST',
      headers: {
        cookie: who.jar.header(),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const profile = async (who: SignedInUser = user) => {
    const res = await call(t, '/api/users/me', { jar: who.jar });
    expect(res.status).toBe(200);
    return (await res.json()) as { name: string; deletedAt: string | null };
  };
  const sessionUserId = async (who: SignedInUser) =>
    ((await (await call(t, '/api/session', { jar: who.jar })).json()) as { user: { id: string } } | null)?.user.id ??
    null;

  beforeAll(async () => {
    t = await createTestApp();
    user = await signedInUser(t);
  });
  afterAll(() => t.close());

  it('trusts exactly APP_URL and AUTH_URL', () => {
    expect(t.config.auth.appUrl.replace(/\/$/, '')).toBe(APP_ORIGIN);
    expect(t.config.auth.url.replace(/\/$/, '')).toBe(AUTH_ORIGIN);
  });

  it('account deletion (POST /api/users/me/deletion, no body): refused from a foreign or null origin or cross-site, nothing scheduled', async () => {
    for (const [label, headers] of FORGED) {
      const res = await raw('/api/users/me/deletion', headers);
      expectRefused(res, await res.json(), label);
    }
    expect((await profile()).deletedAt).toBeNull();
  });

  it('reactivation (POST /api/users/me/reactivate): refused the same way, the account stays scheduled', async () => {
    const scheduled = await raw('/api/users/me/deletion', { origin: APP_ORIGIN });
    expect(scheduled.status).toBe(202);
    const { deletedAt } = (await scheduled.json()) as { deletedAt: string };
    for (const [label, headers] of FORGED) {
      const res = await raw('/api/users/me/reactivate', headers);
      expectRefused(res, await res.json(), label);
    }
    expect((await profile()).deletedAt).toBe(deletedAt);

    const reactivated = await raw('/api/users/me/reactivate', { origin: APP_ORIGIN });
    expect(reactivated.status).toBe(200);
    expect((await profile()).deletedAt).toBeNull();
  });

  it("the library's sign-out: refused, the session survives", async () => {
    for (const [label, headers] of FORGED) {
      const res = await raw('/api/auth/sign-out', headers, {});
      expectRefused(res, await res.json(), label);
      expect(await sessionUserId(user), label).toBe(user.id);
    }
  });

  it("the library's update-user: refused, the name unchanged; from the app it changes", async () => {
    const before = (await profile()).name;
    for (const [label, headers] of FORGED) {
      const res = await raw('/api/auth/update-user', headers, { name: 'Forged Name' });
      expectRefused(res, await res.json(), label);
    }
    expect((await profile()).name).toBe(before);

    const res = await raw('/api/auth/update-user', { origin: APP_ORIGIN }, { name: 'Chosen Name' });
    expect(res.status).toBe(200);
    expect((await profile()).name).toBe('Chosen Name');
  });

  it('from the app origin, from AUTH_URL, same-origin without Origin, and from a client without either header (curl): works', async () => {
    const cases: [string, Record<string, string>][] = [
      ['APP_URL', { origin: APP_ORIGIN }],
      ['AUTH_URL', { origin: AUTH_ORIGIN }],
      ['Sec-Fetch-Site same-origin', { 'sec-fetch-site': 'same-origin' }],
      ['Sec-Fetch-Site none', { 'sec-fetch-site': 'none' }],
      ['neither header', {}],
    ];
    for (const [label, headers] of cases) {
      const scheduled = await raw('/api/users/me/deletion', headers);
      expect(scheduled.status, label).toBe(202);
      expect((await profile()).deletedAt, label).not.toBeNull();
      const reactivated = await raw('/api/users/me/reactivate', headers);
      expect(reactivated.status, label).toBe(200);
      expect((await profile()).deletedAt, label).toBeNull();
    }
    const leaving = await signedInUser(t);
    const out = await raw('/api/auth/sign-out', { origin: APP_ORIGIN }, {}, leaving);
    expect(out.status).toBe(200);
  });

  it('reads with cookies from a foreign origin are not refused by it (CORS decides what the page may read)', async () => {
    const res = await t.app.request('/api/users/me', { headers: { cookie: user.jar.header(), origin: EVIL } });
    expect(res.status).toBe(200);
  });

  it("requests without cookies are not refused by it (401 on a session route), except a foreign Origin on the library's routes", async () => {
    for (const [label, headers] of FORGED) {
      const res = await t.app.request('/api/users/me/deletion', { method: 'POST', headers });
      expect(res.status, label).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    }
    const signIn = await t.app.request('/api/auth/sign-in/email', {
      method: 'POST',
      headers: { origin: APP_ORIGIN, 'content-type': 'application/json' },
      body: JSON.stringify({ email: user.email, password: PASSWORD }),
    });
    expect(signIn.status).toBe(200);
    const foreign = await t.app.request('/api/auth/sign-in/email', {
      method: 'POST',
      headers: { origin: EVIL, 'content-type': 'application/json' },
      body: JSON.stringify({ email: user.email, password: PASSWORD }),
    });
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toMatchObject({ code: 'FORBIDDEN' });
  });
  /**
   * docs/api.md "Sign-in", on the library's routes: APP_URL is the
   * trusted origin, and cross-origin auth requests are refused, by this check
   * (403 FORBIDDEN) or else by the library's own origin and Fetch Metadata
   * checks, which the service keeps on (better-auth turns them off under
   * NODE_ENV=test unless told otherwise).
   */
  describe("on /api/auth/*, with the library's own origin checks behind it", () => {
    let signer: SignedInUser;
    /** Exactly the headers given (no cookies unless named), a JSON body. */
    const bare = (path: string, headers: Record<string, string>, body: unknown) =>
      t.app.request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });

    beforeAll(async () => {
      signer = await signedInUser(t);
    });

    it('a cross-origin sign-in (Origin https://evil.example) is refused with 403 FORBIDDEN before the library and sets no session cookie', async () => {
      const res = await bare(SIGN_IN, { origin: EVIL }, { email: signer.email, password: PASSWORD });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
      expect(sessionCookiesIn(res)).toEqual([]);
    });

    it('the same with a session cookie attached: refused by the service before the library (403 FORBIDDEN)', async () => {
      const res = await bare(
        SIGN_IN,
        { origin: EVIL, cookie: signer.jar.header() },
        { email: signer.email, password: PASSWORD },
      );
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
      expect(sessionCookiesIn(res)).toEqual([]);
    });

    it('a form-encoded cross-origin sign-in (no preflight) is refused the same way, before its body is read', async () => {
      const res = await t.app.request(SIGN_IN, {
        method: 'POST',
        headers: { origin: EVIL, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ email: signer.email, password: PASSWORD }).toString(),
      });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' });
      expect(sessionCookiesIn(res)).toEqual([]);
    });

    it('a cookie-bearing POST without any Origin (or Referer) is refused', async () => {
      const res = await bare(SIGN_IN, { cookie: signer.jar.header() }, { email: signer.email, password: PASSWORD });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'MISSING_OR_NULL_ORIGIN' });
      expect(sessionCookiesIn(res)).toEqual([]);
    });

    it('Origin: null is refused', async () => {
      const res = await bare(
        SIGN_IN,
        { origin: 'null', cookie: signer.jar.header() },
        { email: signer.email, password: PASSWORD },
      );
      expect(res.status).toBe(403);
      expect(sessionCookiesIn(res)).toEqual([]);
    });

    it('an untrusted Referer stands in for a missing Origin and is refused too', async () => {
      const res = await bare(
        SIGN_IN,
        { referer: `${EVIL}/login`, cookie: signer.jar.header() },
        { email: signer.email, password: PASSWORD },
      );
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'INVALID_ORIGIN' });
    });

    it('a cross-site form navigation (Fetch Metadata) is refused even without cookies', async () => {
      const res = await bare(
        SIGN_IN,
        { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' },
        { email: signer.email, password: PASSWORD },
      );
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'CROSS_SITE_NAVIGATION_LOGIN_BLOCKED' });
      expect(sessionCookiesIn(res)).toEqual([]);
    });

    it('a cross-origin state change on an existing session (sign-out) is refused and the session survives', async () => {
      const res = await bare('/api/auth/sign-out', { origin: EVIL, cookie: signer.jar.header() }, {});
      expect(res.status).toBe(403);
      const session = await call(t, '/api/session', { jar: signer.jar });
      expect(((await session.json()) as { user: { id: string } } | null)?.user.id).toBe(signer.id);
    });

    it('the trusted origin (APP_URL) works', async () => {
      expect(APP_ORIGIN).toBe(t.config.auth.appUrl);
      const jar = new CookieJar();
      const res = await bare(SIGN_IN, { origin: APP_ORIGIN }, { email: signer.email, password: PASSWORD });
      expect(res.status).toBe(200);
      jar.store(res);
      expect(sessionCookiesIn(res)).toHaveLength(2);
      // and with cookies attached too
      const again = await bare(
        SIGN_IN,
        { origin: APP_ORIGIN, cookie: jar.header() },
        { email: signer.email, password: PASSWORD },
      );
      expect(again.status).toBe(200);
    });
  });
});

describe('csrf middleware with front ends named in CORS_ORIGIN', () => {
  const ADMIN_APP = 'https://admin.example';
  let t: TestApp;
  let user: SignedInUser;
  beforeAll(async () => {
    t = await createTestApp({ env: { CORS_ORIGIN: `${APP_ORIGIN},${ADMIN_APP}` } });
    user = await signedInUser(t);
  });
  afterAll(() => t?.close());

  it('trusts an origin CORS_ORIGIN names explicitly for state changes, and still refuses others', async () => {
    const from = (origin: string) =>
      call(t, '/api/users/me/deletion', { method: 'POST', jar: user.jar, headers: { origin } });
    const refused = await from(EVIL);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'FORBIDDEN' });
    const scheduled = await from(ADMIN_APP);
    expect(scheduled.status).toBe(202);
    expect(
      ((await (await call(t, '/api/users/me', { jar: user.jar })).json()) as { deletedAt: string | null }).deletedAt,
    ).not.toBeNull();
  });
});
