import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectError, expectStatus, linkIn, mailsTo, PASSWORD, pathOf } from '../support/http.js';
import { completeWithTotp, enableTotp, freshCode, pendingSignIn, wrongCode } from '../support/mfa.js';
import { accountAuditRows } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * README "Multi-factor authentication": TOTP with backup codes through the
 * twoFactor plugin, the second factor on every sign-in path, multi-factor
 * sessions, and the audit entries of the changes.
 */

const COOKIE = 'gatehouse.session_token';
const CACHE = 'gatehouse.session_data';
const PENDING = 'gatehouse.two_factor';

interface EnrichedSession {
  user: { id: string; twoFactorEnabled: boolean };
  session: { id: string; mfa: boolean };
}

async function sessionOf(t: TestApp, jar: CookieJar): Promise<EnrichedSession | null> {
  return expectStatus<EnrichedSession | null>(await call(t, '/api/session', { jar }), 200);
}

/** The user's audit entries of one action (tenantless: they are about the account). */
async function userAudit(t: TestApp, userId: string, action: string) {
  return (await accountAuditRows(t, userId, action)).map(({ actor_id, tenant_id, metadata }) => ({
    actor_id,
    tenant_id,
    metadata,
  }));
}

const sessionRows = (t: TestApp, userId: string) =>
  t.database.withOwner((owner) =>
    owner.selectFrom('sessions').select(['id', 'mfa']).where('user_id', '=', userId).execute(),
  );

/** No cookie in the answer carries a session: the token and its cache are only ever expired. */
function expectNoSessionCookie(response: Response) {
  for (const header of response.headers.getSetCookie()) {
    const [pair = ''] = header.split(';');
    const [name = '', value = ''] = pair.split('=');
    if (name.endsWith(COOKIE) || name.includes(CACHE)) {
      expect(value, `${name} must not carry a value`).toBe('');
    }
  }
}

