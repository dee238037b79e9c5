/**
 * docs/api.md "Sign-in" (verification before the first sign-in) and "Email":
 * the library's email + password, password reset, change-password and magic
 * link flows, end to end through HTTP on a real database.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, linkIn, mailsTo, pathOf } from '../support/http.js';
import { PASSWORD, signedUpUser, uniqueEmail } from '../support/users.js';

const SESSION_TOKEN = 'gatehouse.session_token';
const SESSION_DATA = 'gatehouse.session_data';

interface SetCookie {
  value: string;
  attributes: string[];
}

/** The Set-Cookie headers of a response, by cookie name, attributes as written. */
function setCookies(res: Response): Map<string, SetCookie> {
  const out = new Map<string, SetCookie>();
  for (const header of res.headers.getSetCookie()) {
    const [pair = '', ...attributes] = header.split(';').map((part) => part.trim());
    const index = pair.indexOf('=');
    out.set(pair.slice(0, index), { value: pair.slice(index + 1), attributes });
  }
  return out;
}

function expectSessionCookieAttributes(cookie: SetCookie | undefined, secure: boolean) {
  expect(cookie, 'cookie set').toBeDefined();
  const attrs = cookie!.attributes.map((a) => a.toLowerCase());
  expect(attrs).toContain('httponly');
  expect(attrs).toContain('samesite=lax');
  expect(attrs).toContain('path=/');
  if (secure) expect(attrs).toContain('secure');
  else expect(attrs).not.toContain('secure');
}

function sortedKeys(value: unknown): string[] {
  return Object.keys(value as object).sort();
}

async function signUp(t: TestApp, email: string, password = PASSWORD) {
  return call(t, '/api/auth/sign-up/email', { body: { email, password, name: 'Flow User' } });
}

async function signIn(t: TestApp, email: string, password: string, jar = new CookieJar()) {
  const res = await call(t, '/api/auth/sign-in/email', { body: { email, password }, jar });
  return { res, jar };
}

async function sessionOf(t: TestApp, jar: CookieJar) {
  const res = await call(t, '/api/session', { jar });
  expect(res.status).toBe(200);
  return (await res.json()) as { user: { id: string; email: string } } | null;
}

