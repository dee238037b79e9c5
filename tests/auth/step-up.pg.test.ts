import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, createTestClock, type TestApp, type TestClock } from '../support/app.js';
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
import { completeWithTotp, enableTotp, freshCode, pendingSignIn, wrongCode } from '../support/mfa.js';
import { createOrganization, newMember, type TestOrganization } from '../support/orgs.js';
import { expectRateLimited, nextIp } from '../support/rate-limit.js';
import { type SignedInUser, signedInUser, uniqueEmail } from '../support/users.js';

/**
 * docs/security.md "Sensitive actions and step-up": a sensitive action needs
 * a session that proved every factor of its account within STEP_UP_MAX_AGE
 * (600 s by default), judged by the app's clock; a sign-in proves the
 * factors it used, and POST /api/session/step-up proves them again.
 */
const MAX_AGE_MS = 600_000;
const SESSION_COOKIE = 'gatehouse.session_token';

interface SessionBody {
  session: { id: string; mfa: boolean; stepUpUntil: string };
}

async function sessionOf(t: TestApp, jar: CookieJar): Promise<SessionBody> {
  return expectStatus<SessionBody>(await call(t, '/api/session', { jar }), 200);
}

/** The session's proof as stored (null: it never proved every factor). */
async function storedStepUp(t: TestApp, jar: CookieJar): Promise<Date | null> {
  const { session } = await sessionOf(t, jar);
  const row = await t.db
    .selectFrom('sessions')
    .select('step_up_at')
    .where('id', '=', session.id)
    .executeTakeFirstOrThrow();
  return row.step_up_at ? new Date(row.step_up_at) : null;
}

/** The user's sessions proved every factor just over STEP_UP_MAX_AGE ago, by the app's clock. */
async function makeStale(t: TestApp, userId: string): Promise<void> {
  await t.database.withOwner((owner) =>
    owner
      .updateTable('sessions')
      .set({ step_up_at: new Date(t.clock().getTime() - MAX_AGE_MS - 1000) })
      .where('user_id', '=', userId)
      .execute(),
  );
}

