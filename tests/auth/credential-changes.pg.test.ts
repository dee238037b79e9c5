import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import {
  APP_ORIGIN,
  CookieJar,
  call,
  expectError,
  expectStatus,
  linkIn,
  mailsTo,
  PASSWORD,
  pathOf,
} from '../support/http.js';
import { completeWithTotp, enableTotp, freshCode, pendingSignIn, type TwoFactorUser } from '../support/mfa.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

/**
 * docs/security.md "Credential changes": enabling two-factor, adding a
 * passkey, changing and resetting the password end every other session of
 * the user and every pending second-factor sign-in (a password sign-in left
 * at `twoFactorRedirect`); the session that made the change stays (a reset
 * has none). Every check goes through HTTP: a session that ended answers 401
 * on its next request, a pending sign-in that ended can no longer be completed.
 */

const NEW_PASSWORD = 'a completely new passphrase 7';

/** A password sign-in without a second factor: a session that proved the password just now. */
async function passwordSession(t: TestApp, email: string, password = PASSWORD): Promise<CookieJar> {
  const jar = new CookieJar();
  const body = await expectStatus<{ user?: { id: string }; twoFactorRedirect?: boolean }>(
    await call(t, '/api/auth/sign-in/email', { body: { email, password }, jar }),
    200,
  );
  expect(body.twoFactorRedirect).toBeUndefined();
  return jar;
}

const spentBackupCodes = new WeakMap<TwoFactorUser, number>();

/**
 * A backup code not used yet (from the end of the list; `expectEnded` tries
 * the first ones, which a refused attempt does not spend). Codes, not TOTP:
 * each time step is accepted once, so TOTP sign-ins would wait for the clock.
 */
function unusedBackupCode(factor: TwoFactorUser): string {
  const spent = spentBackupCodes.get(factor) ?? 0;
  spentBackupCodes.set(factor, spent + 1);
  return factor.backupCodes[factor.backupCodes.length - 1 - spent]!;
}

/** A password sign-in completed with a backup code: another multi-factor session. */
async function multiFactorSession(t: TestApp, email: string, factor: TwoFactorUser): Promise<CookieJar> {
  const jar = await pendingSignIn(t, email);
  await expectStatus(
    await call(t, '/api/auth/two-factor/verify-backup-code', { body: { code: unusedBackupCode(factor) }, jar }),
    200,
  );
  return jar;
}

async function expectSignedIn(t: TestApp, jar: CookieJar, userId: string) {
  const me = await expectStatus<{ id: string }>(await call(t, '/api/users/me', { jar }), 200);
  expect(me.id).toBe(userId);
}

/** The session ended: refused on its next request, and the library agrees there is none. */
async function expectSignedOut(t: TestApp, jar: CookieJar) {
  await expectError(await call(t, '/api/users/me', { jar }), 401, 'UNAUTHORIZED');
  expect(await expectStatus(await call(t, '/api/auth/get-session', { jar }), 200)).toBeNull();
}

/** Two pending sign-ins of the user; `expectEnded` checks that neither can be completed, one by each kind of code. */
async function pendingSignIns(t: TestApp, email: string) {
  const byBackupCode = await pendingSignIn(t, email);
  const byTotp = await pendingSignIn(t, email);
  return {
    async expectEnded(factor: Pick<TwoFactorUser, 'authenticator' | 'backupCodes'>, backupCodeIndex: number) {
      await expectError(
        await call(t, '/api/auth/two-factor/verify-backup-code', {
          body: { code: factor.backupCodes[backupCodeIndex] },
          jar: byBackupCode,
        }),
        401,
        'INVALID_TWO_FACTOR_COOKIE',
      );
      await expectError(
        await call(t, '/api/auth/two-factor/verify-totp', {
          body: { code: await freshCode(factor.authenticator) },
          jar: byTotp,
        }),
        401,
        'INVALID_TWO_FACTOR_COOKIE',
      );
      for (const jar of [byBackupCode, byTotp]) {
        expect(await expectStatus(await call(t, '/api/auth/get-session', { jar }), 200)).toBeNull();
      }
    },
  };
}

const storedSessions = (t: TestApp, userId: string) =>
  t.database.withOwner((owner) =>
    owner.selectFrom('sessions').select(['id', 'mfa', 'step_up_at']).where('user_id', '=', userId).execute(),
  );

const pendingRecords = (t: TestApp) =>
  t.database.withOwner((owner) =>
    owner.selectFrom('verifications').select(['identifier', 'value']).where('identifier', 'like', '2fa-%').execute(),
  );

/** A user with TOTP on, enabled from a password session (`jar`, multi-factor now). */
async function twoFactorUser(t: TestApp): Promise<{ user: SignedInUser; jar: CookieJar; factor: TwoFactorUser }> {
  const user = await signedInUser(t);
  const jar = await passwordSession(t, user.email);
  const factor = await enableTotp(t, jar);
  return { user, jar, factor };
}