describe('auth flows', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  describe('email + password with verification', () => {
    const email = uniqueEmail('flow');
    let userId: string;
    let link: string;

    it('sign-up creates the user unverified and logs one verification mail with the link in `text`', async () => {
      const res = await signUp(t, email);
      expect(res.status).toBe(200);
      const body = (await res.json()) as {
        token: unknown;
        user: { id: string; email: string; emailVerified: boolean };
      };
      expect(body.user.email).toBe(email);
      expect(body.user.emailVerified).toBe(false);
      // A session token never travels in JSON (cookies only), not even the library's null placeholder.
      expect(body).not.toHaveProperty('token');
      expect(setCookies(res).has(SESSION_TOKEN)).toBe(false);
      userId = body.user.id;

      const row = await t.db
        .selectFrom('users')
        .select(['id', 'email_verified', 'role'])
        .where('email', '=', email)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ id: userId, email_verified: false, role: 'user' });

      const lines = t.logger.lines.filter((line) => line.event === 'email' && line.to === email);
      expect(lines).toHaveLength(1);
      const [line] = lines;
      expect(line).toMatchObject({
        level: 'info',
        event: 'email',
        to: email,
        subject: expect.any(String),
        text: expect.any(String),
      });
      link = linkIn(String(line!.text));
      expect(link.startsWith(`${t.config.auth.url}/api/auth/verify-email?token=`)).toBe(true);
    });

    it('sign-in before verification is refused with 403 EMAIL_NOT_VERIFIED and sets no session cookie', async () => {
      const { res, jar } = await signIn(t, email, PASSWORD);
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ code: 'EMAIL_NOT_VERIFIED' });
      const cookies = setCookies(res);
      expect(cookies.has(SESSION_TOKEN)).toBe(false);
      expect(cookies.has(SESSION_DATA)).toBe(false);
      expect(jar.names()).toEqual([]);
      const sessions = await t.db.selectFrom('sessions').select('id').where('user_id', '=', userId).execute();
      expect(sessions).toEqual([]);
    });

    it('following the link verifies the address', async () => {
      const res = await call(t, pathOf(link));
      expect([200, 302]).toContain(res.status);
      const row = await t.db
        .selectFrom('users')
        .select('email_verified')
        .where('id', '=', userId)
        .executeTakeFirstOrThrow();
      expect(row.email_verified).toBe(true);
    });

    it('sign-in then sets the session_token and session_data cookies: HttpOnly, SameSite=Lax, Path=/, not Secure on http', async () => {
      const { res, jar } = await signIn(t, email, PASSWORD);
      expect(res.status).toBe(200);
      const cookies = setCookies(res);
      expectSessionCookieAttributes(cookies.get(SESSION_TOKEN), false);
      expectSessionCookieAttributes(cookies.get(SESSION_DATA), false);
      expect([...cookies.keys()].some((name) => name.startsWith('__Secure-'))).toBe(false);
      expect((await sessionOf(t, jar))?.user.id).toBe(userId);
    });
  });

  describe('AUTH_URL https', () => {
    let secure: TestApp;
    beforeAll(async () => {
      secure = await createTestApp({ env: { AUTH_URL: 'https://auth.example.test' } });
    });
    afterAll(() => secure.close());

    it('names the cookies __Secure-gatehouse.* and marks them Secure', async () => {
      const email = uniqueEmail('secure');
      expect((await signUp(secure, email)).status).toBe(200);
      const link = linkIn(mailsTo(secure, email).at(-1)!.text);
      expect(link.startsWith('https://auth.example.test/api/auth/verify-email?token=')).toBe(true);
      await call(secure, pathOf(link));
      const { res, jar } = await signIn(secure, email, PASSWORD);
      expect(res.status).toBe(200);
      const cookies = setCookies(res);
      expect(cookies.has(SESSION_TOKEN)).toBe(false);
      expect(cookies.has(SESSION_DATA)).toBe(false);
      expectSessionCookieAttributes(cookies.get(`__Secure-${SESSION_TOKEN}`), true);
      expectSessionCookieAttributes(cookies.get(`__Secure-${SESSION_DATA}`), true);
      // The service reads its own secure cookies back.
      expect((await sessionOf(secure, jar))?.user.email).toBe(email);
    });
  });

  describe('no account enumeration', () => {
    it('sign-up answers the same status and body shape for a registered and an unregistered email', async () => {
      const registered = uniqueEmail('enum');
      expect((await signUp(t, registered)).status).toBe(200);
      const mailsBefore = mailsTo(t, registered).length;

      const again = await signUp(t, registered);
      const fresh = await signUp(t, uniqueEmail('enum-fresh'));
      expect(again.status).toBe(fresh.status);
      const againBody = (await again.json()) as { user: Record<string, unknown> };
      const freshBody = (await fresh.json()) as { user: Record<string, unknown> };
      expect(sortedKeys(againBody)).toEqual(sortedKeys(freshBody));
      expect(sortedKeys(againBody.user)).toEqual(sortedKeys(freshBody.user));
      expect(againBody.user.emailVerified).toBe(freshBody.user.emailVerified);
      expect(setCookies(again).size).toBe(setCookies(fresh).size);
      // The registered user was not changed and has one account only.
      const users = await t.db.selectFrom('users').select('id').where('email', '=', registered).execute();
      expect(users).toHaveLength(1);
      expect(mailsTo(t, registered).length).toBeGreaterThanOrEqual(mailsBefore);
    });

    it('sign-in answers the same for an unknown email as for a wrong password (verified or not)', async () => {
      const verified = await signedUpUser(t);
      const unverified = uniqueEmail('enum-unverified');
      await signUp(t, unverified);

      const unknown = (await signIn(t, uniqueEmail('nobody'), PASSWORD)).res;
      const wrongVerified = (await signIn(t, verified.email, 'wrong password 123')).res;
      const wrongUnverified = (await signIn(t, unverified, 'wrong password 123')).res;
      const bodies = await Promise.all([unknown, wrongVerified, wrongUnverified].map((res) => res.json()));
      expect(unknown.status).toBe(401);
      expect(wrongVerified.status).toBe(401);
      expect(wrongUnverified.status).toBe(401);
      expect(bodies[1]).toEqual(bodies[0]);
      expect(bodies[2]).toEqual(bodies[0]);
      expect(bodies[0]).toMatchObject({ code: 'INVALID_EMAIL_OR_PASSWORD' });
    });

    it('request-password-reset answers the same for a registered and an unregistered email', async () => {
      const user = await signedUpUser(t);
      const nobody = uniqueEmail('nobody');
      const known = await call(t, '/api/auth/request-password-reset', {
        body: { email: user.email, redirectTo: `${t.config.auth.appUrl}/reset` },
      });
      const unknown = await call(t, '/api/auth/request-password-reset', {
        body: { email: nobody, redirectTo: `${t.config.auth.appUrl}/reset` },
      });
      expect(known.status).toBe(200);
      expect(unknown.status).toBe(200);
      expect(await known.json()).toEqual(await unknown.json());
      expect(mailsTo(t, user.email).at(-1)?.subject).toMatch(/reset/i);
      expect(mailsTo(t, nobody)).toEqual([]);
    });
  });

  describe('password reset', () => {
    it('request → mailed link → reset-password: the new password signs in, the old one no longer does, old sessions end', async () => {
      const user = await signedUpUser(t);
      const newPassword = 'a brand new password 42';
      const requested = await call(t, '/api/auth/request-password-reset', {
        body: { email: user.email, redirectTo: `${t.config.auth.appUrl}/reset` },
      });
      expect(requested.status).toBe(200);
      const mail = mailsTo(t, user.email).at(-1)!;
      expect(mail.subject).toMatch(/reset/i);
      const link = linkIn(mail.text);

      // The mailed link checks the token and sends the browser to the app with it.
      const followed = await call(t, pathOf(link));
      expect(followed.status).toBe(302);
      const location = new URL(followed.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).toBe(`${t.config.auth.appUrl}/reset`);
      const token = location.searchParams.get('token');
      expect(token).toBeTruthy();

      const reset = await call(t, '/api/auth/reset-password', { body: { newPassword, token } });
      expect(reset.status).toBe(200);

      expect((await signIn(t, user.email, PASSWORD)).res.status).toBe(401);
      const fresh = await signIn(t, user.email, newPassword);
      expect(fresh.res.status).toBe(200);
      expect((await sessionOf(t, fresh.jar))?.user.id).toBe(user.id);
      // revokeSessionsOnPasswordReset: the session from before the reset is gone.
      expect(await sessionOf(t, user.jar)).toBeNull();

      // The token is single use.
      const replay = await call(t, '/api/auth/reset-password', {
        body: { newPassword: 'yet another password 7', token },
      });
      expect(replay.status).toBe(400);
      expect((await signIn(t, user.email, newPassword)).res.status).toBe(200);
    });

    it('a made-up token is refused', async () => {
      const res = await call(t, '/api/auth/reset-password', {
        body: { newPassword: 'whatever password 1', token: 'not-a-real-token' },
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'INVALID_TOKEN' });
    });
  });

  describe('change-password', () => {
    it('works for a signed-in user with the current password, and refuses a wrong current password', async () => {
      const user = await signedUpUser(t);
      const newPassword = 'changed password 12345';
      const wrong = await call(t, '/api/auth/change-password', {
        jar: user.jar,
        body: { currentPassword: 'not my password', newPassword },
      });
      expect(wrong.status).toBe(400);

      const res = await call(t, '/api/auth/change-password', {
        jar: user.jar,
        body: { currentPassword: PASSWORD, newPassword },
      });
      expect(res.status).toBe(200);
      expect((await signIn(t, user.email, PASSWORD)).res.status).toBe(401);
      expect((await signIn(t, user.email, newPassword)).res.status).toBe(200);
    });

    it('is refused without a session', async () => {
      const res = await call(t, '/api/auth/change-password', {
        body: { currentPassword: PASSWORD, newPassword: 'changed password 12345' },
      });
      expect(res.status).toBe(401);
    });
  });

  describe('magic link', () => {
    async function requestMagicLink(email: string): Promise<string> {
      const res = await call(t, '/api/auth/sign-in/magic-link', { body: { email } });
      expect(res.status).toBe(200);
      const mail = mailsTo(t, email).at(-1)!;
      expect(mail.subject).toMatch(/sign-in link/i);
      const link = linkIn(mail.text);
      expect(link.startsWith(`${t.config.auth.url}/api/auth/magic-link/verify?token=`)).toBe(true);
      return link;
    }

    it('following the mailed link signs in; following it a second time does not', async () => {
      const user = await signedUpUser(t);
      const link = await requestMagicLink(user.email);

      const jar = new CookieJar();
      const first = await call(t, pathOf(link), { jar });
      expect(first.status).toBe(302);
      expect(first.headers.get('location')).not.toMatch(/error=/);
      expectSessionCookieAttributes(setCookies(first).get(SESSION_TOKEN), false);
      expect((await sessionOf(t, jar))?.user.id).toBe(user.id);

      const secondJar = new CookieJar();
      const second = await call(t, pathOf(link), { jar: secondJar });
      expect(second.status).toBe(302);
      expect(second.headers.get('location')).toMatch(/error=INVALID_TOKEN/);
      expect(setCookies(second).has(SESSION_TOKEN)).toBe(false);
      expect(await sessionOf(t, secondJar)).toBeNull();
    });

    it('the token is stored hashed, never as mailed', async () => {
      const user = await signedUpUser(t);
      const link = await requestMagicLink(user.email);
      const token = new URL(link).searchParams.get('token')!;
      const hashed = createHash('sha256').update(token).digest('base64url');
      const rows = await t.db
        .selectFrom('verifications')
        .select(['identifier', 'value'])
        .where('identifier', 'in', [`magic-link:${token}`, `magic-link:${hashed}`])
        .execute();
      expect(rows.map((row) => row.identifier)).toEqual([`magic-link:${hashed}`]);
      expect(rows[0]!.value).not.toContain(token);
    });

    it('an expired link does not sign in', async () => {
      const user = await signedUpUser(t);
      const link = await requestMagicLink(user.email);
      const token = new URL(link).searchParams.get('token')!;
      const identifier = `magic-link:${createHash('sha256').update(token).digest('base64url')}`;
      const row = await t.db
        .selectFrom('verifications')
        .select(['expires_at', 'created_at'])
        .where('identifier', '=', identifier)
        .executeTakeFirstOrThrow();
      // The magic link lasts 5 minutes (magicLink's expiresIn in src/auth/auth.ts).
      expect(new Date(row.expires_at).getTime() - new Date(row.created_at).getTime()).toBeGreaterThan(4.5 * 60_000);
      expect(new Date(row.expires_at).getTime() - new Date(row.created_at).getTime()).toBeLessThanOrEqual(
        5 * 60_000 + 1000,
      );
      const updated = await t.db
        .updateTable('verifications')
        .set({ expires_at: new Date(Date.now() - 60_000) })
        .where('identifier', '=', identifier)
        .executeTakeFirst();
      expect(updated.numUpdatedRows).toBe(1n);

      const jar = new CookieJar();
      const res = await call(t, pathOf(link), { jar });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toMatch(/error=INVALID_TOKEN/);
      expect(setCookies(res).has(SESSION_TOKEN)).toBe(false);
      expect(await sessionOf(t, jar)).toBeNull();
    });

    it('for an unknown email the library does what it does (it signs the address up), without a server error', async () => {
      const email = uniqueEmail('magic-new');
      const link = await requestMagicLink(email);
      const jar = new CookieJar();
      const res = await call(t, pathOf(link), { jar });
      expect(res.status).toBeLessThan(500);
      // better-auth 1.7.25's magic link signs an unknown address up: a new,
      // verified user with the default platform role, signed in.
      const created = await t.db
        .selectFrom('users')
        .select(['email_verified', 'role'])
        .where('email', '=', email)
        .executeTakeFirst();
      expect(created).toEqual({ email_verified: true, role: 'user' });
      expect((await sessionOf(t, jar))?.user.email).toBe(email);
    });
  });
});
