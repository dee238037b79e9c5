import { hashPassword as libraryHash, verifyPassword as libraryVerify } from 'better-auth/crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword, SCRYPT_PARAMS, SCRYPT_SLOTS, verifyPassword } from '../../src/auth/password.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { PASSWORD, signedUpUser } from '../support/users.js';

/**
 * Our `emailAndPassword.password` hooks (src/auth/password.ts) must stay
 * interchangeable with better-auth's default scrypt: every stored hash keeps
 * verifying whichever side wrote it, so the hooks can be dropped or the
 * library upgraded without locking anyone out. The library's own functions
 * are the reference.
 */
describe('password hashing: the library default, both ways', () => {
  const password = 'Tr0ub4dor&3 ünïcødé';
  /** Written by better-auth/crypto hashPassword (1.7.25): a hash as the database holds it today. */
  const STORED_BY_LIBRARY =
    '82ed49b2ed69f9988a7427bec44b27b2:7c8937db42ddf7313bcaa720ea18178243854c30581160c15a99bdfc966f3044d273e5df86af3c12778a71d6e85688df6204fc779e39aec760a867ecc304cfc7';

  it('uses the library parameters and format: N=16384, r=16, p=1, 64-byte key, `<16-byte salt hex>:<key hex>`', async () => {
    expect(SCRYPT_PARAMS).toEqual({ N: 16384, r: 16, p: 1, dkLen: 64 });
    expect(await hashPassword(password)).toMatch(/^[0-9a-f]{32}:[0-9a-f]{128}$/);
    expect(await libraryHash(password)).toMatch(/^[0-9a-f]{32}:[0-9a-f]{128}$/);
  });

  it('verifies a hash stored by the library, and so does the library', async () => {
    expect(await verifyPassword({ hash: STORED_BY_LIBRARY, password })).toBe(true);
    expect(await libraryVerify({ hash: STORED_BY_LIBRARY, password })).toBe(true);
    expect(await verifyPassword({ hash: STORED_BY_LIBRARY, password: `${password} ` })).toBe(false);
  });

  it('library hash → our verify', async () => {
    const hash = await libraryHash(password);
    expect(await verifyPassword({ hash, password })).toBe(true);
    expect(await verifyPassword({ hash, password: 'Tr0ub4dor&3 unicode' })).toBe(false);
  });

  it('our hash → library verify', async () => {
    const hash = await hashPassword(password);
    expect(await libraryVerify({ hash, password })).toBe(true);
    expect(await libraryVerify({ hash, password: 'Tr0ub4dor&3 unicode' })).toBe(false);
  });

  it('normalises the password (NFKC) as the library does', async () => {
    // U+FB01 (the "fi" ligature) is "fi" under NFKC; U+0065 U+0301 is U+00E9.
    const ours = await hashPassword('pass\uFB01x caf\u0065\u0301');
    const theirs = await libraryHash('pass\uFB01x caf\u0065\u0301');
    expect(await libraryVerify({ hash: ours, password: 'passfix caf\u00e9' })).toBe(true);
    expect(await verifyPassword({ hash: theirs, password: 'passfix caf\u00e9' })).toBe(true);
  });

  it('salts every hash', async () => {
    const [a, b] = await Promise.all([hashPassword(password), hashPassword(password)]);
    expect(a.split(':')[0]).not.toBe(b.split(':')[0]);
    expect(a.split(':')[1]).not.toBe(b.split(':')[1]);
  });

  it('refuses what the library refuses: a stored value that is not `salt:key` is an error, a different key is false', async () => {
    for (const hash of ['', 'no-colon', ':abc', 'abc:']) {
      await expect(verifyPassword({ hash, password })).rejects.toThrow('Invalid password hash');
      await expect(libraryVerify({ hash, password })).rejects.toThrow('Invalid password hash');
    }
    const [salt, key] = STORED_BY_LIBRARY.split(':');
    const flipped = `${salt}:${key!.slice(0, -1)}${key!.endsWith('0') ? '1' : '0'}`;
    for (const hash of [flipped, `${salt}:${key!.slice(2)}`, `${salt}:${key!.toUpperCase()}`]) {
      expect(await verifyPassword({ hash, password })).toBe(false);
      expect(await libraryVerify({ hash, password })).toBe(false);
    }
  });
});

describe('password hashing: the thread pool stays usable under a burst', () => {
  it("bounds the derivations in libuv's pool, so other pool work (the session cookie HMAC) does not wait behind the backlog", async () => {
    expect(SCRYPT_SLOTS).toBeGreaterThanOrEqual(1);
    expect(SCRYPT_SLOTS).toBeLessThan(Number(process.env.UV_THREADPOOL_SIZE) || 4);
    let finished = 0;
    const burst = Array.from({ length: 12 }, () => hashPassword(PASSWORD).then(() => (finished += 1)));
    // What the library does after a sign-in's verify: a WebCrypto HMAC, a job on the same pool.
    const key = await crypto.subtle.importKey(
      'raw',
      new TextEncoder().encode('k'),
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['sign'],
    );
    await crypto.subtle.sign('HMAC', key, new TextEncoder().encode('session token'));
    const finishedBeforeHmac = finished;
    await Promise.all(burst);
    // Unbounded, the HMAC is queued behind all 12 derivations; bounded, a pool thread is free for it at once.
    expect(finishedBeforeHmac).toBeLessThanOrEqual(1);
  });
});

describe('password hashing: wired into sign-up and sign-in', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('stores hashes the library default verifies, and signs in with a hash the library default wrote', async () => {
    const user = await signedUpUser(t);
    const stored = await t.db
      .selectFrom('accounts')
      .select('password')
      .where('user_id', '=', user.id)
      .where('provider_id', '=', 'credential')
      .executeTakeFirstOrThrow();
    expect(await libraryVerify({ hash: stored.password!, password: PASSWORD })).toBe(true);

    const replaced = 'another passphrase, set by the library';
    await t.db
      .updateTable('accounts')
      .set({ password: await libraryHash(replaced) })
      .where('user_id', '=', user.id)
      .where('provider_id', '=', 'credential')
      .execute();
    expect((await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: replaced } })).status).toBe(
      200,
    );
    expect((await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD } })).status).toBe(
      401,
    );
  });
});
