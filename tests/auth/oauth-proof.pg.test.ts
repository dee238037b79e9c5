import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus, linkIn, mailsTo, PASSWORD, pathOf } from '../support/http.js';
import {
  completeOAuth,
  nextProviderId,
  OAUTH_ENV,
  type ProviderIdentity,
  type ProviderStub,
  redirectOf,
  stubProviders,
} from '../support/oauth-providers.js';
import { uniqueEmail } from '../support/users.js';

/**
 * docs/security.md "Account linking": when an address becomes verified by
 * any path, every provider link and every session the unverified account had
 * before the proof is removed. The state proven away is the one the
 * pre-account takeover left (an unverified account holding the attacker's
 * GitHub link and the attacker's live session), written as it stood, since
 * an OAuth sign-in can no longer create it.
 */
describe('proving an address strips what the unverified account held', () => {
  let t: TestApp;
  let stub: ProviderStub;

  beforeAll(async () => {
    stub = stubProviders();
    t = await createTestApp({ env: OAUTH_ENV });
  });
  afterAll(async () => {
    stub?.restore();
    await t?.close();
  });

  const signedInAs = async (jar: CookieJar) =>
    ((await expectStatus(await call(t, '/api/session', { jar }), 200)) as { user: { id: string } } | null)?.user.id ??
    null;

  /**
   * The victim's address held by an unverified account, with the attacker's
   * GitHub linked and signed in through it (GitHub now shows the attacker's
   * own verified address, so the sign-in goes by the link alone).
   */
  async function takenOver() {
    const email = uniqueEmail('victim');
    const githubId = nextProviderId();
    const userId = await t.database.withOwner(async (owner) => {
      const user = await owner
        .insertInto('users')
        .values({ name: 'Attacker', email, email_verified: false })
        .returning('id')
        .executeTakeFirstOrThrow();
      await owner
        .insertInto('accounts')
        .values({ user_id: user.id, account_id: githubId, provider_id: 'github' })
        .execute();
      return user.id as string;
    });
    const attacker: ProviderIdentity = {
      provider: 'github',
      id: githubId,
      email: uniqueEmail('attacker'),
      verified: true,
    };
    const attackerJar = new CookieJar();
    expect(redirectOf(await completeOAuth(t, attacker, stub, { jar: attackerJar })).error).toBeNull();
    expect(await signedInAs(attackerJar)).toBe(userId);
    // Signed in, the attacker added a passkey and turned two-factor on.
    await t.database.withOwner(async (o) => {
      await o
        .insertInto('passkeys')
        .values({
          user_id: userId,
          name: 'Attacker key',
          public_key: 'cHVibGlj',
          credential_id: `credential-${crypto.randomUUID()}`,
          counter: 0,
          device_type: 'singleDevice',
          backed_up: false,
        })
        .execute();
      await o
        .insertInto('two_factors')
        .values({ user_id: userId, secret: 'sealed', backup_codes: '[]', verified: true })
        .execute();
      await o.updateTable('users').set({ two_factor_enabled: true }).where('id', '=', userId).execute();
    });
    return { email, userId, githubId, attacker, attackerJar };
  }

  const mailed = (email: string, subject: string) => {
    const mail = mailsTo(t, email).findLast((m) => m.subject === subject);
    if (!mail) throw new Error(`no "${subject}" mail to ${email}`);
    return linkIn(mail.text);
  };

  /** Each path by which the victim proves the address (and ends up signed in, or able to sign in). */
  const PROOF_PATHS: [string, (email: string) => Promise<void>][] = [
    [
      'verification link',
      async (email) => {
        expect((await call(t, '/api/auth/send-verification-email', { body: { email } })).status).toBe(200);
        const verify = await call(t, pathOf(mailed(email, 'Verify your email address')), { jar: new CookieJar() });
        expect([200, 302]).toContain(verify.status);
      },
    ],
    [
      'password reset',
      async (email) => {
        expect(
          (await call(t, '/api/auth/request-password-reset', { body: { email, redirectTo: '/reset' } })).status,
        ).toBe(200);
        const token = new URL(mailed(email, 'Reset your password')).pathname.split('/').at(-1)!;
        await expectStatus(await call(t, '/api/auth/reset-password', { body: { newPassword: PASSWORD, token } }), 200);
      },
    ],
    [
      'magic link',
      async (email) => {
        expect((await call(t, '/api/auth/sign-in/magic-link', { body: { email } })).status).toBe(200);
        expect((await call(t, pathOf(mailed(email, 'Your sign-in link')), { jar: new CookieJar() })).status).toBe(302);
      },
    ],
  ];

  it.each(PROOF_PATHS)(
    '%s: the attacker’s link, session, passkey and second factor are gone; the GitHub account reaches it no more',
    async (_, prove) => {
      const { email, userId, githubId, attacker, attackerJar } = await takenOver();
      const attackerSession = await t.database.withOwner((o) =>
        o.selectFrom('sessions').select('id').where('user_id', '=', userId).executeTakeFirstOrThrow(),
      );

      await prove(email);

      const state = await t.database.withOwner(async (o) => ({
        user: await o
          .selectFrom('users')
          .select(['email_verified', 'two_factor_enabled'])
          .where('id', '=', userId)
          .executeTakeFirstOrThrow(),
        passkeys: await o.selectFrom('passkeys').select('id').where('user_id', '=', userId).execute(),
        twoFactors: await o.selectFrom('two_factors').select('id').where('user_id', '=', userId).execute(),
        links: await o.selectFrom('accounts').select('provider_id').where('user_id', '=', userId).execute(),
        attackerSession: await o
          .selectFrom('sessions')
          .select('id')
          .where('id', '=', attackerSession.id)
          .executeTakeFirst(),
      }));
      expect(state.user).toEqual({ email_verified: true, two_factor_enabled: false });
      expect(state.passkeys).toEqual([]);
      expect(state.twoFactors).toEqual([]);
      expect(state.links.map((l) => l.provider_id)).not.toContain('github');
      // Deleted rows: the session resolver reads them on every request, on every instance.
      expect(state.attackerSession).toBeUndefined();
      expect(await signedInAs(attackerJar)).toBeNull();
      expect((await call(t, '/api/users/me', { jar: attackerJar })).status).toBe(401);

      // The attacker's GitHub: with the victim's address unverified, refused;
      // with the attacker's own, it is someone else's account, not the victim's.
      const refused = await completeOAuth(t, { ...attacker, email, verified: false }, stub, { jar: new CookieJar() });
      expect(redirectOf(refused).error).toBe('email_not_verified');
      const elsewhere = new CookieJar();
      await completeOAuth(t, attacker, stub, { jar: elsewhere });
      expect(await signedInAs(elsewhere)).not.toBe(userId);
      const github = await t.database.withOwner((o) =>
        o.selectFrom('accounts').select('user_id').where('account_id', '=', githubId).execute(),
      );
      expect(github.map((a) => a.user_id)).not.toContain(userId);
    },
  );

  it('a verified account keeps its links and sessions when a verification link is followed again', async () => {
    const { email, userId, attacker } = await takenOver();
    await PROOF_PATHS[0]![1](email);
    // The owner, now verified, links GitHub (a provider-verified address equal to the account's) and signs in.
    const ownerJar = new CookieJar();
    const owned: ProviderIdentity = { ...attacker, id: nextProviderId(), email, verified: true };
    expect(redirectOf(await completeOAuth(t, owned, stub, { jar: ownerJar })).error).toBeNull();
    expect(await signedInAs(ownerJar)).toBe(userId);
    const link = mailsTo(t, email).findLast((m) => m.subject === 'Verify your email address')!;
    await call(t, pathOf(linkIn(link.text)), { jar: new CookieJar() });
    expect(await signedInAs(ownerJar)).toBe(userId);
  });
});
