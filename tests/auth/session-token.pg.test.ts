/**
 * A request that carries the session cookie without the library's cookie
 * cache (src/auth/session.ts): the session is found by its token in the one
 * statement that reads its state, and the library answers only what is not
 * that plain case: no live session (it expires the cookies) and a session
 * due for its daily extension (it extends it and renews the cookies).
 */
import { createHmac } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, TEST_SECRET, type TestApp } from '../support/app.js';
import { CookieJar, call } from '../support/http.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

const TOKEN = 'gatehouse.session_token';
const DONT_REMEMBER = 'gatehouse.dont_remember';
const DAY_MS = 24 * 3600_000;

/** A browser holding only these cookies. */
function jarWith(cookies: Record<string, string>): CookieJar {
  const jar = new CookieJar();
  for (const [name, value] of Object.entries(cookies))
    jar.store(new Response(null, { headers: [['set-cookie', `${name}=${value}; Path=/`]] }));
  return jar;
}

/** better-call's signed cookie value. */
function signed(value: string, secret = TEST_SECRET): string {
  return `${value}.${createHmac('sha256', secret).update(value).digest('base64')}`;
}

async function read(t: TestApp, jar: CookieJar) {
  const res = await call(t, '/api/session', { jar });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { user: { id: string }; session: { id: string; expiresAt: string } } | null;
  return { body, setCookies: res.headers.getSetCookie() };
}

describe('a session read by its token alone', () => {
  let t: TestApp;
  let user: SignedInUser;
  let tokenOnly: () => CookieJar;

  const expiresAt = async () =>
    (
      await t.database.withOwner((owner) =>
        sql<{ expires_at: Date }>`select expires_at from sessions where user_id = ${user.id}::uuid`.execute(owner),
      )
    ).rows[0]?.expires_at;
  const setExpiry = (at: Date) =>
    t.database.withOwner((owner) =>
      sql`update sessions set expires_at = ${at.toISOString()}::timestamptz where user_id = ${user.id}::uuid`.execute(
        owner,
      ),
    );

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());
  beforeEach(async () => {
    user = await signedInUser(t);
    tokenOnly = () => jarWith({ [TOKEN]: user.jar.get(TOKEN)! });
  });

  it('answers the session from its token and touches no cookie', async () => {
    const { body, setCookies } = await read(t, tokenOnly());
    expect(body?.user.id).toBe(user.id);
    expect(new Date(body!.session.expiresAt).getTime()).toBe((await expiresAt())!.getTime());
    expect(setCookies).toEqual([]);
  });

  it('a token signed with another secret, or not signed, is no session', async () => {
    const token = user.jar.get(TOKEN)!.split('.')[0]!;
    for (const value of [signed(token, 'another-secret'), token, `${token}.`]) {
      const { body } = await read(t, jarWith({ [TOKEN]: value }));
      expect(body).toBeNull();
    }
  });

  it('a session revoked in the database ends on the next request, and the library expires its cookie', async () => {
    expect((await read(t, tokenOnly())).body?.user.id).toBe(user.id);
    await t.database.withOwner((owner) => sql`delete from sessions where user_id = ${user.id}::uuid`.execute(owner));
    const { body, setCookies } = await read(t, tokenOnly());
    expect(body).toBeNull();
    expect(setCookies.some((c) => c.startsWith(`${TOKEN}=;`) && /max-age=0/i.test(c))).toBe(true);
  });

  it('an expired session is no session, and the library expires its cookie', async () => {
    await setExpiry(new Date(Date.now() - 60_000));
    const { body, setCookies } = await read(t, tokenOnly());
    expect(body).toBeNull();
    expect(setCookies.some((c) => c.startsWith(`${TOKEN}=;`) && /max-age=0/i.test(c))).toBe(true);
  });

  it('a session a day old is extended by the library, its cookies renewed; the next read writes nothing', async () => {
    const dayOld = new Date(Date.now() + 6 * DAY_MS - 60_000);
    await setExpiry(dayOld);
    const { body, setCookies } = await read(t, tokenOnly());
    expect(body?.user.id).toBe(user.id);
    const extended = (await expiresAt())!.getTime();
    expect(extended).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
    expect(new Date(body!.session.expiresAt).getTime()).toBe(extended);
    expect(setCookies.some((c) => c.startsWith(`${TOKEN}=`) && !/max-age=0/i.test(c))).toBe(true);

    const again = await read(t, tokenOnly());
    expect(again.body?.session.expiresAt).toBe(body!.session.expiresAt);
    expect(again.setCookies).toEqual([]);
  });

  it('a "don\'t remember me" session is never extended; a forged marker does not stop an extension', async () => {
    const dayOld = new Date(Date.now() + 6 * DAY_MS - 60_000);
    await setExpiry(dayOld);
    const remembered = jarWith({ [TOKEN]: user.jar.get(TOKEN)!, [DONT_REMEMBER]: signed('true') });
    const { body, setCookies } = await read(t, remembered);
    expect(body?.user.id).toBe(user.id);
    expect((await expiresAt())!.getTime()).toBe(dayOld.getTime());
    expect(setCookies).toEqual([]);

    const forged = jarWith({ [TOKEN]: user.jar.get(TOKEN)!, [DONT_REMEMBER]: signed('true', 'another-secret') });
    expect((await read(t, forged)).body?.user.id).toBe(user.id);
    expect((await expiresAt())!.getTime()).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
  });
});