// --- A software authenticator: a registration as @simplewebauthn/browser serialises one ("none" attestation).

function cborHead(major: number, length: number): number[] {
  if (length < 24) return [(major << 5) | length];
  if (length < 0x100) return [(major << 5) | 24, length];
  return [(major << 5) | 25, length >> 8, length & 0xff];
}

/** RFC 8949, the few types a COSE key and an attestation object need. */
function cbor(value: unknown): number[] {
  if (typeof value === 'number') return value >= 0 ? cborHead(0, value) : cborHead(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = [...new TextEncoder().encode(value)];
    return [...cborHead(3, bytes.length), ...bytes];
  }
  if (value instanceof Uint8Array) return [...cborHead(2, value.length), ...value];
  if (value instanceof Map) {
    return [...cborHead(5, value.size), ...[...value].flatMap(([k, v]) => [...cbor(k), ...cbor(v)])];
  }
  throw new Error(`cbor: unsupported ${typeof value}`);
}

const b64url = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString('base64url');

/** The body of verify-registration for the challenge `options` carries: a new P-256 key, user present and verified. */
function registrationFor(options: { challenge: string; rp: { id: string } }) {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const coseKey = new Map<number, unknown>([
    [1, 2],
    [3, -7],
    [-1, 1],
    [-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url'))],
    [-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url'))],
  ]);
  const credentialId = randomBytes(32);
  const authData = new Uint8Array([
    ...createHash('sha256').update(options.rp.id).digest(),
    0x45, // user present, user verified, attested credential data
    0,
    0,
    0,
    0,
    ...new Uint8Array(16), // AAGUID
    credentialId.length >> 8,
    credentialId.length & 0xff,
    ...credentialId,
    ...cbor(coseKey),
  ]);
  const attestationObject = new Uint8Array(
    cbor(
      new Map<string, unknown>([
        ['fmt', 'none'],
        ['attStmt', new Map()],
        ['authData', authData],
      ]),
    ),
  );
  const clientDataJSON = Buffer.from(
    JSON.stringify({ type: 'webauthn.create', challenge: options.challenge, origin: APP_ORIGIN, crossOrigin: false }),
  );
  return {
    id: b64url(credentialId),
    rawId: b64url(credentialId),
    type: 'public-key',
    authenticatorAttachment: 'platform',
    clientExtensionResults: {},
    response: {
      clientDataJSON: b64url(clientDataJSON),
      attestationObject: b64url(attestationObject),
      transports: ['internal'],
    },
  };
}

/** Registers a passkey from `jar`'s session through both ceremony routes; the stored passkey's id. */
async function addPasskey(t: TestApp, jar: CookieJar, name = 'Laptop'): Promise<string> {
  const options = await expectStatus<{ challenge: string; rp: { id: string } }>(
    await call(t, '/api/auth/passkey/generate-register-options', { jar }),
    200,
  );
  const added = await expectStatus<{ id: string; name: string }>(
    await call(t, '/api/auth/passkey/verify-registration', { body: { response: registrationFor(options), name }, jar }),
    200,
  );
  expect(added.name).toBe(name);
  return added.id;
}

describe('credential changes end the other sessions and the pending sign-ins', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t?.close());

  describe('enabling two-factor', () => {
    it('ends the sessions from before (single-factor); the enabling session becomes multi-factor and fresh', async () => {
      const user = await signedInUser(t);
      const other = await passwordSession(t, user.email);
      const acting = await passwordSession(t, user.email);
      await expectSignedIn(t, other, user.id);
      // The app's clock dates the proof (the guard judges freshness by it).
      const before = t.clock().getTime();

      await enableTotp(t, acting);

      await expectSignedOut(t, user.jar);
      await expectSignedOut(t, other);
      await expectSignedIn(t, acting, user.id);
      const session = await expectStatus<{ session: { id: string; mfa: boolean } }>(
        await call(t, '/api/session', { jar: acting }),
        200,
      );
      expect(session.session.mfa).toBe(true);
      const rows = await storedSessions(t, user.id);
      expect(rows.map((row) => row.id)).toEqual([session.session.id]);
      expect(rows[0]!.mfa).toBe(true);
      expect(rows[0]!.step_up_at).not.toBeNull();
      expect(new Date(rows[0]!.step_up_at!).getTime()).toBeGreaterThanOrEqual(before - 1000);
      expect(new Date(rows[0]!.step_up_at!).getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    });

    it('ends a pending sign-in left from before two-factor was turned off and on again', async () => {
      const { user, factor } = await twoFactorUser(t);
      const pending = await pendingSignIns(t, user.email);
      // Turned off from a fresh session (no second factor is asked once it is off).
      const acting = await pendingSignIn(t, user.email);
      await completeWithTotp(t, acting, factor.authenticator);
      expect(
        (await call(t, '/api/auth/two-factor/disable', { body: { password: PASSWORD }, jar: acting })).status,
      ).toBe(200);
      const again = await passwordSession(t, user.email);
      const renewed = await enableTotp(t, again);

      await pending.expectEnded(renewed, 0);
      await expectSignedOut(t, acting);
      await expectSignedIn(t, again, user.id);
      expect((await pendingRecords(t)).filter((record) => record.value === user.id)).toEqual([]);
    });

    it('a refused enabling code ends nothing', async () => {
      const user = await signedInUser(t);
      const acting = await passwordSession(t, user.email);
      expect((await call(t, '/api/auth/two-factor/enable', { body: { password: PASSWORD }, jar: acting })).status).toBe(
        200,
      );
      await expectError(
        await call(t, '/api/auth/two-factor/verify-totp', { body: { code: '000000x' }, jar: acting }),
        401,
        'INVALID_CODE',
      );
      await expectSignedIn(t, user.jar, user.id);
      await expectSignedIn(t, acting, user.id);
    });
  });

  describe('adding a passkey', () => {
    it('ends the other sessions and the pending sign-ins; the registering session stays', async () => {
      const { user, jar: first, factor } = await twoFactorUser(t);
      const other = await multiFactorSession(t, user.email, factor);
      const acting = await multiFactorSession(t, user.email, factor);
      const pending = await pendingSignIns(t, user.email);
      await expectSignedIn(t, other, user.id);

      const passkeyId = await addPasskey(t, acting);

      await expectSignedOut(t, first);
      await expectSignedOut(t, other);
      await pending.expectEnded(factor, 0);
      await expectSignedIn(t, acting, user.id);
      const listed = await expectStatus<{ id: string }[]>(
        await call(t, '/api/auth/passkey/list-user-passkeys', { jar: acting }),
        200,
      );
      expect(listed.map((p) => p.id)).toEqual([passkeyId]);
    });

    it('a refused registration ends nothing', async () => {
      const user = await signedInUser(t);
      const acting = await passwordSession(t, user.email);
      const options = await expectStatus<{ challenge: string; rp: { id: string } }>(
        await call(t, '/api/auth/passkey/generate-register-options', { jar: acting }),
        200,
      );
      const forged = registrationFor({ ...options, challenge: b64url(randomBytes(32)) });
      expect(
        (await call(t, '/api/auth/passkey/verify-registration', { body: { response: forged }, jar: acting })).status,
      ).toBe(400);
      await expectSignedIn(t, user.jar, user.id);
    });
  });

  describe('changing the password', () => {
    it('ends the other sessions and the pending sign-ins; the changing session stays', async () => {
      const { user, jar: acting, factor } = await twoFactorUser(t);
      const other = await multiFactorSession(t, user.email, factor);
      const pending = await pendingSignIns(t, user.email);

      const changed = await call(t, '/api/auth/change-password', {
        body: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
        jar: acting,
      });
      expect(changed.status).toBe(200);

      await expectSignedOut(t, other);
      await pending.expectEnded(factor, 1);
      await expectSignedIn(t, acting, user.id);
      expect((await storedSessions(t, user.id)).length).toBe(1);
    });

    it('with revokeOtherSessions, the session the library puts in its place stays, still multi-factor', async () => {
      const { user, jar: acting, factor } = await twoFactorUser(t);
      const other = await multiFactorSession(t, user.email, factor);
      const pending = await pendingSignIns(t, user.email);

      const changed = await call(t, '/api/auth/change-password', {
        body: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD, revokeOtherSessions: true },
        jar: acting,
      });
      expect(changed.status).toBe(200);

      await expectSignedOut(t, other);
      await pending.expectEnded(factor, 2);
      await expectSignedIn(t, acting, user.id);
      const session = await expectStatus<{ session: { mfa: boolean } }>(
        await call(t, '/api/session', { jar: acting }),
        200,
      );
      expect(session.session.mfa).toBe(true);
    });

    it('a wrong current password ends nothing', async () => {
      const { user, jar: acting, factor } = await twoFactorUser(t);
      const other = await multiFactorSession(t, user.email, factor);
      const pending = await pendingSignIn(t, user.email);
      expect(
        (
          await call(t, '/api/auth/change-password', {
            body: { currentPassword: 'not the password', newPassword: NEW_PASSWORD },
            jar: acting,
          })
        ).status,
      ).toBe(400);
      await expectSignedIn(t, other, user.id);
      await expectSignedIn(t, acting, user.id);
      expect(
        (
          await call(t, '/api/auth/two-factor/verify-backup-code', {
            body: { code: factor.backupCodes[0] },
            jar: pending,
          })
        ).status,
      ).toBe(200);
    });
  });

  describe('resetting the password', () => {
    async function resetToken(user: SignedInUser): Promise<string> {
      const before = mailsTo(t, user.email).length;
      expect(
        (
          await call(t, '/api/auth/request-password-reset', {
            body: { email: user.email, redirectTo: `${APP_ORIGIN}/reset` },
          })
        ).status,
      ).toBe(200);
      // The mail is sent after the answer (no timing difference for an unknown address).
      for (let i = 0; i < 100 && mailsTo(t, user.email).length === before; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const followed = await call(t, pathOf(linkIn(mailsTo(t, user.email).at(-1)!.text)));
      expect(followed.status).toBe(302);
      const token = new URL(followed.headers.get('location')!).searchParams.get('token');
      expect(token).toBeTruthy();
      return token!;
    }

    it('ends every session and every pending sign-in; the new password then signs in with the second factor', async () => {
      const { user, jar: first, factor } = await twoFactorUser(t);
      const other = await multiFactorSession(t, user.email, factor);
      const pending = await pendingSignIns(t, user.email);
      const token = await resetToken(user);

      expect((await call(t, '/api/auth/reset-password', { body: { newPassword: NEW_PASSWORD, token } })).status).toBe(
        200,
      );

      await expectSignedOut(t, first);
      await expectSignedOut(t, other);
      await pending.expectEnded(factor, 3);
      expect(await storedSessions(t, user.id)).toEqual([]);
      expect((await pendingRecords(t)).filter((record) => record.value === user.id)).toEqual([]);

      // The account itself is fine: the new password, then the second factor.
      const jar = new CookieJar();
      const signIn = await call(t, '/api/auth/sign-in/email', {
        body: { email: user.email, password: NEW_PASSWORD },
        jar,
      });
      expect(await expectStatus(signIn, 200)).toMatchObject({ twoFactorRedirect: true });
      await completeWithTotp(t, jar, factor.authenticator);
      await expectSignedIn(t, jar, user.id);
    });

    it('the token in the query string ends them too', async () => {
      const { user, factor } = await twoFactorUser(t);
      const pending = await pendingSignIns(t, user.email);
      const token = await resetToken(user);
      expect(
        (
          await call(t, `/api/auth/reset-password?token=${encodeURIComponent(token)}`, {
            body: { newPassword: NEW_PASSWORD },
          })
        ).status,
      ).toBe(200);
      await pending.expectEnded(factor, 4);
    });

    it('a refused token ends nothing', async () => {
      const { user, jar, factor } = await twoFactorUser(t);
      const pending = await pendingSignIn(t, user.email);
      await expectError(
        await call(t, '/api/auth/reset-password', { body: { newPassword: NEW_PASSWORD, token: 'made-up' } }),
        400,
        'INVALID_TOKEN',
      );
      await expectSignedIn(t, jar, user.id);
      expect(
        (
          await call(t, '/api/auth/two-factor/verify-backup-code', {
            body: { code: factor.backupCodes[0] },
            jar: pending,
          })
        ).status,
      ).toBe(200);
    });
  });

  describe('revoking sessions', () => {
    it('revoke-sessions ends the pending sign-ins with the sessions', async () => {
      const { user, jar: acting, factor } = await twoFactorUser(t);
      const pending = await pendingSignIns(t, user.email);
      expect((await call(t, '/api/auth/revoke-sessions', { body: {}, jar: acting })).status).toBe(200);
      await expectSignedOut(t, acting);
      await pending.expectEnded(factor, 5);
    });

    it('revoke-other-sessions ends the pending sign-ins and keeps the caller', async () => {
      const { user, jar: acting, factor } = await twoFactorUser(t);
      const other = await multiFactorSession(t, user.email, factor);
      const pending = await pendingSignIns(t, user.email);
      expect((await call(t, '/api/auth/revoke-other-sessions', { body: {}, jar: acting })).status).toBe(200);
      await expectSignedOut(t, other);
      await pending.expectEnded(factor, 6);
      await expectSignedIn(t, acting, user.id);
    });
  });

  it("one user's change leaves another user's sessions and pending sign-ins alone", async () => {
    const bystander = await twoFactorUser(t);
    const waiting = await pendingSignIn(t, bystander.user.email);
    const { jar } = await twoFactorUser(t);
    expect(
      (
        await call(t, '/api/auth/change-password', {
          body: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD },
          jar,
        })
      ).status,
    ).toBe(200);
    await expectSignedIn(t, bystander.jar, bystander.user.id);
    expect(
      (
        await call(t, '/api/auth/two-factor/verify-backup-code', {
          body: { code: bystander.factor.backupCodes[0] },
          jar: waiting,
        })
      ).status,
    ).toBe(200);
  });
});