describe('multi-factor authentication: TOTP and backup codes', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { TOTP_ISSUER: 'Gatehouse Test' } });
  });
  afterAll(() => t?.close());

  it('enable answers a totpURI (RFC 6238, SHA-1, 6 digits, 30 s, TOTP_ISSUER) and ten backup codes; the first code completes it', async () => {
    const user = await signedInUser(t);
    const before = await sessionOf(t, user.jar);
    expect(before).toMatchObject({ user: { twoFactorEnabled: false }, session: { mfa: false } });

    const enable = await call(t, '/api/auth/two-factor/enable', { body: { password: PASSWORD }, jar: user.jar });
    const { totpURI, backupCodes } = await expectStatus<{ totpURI: string; backupCodes: string[] }>(enable, 200);
    const uri = new URL(totpURI);
    expect(uri.protocol).toBe('otpauth:');
    expect(uri.host).toBe('totp');
    expect(uri.searchParams.get('issuer')).toBe('Gatehouse Test');
    expect(decodeURIComponent(uri.pathname)).toBe(`/Gatehouse Test:${user.email}`);
    expect(uri.searchParams.get('digits') ?? '6').toBe('6');
    expect(uri.searchParams.get('period') ?? '30').toBe('30');
    expect(uri.searchParams.get('algorithm') ?? 'SHA1').toBe('SHA1');
    expect(backupCodes).toHaveLength(10);
    expect(new Set(backupCodes).size).toBe(10);

    // get-totp-uri names the same secret and issuer (the plugin's own default would be the app name).
    const again = await call(t, '/api/auth/two-factor/get-totp-uri', { body: { password: PASSWORD }, jar: user.jar });
    expect((await expectStatus<{ totpURI: string }>(again, 200)).totpURI).toBe(totpURI);

    // Not enabled until a code is verified.
    expect((await sessionOf(t, user.jar))?.user.twoFactorEnabled).toBe(false);
    const { authenticatorFor } = await import('../support/mfa.js');
    const authenticator = authenticatorFor(totpURI);
    await expectError(
      await call(t, '/api/auth/two-factor/verify-totp', { body: { code: wrongCode(authenticator) }, jar: user.jar }),
      401,
      'INVALID_CODE',
    );
    const verify = await call(t, '/api/auth/two-factor/verify-totp', {
      body: { code: await freshCode(authenticator) },
      jar: user.jar,
    });
    expect(verify.status).toBe(200);
    const after = await sessionOf(t, user.jar);
    // The session in which it was enabled is multi-factor now (the plugin replaces it: a new id).
    expect(after).toMatchObject({ user: { twoFactorEnabled: true }, session: { mfa: true } });
    expect(after!.session.id).not.toBe(before!.session.id);

    const audit = await userAudit(t, user.id, 'user.two_factor_enabled');
    expect(audit).toEqual([{ actor_id: user.id, tenant_id: null, metadata: { userId: user.id, method: 'totp' } }]);

    // Backup codes are never stored as they are.
    const stored = await t.database.withOwner((owner) =>
      owner
        .selectFrom('two_factors')
        .select(['backup_codes', 'secret'])
        .where('user_id', '=', user.id)
        .executeTakeFirstOrThrow(),
    );
    for (const code of backupCodes) expect(stored.backup_codes).not.toContain(code);
    expect(stored.secret).not.toContain(uri.searchParams.get('secret')!);
  });

  it('refuses what would weaken it: a client-chosen issuer or method, trusted devices', async () => {
    const user = await signedInUser(t);
    await expectError(
      await call(t, '/api/auth/two-factor/enable', { body: { password: PASSWORD, issuer: 'Evil' }, jar: user.jar }),
      400,
      'VALIDATION_ERROR',
    );
    const factor = await enableTotp(t, user.jar);
    const pending = await pendingSignIn(t, user.email);
    await expectError(
      await call(t, '/api/auth/two-factor/verify-totp', {
        body: { code: await freshCode(factor.authenticator), trustDevice: true },
        jar: pending,
      }),
      400,
      'VALIDATION_ERROR',
    );
    // Enabled already: verify-totp with a session is not a code oracle.
    await expectError(
      await call(t, '/api/auth/two-factor/verify-totp', { body: { code: '123456' }, jar: user.jar }),
      400,
      'TOTP_ALREADY_ENABLED',
    );
    // Wrong password.
    await expectStatus(
      await call(t, '/api/auth/two-factor/disable', { body: { password: 'not the password' }, jar: user.jar }),
      400,
    );
  });

  it('password sign-in answers { twoFactorRedirect: true } with no session cookie; a fresh code completes it, multi-factor', async () => {
    const user = await signedInUser(t);
    const factor = await enableTotp(t, user.jar);
    const jar = new CookieJar();
    const signIn = await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, jar });
    expect(await expectStatus(signIn, 200)).toMatchObject({ twoFactorRedirect: true });
    expectNoSessionCookie(signIn);
    expect(jar.names()).toEqual([PENDING]);
    expect(await sessionOf(t, jar)).toBeNull();

    await completeWithTotp(t, jar, factor.authenticator);
    expect(jar.get(COOKIE)).toBeDefined();
    expect(await sessionOf(t, jar)).toMatchObject({
      user: { id: user.id, twoFactorEnabled: true },
      session: { mfa: true },
    });
  });

  it('a code is accepted once: replayed in the same step, or raced by two sign-ins, only one succeeds', async () => {
    const user = await signedInUser(t);
    const factor = await enableTotp(t, user.jar);
    const code = await freshCode(factor.authenticator);
    const first = await pendingSignIn(t, user.email);
    expect((await call(t, '/api/auth/two-factor/verify-totp', { body: { code }, jar: first })).status).toBe(200);
    const second = await pendingSignIn(t, user.email);
    await expectError(
      await call(t, '/api/auth/two-factor/verify-totp', { body: { code }, jar: second }),
      401,
      'INVALID_CODE',
    );

    const racing = await freshCode(factor.authenticator);
    const [a, b] = [await pendingSignIn(t, user.email), await pendingSignIn(t, user.email)];
    const answers = await Promise.all(
      [a, b].map((jar) => call(t, '/api/auth/two-factor/verify-totp', { body: { code: racing }, jar })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
  });

  it('backup codes complete a sign-in once each; a stored hash is not a code; with a session they are refused', async () => {
    const user = await signedInUser(t);
    const factor = await enableTotp(t, user.jar);
    const code = factor.backupCodes[3]!;
    const jar = await pendingSignIn(t, user.email);
    expect((await call(t, '/api/auth/two-factor/verify-backup-code', { body: { code }, jar })).status).toBe(200);
    expect((await sessionOf(t, jar))?.session.mfa).toBe(true);

    const reuse = await pendingSignIn(t, user.email);
    await expectError(
      await call(t, '/api/auth/two-factor/verify-backup-code', { body: { code }, jar: reuse }),
      401,
      'INVALID_BACKUP_CODE',
    );
    const stored = await t.database.withOwner((owner) =>
      owner.selectFrom('two_factors').select('backup_codes').where('user_id', '=', user.id).executeTakeFirstOrThrow(),
    );
    const hashes = JSON.parse(stored.backup_codes) as string[];
    expect(hashes).toHaveLength(9);
    await expectError(
      await call(t, '/api/auth/two-factor/verify-backup-code', { body: { code: hashes[0] }, jar: reuse }),
      401,
      'INVALID_BACKUP_CODE',
    );
    await expectError(
      await call(t, '/api/auth/two-factor/verify-backup-code', {
        body: { code: factor.backupCodes[4] },
        jar: user.jar,
      }),
      400,
      'NO_PENDING_SIGN_IN',
    );

    // New codes replace the old ones.
    const regenerated = await call(t, '/api/auth/two-factor/generate-backup-codes', {
      body: { password: PASSWORD },
      jar: user.jar,
    });
    const { backupCodes } = await expectStatus<{ backupCodes: string[] }>(regenerated, 200);
    expect(backupCodes).toHaveLength(10);
    const stale = await pendingSignIn(t, user.email);
    await expectError(
      await call(t, '/api/auth/two-factor/verify-backup-code', { body: { code: factor.backupCodes[5] }, jar: stale }),
      401,
      'INVALID_BACKUP_CODE',
    );
    expect(
      (await call(t, '/api/auth/two-factor/verify-backup-code', { body: { code: backupCodes[0] }, jar: stale })).status,
    ).toBe(200);
  });

  it('disable (with the password) turns it off, audited; the next sign-in needs no second factor', async () => {
    const user = await signedInUser(t);
    await enableTotp(t, user.jar);
    const disable = await call(t, '/api/auth/two-factor/disable', { body: { password: PASSWORD }, jar: user.jar });
    expect(disable.status).toBe(200);
    expect((await sessionOf(t, user.jar))?.user.twoFactorEnabled).toBe(false);
    expect(await userAudit(t, user.id, 'user.two_factor_disabled')).toEqual([
      { actor_id: user.id, tenant_id: null, metadata: { userId: user.id } },
    ]);
    const jar = new CookieJar();
    const signIn = await call(t, '/api/auth/sign-in/email', { body: { email: user.email, password: PASSWORD }, jar });
    expect(await expectStatus(signIn, 200)).toMatchObject({ user: { id: user.id } });
    expect((await sessionOf(t, jar))?.session.mfa).toBe(false);
  });

  it('the account export lists the second factors by metadata only; the purge removes them', async () => {
    const user = await signedInUser(t);
    const factor = await enableTotp(t, user.jar);
    // A passkey as the plugin stores it (registering one needs an authenticator: the browser suite does that).
    const passkeyId = await t.database.withOwner(async (owner) => {
      const row = await owner
        .insertInto('passkeys')
        .values({
          user_id: user.id,
          name: 'Laptop',
          public_key: 'pAEDAzkBACBZAQDpublic-key-material',
          credential_id: `credential-${crypto.randomUUID()}`,
          counter: 0,
          device_type: 'multiDevice',
          backed_up: true,
          transports: 'internal,hybrid',
          aaguid: '00000000-0000-0000-0000-000000000000',
        })
        .returning(['id', 'credential_id'])
        .executeTakeFirstOrThrow();
      return row;
    });
    const response = await call(t, '/api/users/me/export', { jar: user.jar });
    const text = await response.clone().text();
    const data = await expectStatus<{ twoFactor: unknown; passkeys: unknown[] }>(response, 200);
    expect(data.twoFactor).toEqual({ enabled: true, createdAt: expect.any(String), backupCodesRemaining: 10 });
    expect(data.passkeys).toEqual([
      {
        id: passkeyId.id,
        name: 'Laptop',
        deviceType: 'multiDevice',
        backedUp: true,
        transports: ['internal', 'hybrid'],
        aaguid: '00000000-0000-0000-0000-000000000000',
        createdAt: expect.any(String),
      },
    ]);
    const secret = new URL(factor.totpURI).searchParams.get('secret')!;
    for (const forbidden of [secret, ...factor.backupCodes, 'public-key-material', passkeyId.credential_id, 'h1:'])
      expect(text).not.toContain(forbidden);

    expect((await call(t, '/api/users/me/deletion', { method: 'POST', jar: user.jar })).status).toBe(202);
    const purge = await call(t, '/api/users/me/purge', { body: { confirmEmail: user.email }, jar: user.jar });
    expect(purge.status).toBe(200);
    const left = await t.database.withOwner(async (owner) => ({
      twoFactors: await owner.selectFrom('two_factors').select('id').where('user_id', '=', user.id).execute(),
      passkeys: await owner.selectFrom('passkeys').select('id').where('user_id', '=', user.id).execute(),
    }));
    expect(left).toEqual({ twoFactors: [], passkeys: [] });
  });

  describe('magic link: the session is held back until the second factor', () => {
    let user: Awaited<ReturnType<typeof signedInUser>>;
    let factor: Awaited<ReturnType<typeof enableTotp>>;
    beforeAll(async () => {
      user = await signedInUser(t);
      factor = await enableTotp(t, user.jar);
    });

    async function followLink(options: { withoutCallback?: boolean } = {}) {
      expect(
        (await call(t, '/api/auth/sign-in/magic-link', { body: { email: user.email, callbackURL: '/app' } })).status,
      ).toBe(200);
      const link = new URL(linkIn(mailsTo(t, user.email).at(-1)!.text));
      if (options.withoutCallback) link.searchParams.delete('callbackURL');
      const jar = new CookieJar();
      const sessionsBefore = (await sessionRows(t, user.id)).length;
      const response = await call(t, pathOf(link.toString()), { jar });
      expectNoSessionCookie(response);
      expect(jar.names()).toEqual([PENDING]);
      expect((await sessionRows(t, user.id)).length).toBe(sessionsBefore);
      return { response, jar };
    }

    it('a redirect keeps its target, told ?twoFactorRedirect=true', async () => {
      const { response } = await followLink();
      expect(response.status).toBe(302);
      const location = new URL(response.headers.get('location')!, 'http://x');
      expect(location.pathname).toBe('/app');
      expect(location.searchParams.get('twoFactorRedirect')).toBe('true');
    });

    it('a JSON answer is { twoFactorRedirect: true }', async () => {
      const { response } = await followLink({ withoutCallback: true });
      expect(await expectStatus(response, 200)).toMatchObject({ twoFactorRedirect: true });
    });

    it("no route, the library's included, takes the pending cookie as a session; verify-totp completes it", async () => {
      const { jar } = await followLink();
      expect(await sessionOf(t, jar)).toBeNull();
      expect((await call(t, '/api/users/me', { jar })).status).toBe(401);
      for (const route of LIBRARY_ROUTES) {
        if (route.access.kind !== 'session' || route.path.includes(':')) continue;
        const response = await call(t, `/api/auth${route.path}`, {
          method: route.method,
          body: route.method === 'POST' ? {} : undefined,
          jar,
        });
        expect([400, 401], `${route.method} ${route.path}`).toContain(response.status);
        if (response.status === 400) expect((await response.json()).code).toBe('VALIDATION_ERROR');
      }
      const getSession = await call(t, '/api/auth/get-session', { jar });
      expect(await getSession.json()).toBeNull();

      await completeWithTotp(t, jar, factor.authenticator);
      expect(await sessionOf(t, jar)).toMatchObject({ user: { id: user.id }, session: { mfa: true } });
    });
  });
});
