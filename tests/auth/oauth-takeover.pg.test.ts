import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectError, expectStatus, linkIn, mailsTo, PASSWORD, pathOf } from '../support/http.js';
import {
  completeOAuth,
  nextProviderId,
  OAUTH_ENV,
  type ProviderIdentity,
  type ProviderStub,
  redirectOf,
  stubProviders,
} from '../support/oauth-providers.js';
import { accountAuditRows } from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';

/**
 * README "Sign-in with Google and GitHub", docs/security.md "Account linking":
 * the pre-account takeover. An attacker signs in with a GitHub account whose
 * address is the victim's, unverified at GitHub, before the victim has an
 * account. GitHub and Google are answered by a stub of their endpoints; the
 * library, the service and the database are real.
 */
describe('OAuth sign-in with an address the provider did not verify', () => {
  let t: TestApp;
  let stub: ProviderStub;
  const githubOf = (email: string, verified: boolean): ProviderIdentity => ({
    provider: 'github',
    id: nextProviderId(),
    email,
    verified,
  });

  beforeAll(async () => {
    stub = stubProviders();
    t = await createTestApp({ env: OAUTH_ENV });
  });
  afterAll(async () => {
    stub?.restore();
    await t?.close();
  });

  const userRow = (email: string) =>
    t.database.withOwner((owner) =>
      owner.selectFrom('users').select(['id', 'email_verified']).where('email', '=', email).executeTakeFirst(),
    );
  const linksOf = (accountId: string) =>
    t.database.withOwner((owner) =>
      owner.selectFrom('accounts').select(['user_id']).where('account_id', '=', accountId).execute(),
    );
  const sessionsOf = (userId: string) =>
    t.database.withOwner((owner) => owner.selectFrom('sessions').select('id').where('user_id', '=', userId).execute());
  const signedInAs = async (jar: CookieJar) =>
    ((await expectStatus(await call(t, '/api/session', { jar }), 200)) as { user: { id: string } } | null)?.user.id ??
    null;

  /** The attacker's attempt: refused, and nothing left behind. */
  async function attackerRefused(attacker: ProviderIdentity, victimEmail: string) {
    const jar = new CookieJar();
    const answer = await completeOAuth(t, attacker, stub, { jar });
    const { url, error } = redirectOf(answer);
    expect(error).toBe('email_not_verified');
    // No errorCallbackURL was named: the app, never the library's error page.
    expect(`${url.origin}${url.pathname}`).toBe(new URL(t.config.auth.appUrl).href);
    expect(jar.names().some((name) => name.includes('session_token'))).toBe(false);
    expect(await signedInAs(jar)).toBeNull();
    expect(await linksOf(attacker.id)).toEqual([]);
    return { victim: await userRow(victimEmail), jar };
  }

  it('creates no account, no session and no link, sends no mail, and redirects with ?error=email_not_verified', async () => {
    const victim = uniqueEmail('victim');
    const { victim: row } = await attackerRefused(githubOf(victim, false), victim);
    expect(row).toBeUndefined();
    expect(mailsTo(t, victim)).toEqual([]);
  });

  it('redirects to the errorCallbackURL the sign-in named', async () => {
    const answer = await completeOAuth(t, githubOf(uniqueEmail('victim'), false), stub, {
      jar: new CookieJar(),
      errorCallbackURL: '/sign-in/failed',
    });
    const { url, error } = redirectOf(answer);
    expect(url.pathname).toBe('/sign-in/failed');
    expect(error).toBe('email_not_verified');
  });

  it('variant 1: the victim signs up and follows the verification link; the attacker’s GitHub still gets nothing', async () => {
    const victim = uniqueEmail('victim');
    const attacker = githubOf(victim, false);
    await attackerRefused(attacker, victim);

    expect(
      (await call(t, '/api/auth/sign-up/email', { body: { email: victim, password: PASSWORD, name: 'V' } })).status,
    ).toBe(200);
    const [mail] = mailsTo(t, victim);
    expect(mail?.subject).toBe('Verify your email address');
    const victimJar = new CookieJar();
    expect([200, 302]).toContain((await call(t, pathOf(linkIn(mail!.text)), { jar: victimJar })).status);
    const row = await userRow(victim);
    expect(row?.email_verified).toBe(true);
    expect(await signedInAs(victimJar)).toBe(row!.id);

    // Again, after the victim's account exists: refused, no link, no session.
    await attackerRefused(attacker, victim);
    expect(await sessionsOf(row!.id)).toHaveLength(1);
  });

  it('variant 2: sign-up, password reset, then the verification link; the attacker’s GitHub still gets nothing', async () => {
    const victim = uniqueEmail('victim');
    const attacker = githubOf(victim, false);
    await attackerRefused(attacker, victim);

    await call(t, '/api/auth/sign-up/email', { body: { email: victim, password: PASSWORD, name: 'V' } });
    expect(mailsTo(t, victim).map((m) => m.subject)).toEqual(['Verify your email address']);
    expect(
      (await call(t, '/api/auth/request-password-reset', { body: { email: victim, redirectTo: '/reset' } })).status,
    ).toBe(200);
    const reset = mailsTo(t, victim).find((m) => m.subject === 'Reset your password')!;
    const token = new URL(linkIn(reset.text)).pathname.split('/').at(-1)!;
    await expectStatus(
      await call(t, '/api/auth/reset-password', { body: { newPassword: `${PASSWORD}!`, token } }),
      200,
    );
    // The reset link was read at the address: it is verified, and the new password signs in.
    expect((await userRow(victim))?.email_verified).toBe(true);
    const signIn = await call(t, '/api/auth/sign-in/email', {
      body: { email: victim, password: `${PASSWORD}!` },
      jar: new CookieJar(),
    });
    expect(signIn.status).toBe(200);
    const verify = mailsTo(t, victim).find((m) => m.subject === 'Verify your email address')!;
    expect([200, 302]).toContain((await call(t, pathOf(linkIn(verify.text)))).status);

    const { victim: row } = await attackerRefused(attacker, victim);
    expect(row?.email_verified).toBe(true);
  });

  it('a verified account is never reached by an unverified provider address, nor told of it', async () => {
    const owner = await signedInUser(t);
    const before = mailsTo(t, owner.email).length;
    await attackerRefused(githubOf(owner.email, false), owner.email);
    expect(await sessionsOf(owner.id)).toHaveLength(1);
    expect(mailsTo(t, owner.email)).toHaveLength(before);
    const links = await t.database.withOwner((o) =>
      o.selectFrom('accounts').select('provider_id').where('user_id', '=', owner.id).execute(),
    );
    expect(links.map((l) => l.provider_id)).toEqual(['credential']);
  });

  describe('a provider-verified address in another case, or another spelling', () => {
    it('matches in the canonical form: ASCII letters fold, so KATE@ is kate@', async () => {
      const owner = await signedInUser(t);
      const jar = new CookieJar();
      const answer = await completeOAuth(t, githubOf(owner.email.toUpperCase(), true), stub, { jar });
      expect(redirectOf(answer).error).toBeNull();
      expect(await signedInAs(jar)).toBe(owner.id);
    });

    it('never matches through a non-ASCII letter: \\u212Aate@ (KELVIN SIGN) is not kate@', async () => {
      const kate = await signedInUser(t, { email: uniqueEmail('kate') });
      const kelvin = `\u212A${kate.email.slice(1)}`;
      expect(kelvin.toLowerCase()).toBe(kate.email); // what full Unicode case folding would do
      const before = mailsTo(t, kate.email).length;
      const identity = githubOf(kelvin, true);
      const jar = new CookieJar();
      const answer = await completeOAuth(t, identity, stub, { jar });
      expect(redirectOf(answer).error).toBe('email_not_verified');
      expect(await signedInAs(jar)).toBeNull();
      expect(await linksOf(identity.id)).toEqual([]);
      expect(await sessionsOf(kate.id)).toHaveLength(1);
      expect(mailsTo(t, kate.email)).toHaveLength(before);
      expect(await accountAuditRows(t, kate.id, 'user.account_linked')).toEqual([]);
    });

    it('the same address is refused at sign-up, password sign-in, magic link and reset (the library would fold it)', async () => {
      const kate = await signedInUser(t, { email: uniqueEmail('kate') });
      const kelvin = `\u212A${kate.email.slice(1)}`;
      for (const [path, body] of [
        ['/api/auth/sign-up/email', { email: kelvin, password: PASSWORD, name: 'K' }],
        ['/api/auth/sign-in/email', { email: kelvin, password: PASSWORD }],
        ['/api/auth/sign-in/magic-link', { email: kelvin }],
        ['/api/auth/request-password-reset', { email: kelvin }],
        ['/api/auth/send-verification-email', { email: kelvin }],
      ] as const) {
        const body400 = await expectError(await call(t, path, { body }), 400, 'VALIDATION_ERROR');
        expect(body400.details?.[0]?.path, path).toBe('body.email');
      }
      expect(mailsTo(t, kelvin)).toEqual([]);
    });

    it('an address is trimmed and its ASCII letters lower-cased before the library sees it', async () => {
      const owner = await signedInUser(t);
      const res = await call(t, '/api/auth/sign-in/email', {
        body: { email: `  ${owner.email.toUpperCase()} `, password: PASSWORD },
        jar: new CookieJar(),
      });
      expect(res.status).toBe(200);
    });
  });
});