/** A password sign-in through the library's route, for an account without a second factor. */
async function passwordSignIn(t: TestApp, email: string): Promise<CookieJar> {
  const jar = new CookieJar();
  await expectStatus(await call(t, '/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar }), 200);
  expect(jar.get(SESSION_COOKIE)).toBeTruthy();
  return jar;
}

/** Follows a mailed magic link; the jar holds whatever the library set (a session, or a pending second factor). */
async function magicLinkSignIn(t: TestApp, email: string): Promise<CookieJar> {
  await expectStatus(await call(t, '/api/auth/sign-in/magic-link', { body: { email } }), 200);
  const mail = mailsTo(t, email).at(-1);
  if (!mail) throw new Error(`no magic link for ${email}`);
  const jar = new CookieJar();
  expect((await call(t, pathOf(linkIn(mail.text)), { jar })).status).toBe(302);
  return jar;
}

/** A verified account with no password (no credential account), as a magic-link sign-up leaves it. */
async function passwordlessUser(t: TestApp): Promise<{ id: string; email: string }> {
  const email = uniqueEmail('passwordless');
  const id = await t.database.withOwner(async (owner) => {
    const user = await owner
      .insertInto('users')
      .values({ name: 'No Password', email, email_verified: true })
      .returning('id')
      .executeTakeFirstOrThrow();
    return user.id as string;
  });
  return { id, email };
}

function stepUp(t: TestApp, jar: CookieJar, body: Record<string, unknown>, ip?: string): Promise<Response> {
  return call(t, '/api/session/step-up', { body, jar, ip });
}

async function expectInvalidCredentials(response: Response): Promise<void> {
  expect(await expectStatus(response, 401)).toEqual({ code: 'INVALID_CREDENTIALS', message: 'Invalid credentials' });
}

async function expectStepUpRequired(response: Response): Promise<void> {
  expect(await expectStatus(response, 403)).toEqual({
    code: 'STEP_UP_REQUIRED',
    message: 'Recent authentication required',
  });
}

/** A sensitive route that writes nothing: passkey registration options (200 when fresh). */
const probe = (t: TestApp, jar: CookieJar) => call(t, '/api/auth/passkey/generate-register-options', { jar });

describe('step-up (docs/security.md "Sensitive actions and step-up")', () => {
  let t: TestApp;
  let clock: TestClock;
  beforeAll(async () => {
    clock = createTestClock();
    t = await createTestApp({ clock, env: { API_KEY_AUTH: 'enabled' } });
  });
  afterAll(() => t?.close());

  describe('the attack: a stolen single-factor session, minutes old', () => {
    it('cannot add a passkey, read the TOTP secret, mint backup codes or turn two-factor off; the victim sees nothing changed', async () => {
      const victim = await signedInUser(t);
      const factor = await enableTotp(t, victim.jar);
      await t.database.withOwner((owner) =>
        owner
          .insertInto('passkeys')
          .values({
            user_id: victim.id,
            name: 'Phone',
            public_key: 'cHVibGlj',
            credential_id: `credential-${crypto.randomUUID()}`,
            counter: 0,
            device_type: 'singleDevice',
            backed_up: false,
          })
          .execute(),
      );
      const secondFactorsBefore = await t.db
        .selectFrom('two_factors')
        .select(['secret', 'backup_codes', 'verified'])
        .where('user_id', '=', victim.id)
        .execute();
      const passkeysBefore = await expectStatus<{ id: string }[]>(
        await call(t, '/api/auth/passkey/list-user-passkeys', { jar: victim.jar }),
        200,
      );
      expect(passkeysBefore).toHaveLength(1);

      // The attacker replays the victim's cookies a quarter of an hour later (far less than a day).
      const stolen = victim.jar;
      clock.advance(MAX_AGE_MS + 5 * 60_000);
      expect(new Date((await sessionOf(t, stolen)).session.stepUpUntil).getTime()).toBeLessThanOrEqual(
        clock().getTime(),
      );

      await expectStepUpRequired(await call(t, '/api/auth/passkey/generate-register-options', { jar: stolen }));
      await expectStepUpRequired(
        await call(t, '/api/auth/passkey/verify-registration', {
          jar: stolen,
          body: { response: { id: 'attacker', rawId: 'attacker', type: 'public-key', response: {} }, name: 'Mine' },
        }),
      );
      for (const path of ['get-totp-uri', 'generate-backup-codes', 'disable']) {
        await expectStepUpRequired(
          await call(t, `/api/auth/two-factor/${path}`, { jar: stolen, body: { password: PASSWORD } }),
        );
      }
      // With the password the session still cannot prove the second factor.
      await expectInvalidCredentials(await stepUp(t, stolen, { password: PASSWORD }));
      await expectStepUpRequired(await probe(t, stolen));

      // The victim signs in again with both factors: the same passkeys, the same TOTP secret and codes.
      const legitimate = await pendingSignIn(t, victim.email);
      await completeWithTotp(t, legitimate, factor.authenticator);
      const passkeysAfter = await expectStatus<{ id: string }[]>(
        await call(t, '/api/auth/passkey/list-user-passkeys', { jar: legitimate }),
        200,
      );
      expect(passkeysAfter).toEqual(passkeysBefore);
      const secondFactorsAfter = await t.db
        .selectFrom('two_factors')
        .select(['secret', 'backup_codes', 'verified'])
        .where('user_id', '=', victim.id)
        .execute();
      expect(secondFactorsAfter).toEqual(secondFactorsBefore);
      // That sign-in proved both factors, by the app's clock (which the library's sessions agree with).
      expect(await probe(t, legitimate).then((r) => r.status)).toBe(200);
    });
  });

  describe('every sensitive route', () => {
    let owner: SignedInUser;
    let viewer: SignedInUser;
    let superadmin: SignedInUser;
    let org: TestOrganization;
    let key: string;

    interface Actors {
      owner: SignedInUser;
      viewer: SignedInUser;
      superadmin: SignedInUser;
      self: SignedInUser;
    }
    interface SensitiveRoute {
      method: 'GET' | 'POST' | 'PATCH';
      path: string | ((a: Actors) => string);
      body?: (a: Actors, fresh: boolean) => unknown;
      /** Who performs it (a new user for the account's own existence). */
      actor: 'owner' | 'superadmin' | 'self';
      /** What a caller lacking the permission or platform role gets, first. */
      lacking?: { status: number; code: string };
      /** What an API key holding every scope gets. */
      key: { status: number; code: string };
      /** The status of a fresh session's call. */
      fresh: number;
    }
    const insufficient = { status: 403, code: 'INSUFFICIENT_PERMISSIONS' };
    const keyForbidden = { status: 403, code: 'FORBIDDEN' };
    const keyUnauthorized = { status: 401, code: 'UNAUTHORIZED' };
    const passkeyResponse = { response: { id: 'x', rawId: 'x', type: 'public-key', response: {} } };

    const ROUTES: SensitiveRoute[] = [
      {
        method: 'GET',
        path: '/api/auth/passkey/generate-register-options',
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 200,
      },
      {
        method: 'POST',
        path: '/api/auth/passkey/verify-registration',
        body: () => passkeyResponse,
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 400,
      },
      {
        method: 'POST',
        path: '/api/auth/passkey/delete-passkey',
        body: () => ({ id: crypto.randomUUID() }),
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 404,
      },
      {
        method: 'POST',
        path: '/api/auth/two-factor/get-totp-uri',
        body: () => ({ password: PASSWORD }),
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 400,
      },
      {
        method: 'POST',
        path: '/api/auth/two-factor/generate-backup-codes',
        body: () => ({ password: PASSWORD }),
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 400,
      },
      {
        method: 'POST',
        path: '/api/auth/two-factor/disable',
        body: () => ({ password: PASSWORD }),
        actor: 'self',
        key: keyUnauthorized,
        fresh: 200,
      },
      {
        method: 'POST',
        path: '/api/auth/two-factor/enable',
        body: () => ({ password: PASSWORD }),
        actor: 'self',
        key: keyUnauthorized,
        fresh: 200,
      },
      {
        method: 'POST',
        path: '/api/auth/change-password',
        // A wrong current password: the library's own refusal once the guard lets it through.
        body: () => ({ currentPassword: 'not the password', newPassword: 'another long password' }),
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 400,
      },
      {
        method: 'POST',
        path: '/api/auth/link-social',
        body: () => ({ provider: 'google', callbackURL: '/' }),
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 404,
      },
      {
        method: 'POST',
        path: '/api/auth/unlink-account',
        body: () => ({ providerId: 'google' }),
        actor: 'owner',
        key: keyUnauthorized,
        fresh: 400,
      },
      {
        method: 'POST',
        path: '/api/auth/organization/delete',
        body: (a, fresh) => ({ organizationId: fresh ? a.self.id : org.id }),
        actor: 'owner',
        lacking: insufficient,
        key: keyUnauthorized,
        fresh: 200,
      },
      {
        method: 'POST',
        path: '/api/api-keys',
        body: () => ({ name: 'step-up', scopes: ['roles:read'] }),
        actor: 'owner',
        lacking: insufficient,
        key: keyForbidden,
        fresh: 201,
      },
      {
        method: 'PATCH',
        path: '/api/organization/security',
        body: () => ({ requireMfa: false }),
        actor: 'owner',
        lacking: insufficient,
        key: keyForbidden,
        fresh: 200,
      },
      {
        method: 'POST',
        path: '/api/roles/transfer-ownership',
        // Not an Admin of the organization: the handler's own refusal.
        body: () => ({ targetMemberId: crypto.randomUUID() }),
        actor: 'owner',
        lacking: insufficient,
        key: keyForbidden,
        fresh: 409,
      },
      { method: 'POST', path: '/api/users/me/deletion', actor: 'self', key: keyUnauthorized, fresh: 202 },
      {
        method: 'POST',
        path: '/api/users/me/purge',
        body: (a) => ({ confirmEmail: a.self.email }),
        actor: 'self',
        key: keyUnauthorized,
        // Only a scheduled account is purged: the handler's own refusal.
        fresh: 400,
      },
      {
        method: 'PATCH',
        path: (a) => `/api/admin/users/${a.self.id}/role`,
        body: () => ({ role: 'user' }),
        actor: 'superadmin',
        lacking: { status: 403, code: 'FORBIDDEN' },
        key: keyUnauthorized,
        fresh: 200,
      },
    ];

    beforeAll(async () => {
      owner = await signedInUser(t);
      org = await createOrganization(t, owner);
      viewer = await newMember(t, org, 'viewer');
      superadmin = await signedInUser(t);
      await t.database.withOwner((db) =>
        db.updateTable('users').set({ role: 'superadmin' }).where('id', '=', superadmin.id).execute(),
      );
      const permissions = (
        await expectStatus<{ permissions: string[] }>(await call(t, '/api/session', { jar: owner.jar }), 200)
      ).permissions;
      key = (
        await expectStatus<{ key: string }>(
          await call(t, '/api/api-keys', { jar: owner.jar, body: { name: 'all scopes', scopes: permissions } }),
          201,
        )
      ).key;
    });

    it('the table names every library route declared sensitive, and the service routes docs/security.md lists', async () => {
      const { LIBRARY_ROUTES } = await import('../../src/library/routes.js');
      const declared = LIBRARY_ROUTES.filter((r) => r.access.kind === 'session' && r.access.sensitive).map(
        (r) => `${r.method} /api/auth${r.path}`,
      );
      const listed = ROUTES.map(
        (r) => `${r.method} ${typeof r.path === 'string' ? r.path : '/api/admin/users/{id}/role'}`,
      );
      expect(listed.filter((route) => route.includes('/api/auth/')).sort()).toEqual(declared.sort());
      expect(listed.filter((route) => !route.includes('/api/auth/')).sort()).toEqual(
        [
          'POST /api/api-keys',
          'PATCH /api/organization/security',
          'POST /api/roles/transfer-ownership',
          'POST /api/users/me/deletion',
          'POST /api/users/me/purge',
          'PATCH /api/admin/users/{id}/role',
        ].sort(),
      );
    });

    it.each(
      ROUTES.map(
        (route) =>
          [
            `${route.method} ${typeof route.path === 'string' ? route.path : '/api/admin/users/:id/role'}`,
            route,
          ] as const,
      ),
    )('%s: stale 403 STEP_UP_REQUIRED (permission first), key refused, fresh passes', async (_label, route) => {
      const self = await signedInUser(t);
      if (route.path === '/api/auth/organization/delete') {
        // A throwaway organization of the owner's for the fresh call (its id rides in `self.id`).
        const slug = `doomed-${crypto.randomUUID().slice(0, 8)}`;
        const created = await expectStatus<{ id: string }>(
          await call(t, '/api/auth/organization/create', {
            jar: owner.jar,
            body: { name: slug, slug, keepCurrentActiveOrganization: true },
          }),
          200,
        );
        self.id = created.id;
      }
      const actors: Actors = { owner, viewer, superadmin, self };
      const path = typeof route.path === 'string' ? route.path : route.path(actors);
      const request = (jar: CookieJar | undefined, fresh: boolean, headers?: Record<string, string>) =>
        call(t, path, {
          method: route.method,
          jar,
          headers,
          body: route.body?.(actors, fresh) ?? (route.method === 'GET' ? undefined : {}),
        });
      const actor = actors[route.actor];

      await makeStale(t, actor.id);
      await expectStepUpRequired(await request(actor.jar, false));
      if (route.lacking) {
        await makeStale(t, viewer.id);
        await expectError(await request(viewer.jar, false), route.lacking.status, route.lacking.code);
      }
      const keyed = await request(undefined, false, { authorization: `Bearer ${key}` });
      const refused = await expectError(keyed, route.key.status, route.key.code);
      if (route.key.code === 'FORBIDDEN') expect(refused.message).toBe('API keys cannot perform this action');

      await expectStatus(await stepUp(t, actor.jar, { password: PASSWORD }), 200);
      const fresh = await request(actor.jar, true);
      expect(fresh.status, await fresh.clone().text()).toBe(route.fresh);
    });
  });

  describe('POST /api/session/step-up', () => {
    it('with the password (no second factor): fresh until STEP_UP_MAX_AGE later, as /api/session says', async () => {
      const user = await signedInUser(t);
      await makeStale(t, user.id);
      const stale = await sessionOf(t, user.jar);
      expect(new Date(stale.session.stepUpUntil).getTime()).toBeLessThan(clock().getTime());
      await expectStepUpRequired(await probe(t, user.jar));

      const answer = await expectStatus<{ stepUpUntil: string }>(
        await stepUp(t, user.jar, { password: PASSWORD }),
        200,
      );
      expect(answer.stepUpUntil).toBe(new Date(clock().getTime() + MAX_AGE_MS).toISOString());
      const fresh = await sessionOf(t, user.jar);
      expect(fresh.session.stepUpUntil).toBe(answer.stepUpUntil);
      expect(fresh.session.id).toBe(stale.session.id);
      // No second factor was proved: the session stays single-factor.
      expect(fresh.session.mfa).toBe(false);
      expect((await probe(t, user.jar)).status).toBe(200);

      // Fresh until exactly stepUpUntil, by the app's clock.
      clock.advance(MAX_AGE_MS - 1000);
      expect((await probe(t, user.jar)).status).toBe(200);
      clock.advance(1000);
      await expectStepUpRequired(await probe(t, user.jar));
    });

    it("a session days old that stepped up registers a passkey: the library's own age rule decides nothing", async () => {
      const user = await signedInUser(t);
      await t.database.withOwner((owner) =>
        owner
          .updateTable('sessions')
          .set({ created_at: new Date(Date.now() - 3 * 86_400_000) })
          .where('user_id', '=', user.id)
          .execute(),
      );
      await makeStale(t, user.id);
      await expectStepUpRequired(await probe(t, user.jar));
      await expectStatus(await stepUp(t, user.jar, { password: PASSWORD }), 200);
      expect((await probe(t, user.jar)).status).toBe(200);
    });

    it('one answer for every failure: wrong, missing or extra factors; the session stays stale', async () => {
      const user = await signedInUser(t);
      await makeStale(t, user.id);
      await expectInvalidCredentials(await stepUp(t, user.jar, { password: 'not the password' }));
      await expectInvalidCredentials(await stepUp(t, user.jar, {}));
      // A code for an account without two-factor proves nothing.
      await expectInvalidCredentials(await stepUp(t, user.jar, { password: PASSWORD, code: '123456' }));
      await expectInvalidCredentials(await stepUp(t, user.jar, { password: PASSWORD, backupCode: 'abcde-fghij' }));
      await expectStepUpRequired(await probe(t, user.jar));
      expect(new Date((await storedStepUp(t, user.jar))!).getTime()).toBeLessThan(clock().getTime() - MAX_AGE_MS);
    });

    it('validates its body strictly and needs a session', async () => {
      const user = await signedInUser(t);
      await expectError(await stepUp(t, user.jar, { password: PASSWORD, remember: true }), 400, 'VALIDATION_ERROR');
      await expectError(await stepUp(t, user.jar, { password: 'x'.repeat(1025) }), 400, 'VALIDATION_ERROR');
      await expectError(await stepUp(t, user.jar, { password: 1 }), 400, 'VALIDATION_ERROR');
      await expectError(await stepUp(t, new CookieJar(), { password: PASSWORD }), 401, 'UNAUTHORIZED');
    });

    it('an account scheduled for deletion may step up (and then purge)', async () => {
      const user = await signedInUser(t);
      await expectStatus(await call(t, '/api/users/me/deletion', { jar: user.jar, method: 'POST' }), 202);
      await makeStale(t, user.id);
      await expectStepUpRequired(
        await call(t, '/api/users/me/purge', { jar: user.jar, body: { confirmEmail: user.email } }),
      );
      await expectStatus(await stepUp(t, user.jar, { password: PASSWORD }), 200);
      await expectStatus(
        await call(t, '/api/users/me/purge', { jar: user.jar, body: { confirmEmail: user.email } }),
        200,
      );
    });

    it('an account without a password cannot step up here: it signs in again, and that session is fresh', async () => {
      const user = await passwordlessUser(t);
      const jar = await magicLinkSignIn(t, user.email);
      expect(await storedStepUp(t, jar)).toEqual(clock());
      await makeStale(t, user.id);
      await expectInvalidCredentials(await stepUp(t, jar, { password: PASSWORD }));
      await expectInvalidCredentials(await stepUp(t, jar, {}));
      const again = await magicLinkSignIn(t, user.email);
      expect((await probe(t, again)).status).toBe(200);
    });

    describe('with two-factor on', () => {
      async function twoFactorUser() {
        const user = await signedInUser(t);
        const factor = await enableTotp(t, user.jar);
        await makeStale(t, user.id);
        return { user, factor };
      }

      it('the password alone is not enough; password and a TOTP code are, and make the session multi-factor', async () => {
        const { user, factor } = await twoFactorUser();
        await expectInvalidCredentials(await stepUp(t, user.jar, { password: PASSWORD }));
        await expectInvalidCredentials(await stepUp(t, user.jar, { code: await freshCode(factor.authenticator) }));
        await expectInvalidCredentials(
          await stepUp(t, user.jar, { password: PASSWORD, code: wrongCode(factor.authenticator) }),
        );
        await expectStepUpRequired(await probe(t, user.jar));

        const code = await freshCode(factor.authenticator);
        await expectStatus(await stepUp(t, user.jar, { password: PASSWORD, code }), 200);
        expect((await sessionOf(t, user.jar)).session.mfa).toBe(true);
        expect((await probe(t, user.jar)).status).toBe(200);

        // RFC 6238 §5.2: the same code again is a replay.
        await makeStale(t, user.id);
        await expectInvalidCredentials(await stepUp(t, user.jar, { password: PASSWORD, code }));
        await expectStepUpRequired(await probe(t, user.jar));
      });

      it('a wrong password spends no code: the same code then works behind the right one', async () => {
        const { user, factor } = await twoFactorUser();
        const code = await freshCode(factor.authenticator);
        await expectInvalidCredentials(await stepUp(t, user.jar, { password: 'not the password', code }));
        await expectStatus(await stepUp(t, user.jar, { password: PASSWORD, code }), 200);
      });

      it("wrong codes count toward the account's code lockout: after ten in a row even the right code is refused, here and at sign-in", async () => {
        const { user, factor } = await twoFactorUser();
        for (let attempt = 0; attempt < 10; attempt++) {
          await expectInvalidCredentials(
            await stepUp(t, user.jar, { password: PASSWORD, code: wrongCode(factor.authenticator) }),
          );
        }
        await expectInvalidCredentials(
          await stepUp(t, user.jar, { password: PASSWORD, code: await freshCode(factor.authenticator) }),
        );
        await expectInvalidCredentials(
          await stepUp(t, user.jar, { password: PASSWORD, backupCode: factor.backupCodes[0] }),
        );
        await expectStepUpRequired(await probe(t, user.jar));
        const pending = await pendingSignIn(t, user.email);
        const locked = await call(t, '/api/auth/two-factor/verify-totp', {
          body: { code: await freshCode(factor.authenticator) },
          jar: pending,
        });
        expect(locked.status).toBe(429);
        expect(await locked.json()).toMatchObject({ code: 'ACCOUNT_TEMPORARILY_LOCKED' });
      });

      it('a right code clears the count of wrong ones (the lockout counts failures in a row)', async () => {
        const { user, factor } = await twoFactorUser();
        for (let attempt = 0; attempt < 9; attempt++) {
          await expectInvalidCredentials(
            await stepUp(t, user.jar, { password: PASSWORD, code: wrongCode(factor.authenticator) }),
          );
        }
        await expectStatus(await stepUp(t, user.jar, { password: PASSWORD, backupCode: factor.backupCodes[0] }), 200);
        await makeStale(t, user.id);
        await expectInvalidCredentials(
          await stepUp(t, user.jar, { password: PASSWORD, code: wrongCode(factor.authenticator) }),
        );
        await expectStatus(await stepUp(t, user.jar, { password: PASSWORD, backupCode: factor.backupCodes[1] }), 200);
      });

      it('a backup code stands in for the TOTP code once, never for the password', async () => {
        const { user, factor } = await twoFactorUser();
        const [backupCode, other] = factor.backupCodes;
        await expectInvalidCredentials(await stepUp(t, user.jar, { backupCode }));
        await expectInvalidCredentials(
          await stepUp(t, user.jar, { password: PASSWORD, backupCode, code: await freshCode(factor.authenticator) }),
        );
        await expectStatus(await stepUp(t, user.jar, { password: PASSWORD, backupCode }), 200);
        expect((await probe(t, user.jar)).status).toBe(200);
        await makeStale(t, user.id);
        await expectInvalidCredentials(await stepUp(t, user.jar, { password: PASSWORD, backupCode }));
        await expectStepUpRequired(await probe(t, user.jar));
        // The others still stand.
        await expectStatus(await stepUp(t, user.jar, { password: PASSWORD, backupCode: other }), 200);
      });
    });
  });

  describe('the proofs a sign-in carries', () => {
    it('a password sign-in of an account without two-factor is fresh, dated by the app clock', async () => {
      const user = await signedInUser(t);
      clock.advance(3 * MAX_AGE_MS);
      const jar = await passwordSignIn(t, user.email);
      expect(await storedStepUp(t, jar)).toEqual(clock());
      expect((await probe(t, jar)).status).toBe(200);
    });

    it('a passkey sign-in is fresh and multi-factor (a passkey proves every factor)', async () => {
      const user = await signedInUser(t);
      // A software authenticator: a P-256 key whose public half is stored as the library stores it (COSE, base64).
      const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const jwk = publicKey.export({ format: 'jwk' });
      const coordinate = (value: string | undefined) => [0x58, 32, ...Buffer.from(value!, 'base64url')];
      // RFC 9052 EC2 key {1: 2, 3: -7, -1: 1, -2: x, -3: y} in CBOR.
      const cose = Buffer.from([
        0xa5,
        ...[0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21],
        ...coordinate(jwk.x),
        0x22,
        ...coordinate(jwk.y),
      ]);
      const credentialId = randomBytes(16).toString('base64url');
      await t.database.withOwner((owner) =>
        owner
          .insertInto('passkeys')
          .values({
            user_id: user.id,
            name: 'Software',
            public_key: cose.toString('base64'),
            credential_id: credentialId,
            counter: 0,
            device_type: 'singleDevice',
            backed_up: false,
          })
          .execute(),
      );
      clock.advance(2 * MAX_AGE_MS);
      const jar = new CookieJar();
      const options = await expectStatus<{ challenge: string; rpId: string }>(
        await call(t, '/api/auth/passkey/generate-authenticate-options', { jar }),
        200,
      );
      const clientDataJSON = Buffer.from(
        JSON.stringify({ type: 'webauthn.get', challenge: options.challenge, origin: APP_ORIGIN, crossOrigin: false }),
      );
      // rpIdHash, flags UP | UV, signature counter 1.
      const authenticatorData = Buffer.concat([
        createHash('sha256').update(options.rpId).digest(),
        Buffer.from([0x05, 0, 0, 0, 1]),
      ]);
      const signature = sign(
        'sha256',
        Buffer.concat([authenticatorData, createHash('sha256').update(clientDataJSON).digest()]),
        privateKey,
      );
      await expectStatus(
        await call(t, '/api/auth/passkey/verify-authentication', {
          jar,
          body: {
            response: {
              id: credentialId,
              rawId: credentialId,
              type: 'public-key',
              response: {
                clientDataJSON: clientDataJSON.toString('base64url'),
                authenticatorData: authenticatorData.toString('base64url'),
                signature: signature.toString('base64url'),
              },
              clientExtensionResults: {},
            },
          },
        }),
        200,
      );
      expect(await storedStepUp(t, jar)).toEqual(clock());
      expect((await sessionOf(t, jar)).session.mfa).toBe(true);
      expect((await probe(t, jar)).status).toBe(200);
    });

    it('a magic-link session of an account with a password is not fresh (it never proved the password)', async () => {
      const user = await signedInUser(t);
      const jar = await magicLinkSignIn(t, user.email);
      expect(await storedStepUp(t, jar)).toBeNull();
      await expectStepUpRequired(await probe(t, jar));
      // Its stepUpUntil is when it was created: never ahead of it.
      const { session } = await sessionOf(t, jar);
      const created = await t.db
        .selectFrom('sessions')
        .select('created_at')
        .where('id', '=', session.id)
        .executeTakeFirstOrThrow();
      expect(session.stepUpUntil).toBe(new Date(created.created_at).toISOString());
      // Stepping up with the password makes it fresh.
      await expectStatus(await stepUp(t, jar, { password: PASSWORD }), 200);
      expect((await probe(t, jar)).status).toBe(200);
    });

    it('the second factor completing a password sign-in makes it fresh; completing a magic link of an account with a password does not', async () => {
      const user = await signedInUser(t);
      const factor = await enableTotp(t, user.jar);

      const byPassword = await pendingSignIn(t, user.email);
      await completeWithTotp(t, byPassword, factor.authenticator);
      expect(await storedStepUp(t, byPassword)).toEqual(clock());
      expect((await sessionOf(t, byPassword)).session.mfa).toBe(true);
      expect((await probe(t, byPassword)).status).toBe(200);

      const byLink = await magicLinkSignIn(t, user.email);
      expect(byLink.get(SESSION_COOKIE)).toBeUndefined();
      await completeWithTotp(t, byLink, factor.authenticator);
      expect((await sessionOf(t, byLink)).session.mfa).toBe(true);
      expect(await storedStepUp(t, byLink)).toBeNull();
      await expectStepUpRequired(await probe(t, byLink));

      // A backup code completing a password sign-in proves the same as a TOTP code.
      const byBackup = await pendingSignIn(t, user.email);
      await expectStatus(
        await call(t, '/api/auth/two-factor/verify-backup-code', {
          jar: byBackup,
          body: { code: factor.backupCodes[0] },
        }),
        200,
      );
      expect((await probe(t, byBackup)).status).toBe(200);
    });

    it('a two-factor account without a password: a magic link completed by its code is fresh', async () => {
      // Two-factor enabled on an account that has no password (as SSO or OAuth can leave one).
      const user = await signedInUser(t);
      const factor = await enableTotp(t, user.jar);
      await t.database.withOwner((owner) =>
        owner.deleteFrom('accounts').where('user_id', '=', user.id).where('provider_id', '=', 'credential').execute(),
      );
      const jar = await magicLinkSignIn(t, user.email);
      await completeWithTotp(t, jar, factor.authenticator);
      expect(await storedStepUp(t, jar)).toEqual(clock());
    });

    it('a pending sign-in proof is taken once: it never makes a second session fresh', async () => {
      const user = await signedInUser(t);
      const factor = await enableTotp(t, user.jar);
      const jar = await pendingSignIn(t, user.email);
      const proofs = await t.db
        .selectFrom('verifications')
        .select('identifier')
        .where('identifier', 'like', '2fa-proof-%')
        .where('value', '=', user.id)
        .execute();
      expect(proofs).toHaveLength(1);
      await completeWithTotp(t, jar, factor.authenticator);
      const left = await t.db
        .selectFrom('verifications')
        .select('identifier')
        .where('identifier', '=', proofs[0]!.identifier)
        .execute();
      expect(left).toEqual([]);
    });

    it('changing the password keeps the caller fresh only as fresh as it was', async () => {
      const user = await signedInUser(t);
      const before = await storedStepUp(t, user.jar);
      const changed = await call(t, '/api/auth/change-password', {
        jar: user.jar,
        body: { currentPassword: PASSWORD, newPassword: PASSWORD, revokeOtherSessions: true },
      });
      expect(changed.status, await changed.clone().text()).toBe(200);
      expect(await storedStepUp(t, user.jar)).toEqual(before);
    });
  });
});

describe('step-up rate limiting', () => {
  /** Accounts are made on an unlimited app over the same database; their cookies work on both. */
  let open: TestApp;
  let t: TestApp;
  beforeAll(async () => {
    open = await createTestApp();
    t = await createTestApp({
      database: open.database,
      env: { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_AUTH_LIMIT: '5', RATE_LIMIT_ACCOUNT_LIMIT: '3' },
    });
  });
  afterAll(async () => {
    await t?.close();
    await open?.close();
  });

  it('is in the auth tier: the 6th attempt from one address in the window is 429', async () => {
    const ip = nextIp();
    const users = [];
    for (let n = 0; n < 6; n++) users.push(await signedInUser(open));
    // Distinct users: neither the per-user budget nor an account's counter is reached.
    for (const user of users.slice(0, 5)) {
      await expectInvalidCredentials(await stepUp(t, user.jar, { password: 'not the password' }, ip));
    }
    await expectRateLimited(await stepUp(t, users[5]!.jar, { password: PASSWORD }, ip), 5);
  });

  it("wrong step-up passwords spend the account's sign-in failure budget; a success gives its attempt back", async () => {
    const user = await signedInUser(open);
    // A success spends nothing.
    await expectStatus(await stepUp(t, user.jar, { password: PASSWORD }, nextIp()), 200);
    for (let attempt = 0; attempt < 3; attempt++) {
      await expectInvalidCredentials(await stepUp(t, user.jar, { password: 'not the password' }, nextIp()));
    }
    // The account's budget (3) is spent: step-up and password sign-in alike, from any address.
    await expectRateLimited(await stepUp(t, user.jar, { password: PASSWORD }, nextIp()), 3);
    await expectRateLimited(
      await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, ip: nextIp() }),
      3,
    );
  });

  it("verify-password is no oracle for a stolen session: its refusals spend the account's budget too", async () => {
    const user = await signedInUser(open);
    const verify = (password: string) =>
      call(t, '/api/auth/verify-password', { body: { password }, jar: user.jar, ip: nextIp() });
    for (let attempt = 0; attempt < 3; attempt++) expect((await verify('not the password')).status).toBe(400);
    // The account's budget (3) is spent: verify-password and password sign-in alike, from any address.
    await expectRateLimited(await verify(PASSWORD), 3);
    await expectRateLimited(
      await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, ip: nextIp() }),
      3,
    );
  });
});
