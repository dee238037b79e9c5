import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inertText } from '../../src/auth/email-templates.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectError, expectStatus, mailsTo } from '../support/http.js';
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
 * a provider identity joins an existing account only from an address the
 * provider asserts as verified, and never silently: the owner is mailed a
 * notice naming the provider (with the client's address and user agent),
 * the link is audited `user.account_linked`, and the entry is in the
 * account's export. GitHub and Google are answered by a stub of their endpoints.
 */
describe('linking a provider identity to an existing account', () => {
  let t: TestApp;
  let stub: ProviderStub;
  const IP = '198.51.100.23';
  const UA = 'LinkTester/2.0 (X11; Linux x86_64)';

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
  // As the account's export reads them (row-level security binds the owner too, on PostgreSQL).
  const linkAudits = (userId: string) => accountAuditRows(t, userId, 'user.account_linked');
  const linkNotices = (email: string) =>
    mailsTo(t, email).filter((m) => / was linked to your account$/.test(m.subject));

  it('an implicit link (the provider verified the account’s address) is mailed, audited and exported; the next sign-in is not a link', async () => {
    const owner = await signedInUser(t);
    const github: ProviderIdentity = {
      provider: 'github',
      id: nextProviderId(),
      email: owner.email.toUpperCase(),
      verified: true,
    };
    const jar = new CookieJar();
    const answer = await completeOAuth(t, github, stub, { jar, ip: IP, userAgent: UA });
    expect(redirectOf(answer).error).toBeNull();
    expect(await signedInAs(jar)).toBe(owner.id);

    const [notice, ...more] = linkNotices(owner.email);
    expect(more).toEqual([]);
    expect(notice?.subject).toBe('GitHub was linked to your account');
    expect(notice?.text).toContain('A GitHub account was linked to your account');
    expect(notice?.text).toContain(`From address: ${IP}`);
    // The user agent is the client's words: shown as inert text (no line of its own, nothing a mail client links).
    expect(notice?.text).toContain(`Device (user agent): ${inertText(UA)}`);
    expect(notice?.text).toMatch(/When: \d{4}-\d\d-\d\dT/);
    expect(notice?.text).toContain('unlink GitHub');

    const audits = await linkAudits(owner.id);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({
      tenant_id: null,
      metadata: { userId: owner.id, providerId: 'github', providerAccountId: github.id },
    });
    const exported = await expectStatus<{ auditEntries: { action: string; metadata: Record<string, unknown> }[] }>(
      await call(t, '/api/users/me/export', { jar: owner.jar }),
      200,
    );
    expect(exported.auditEntries).toContainEqual(
      expect.objectContaining({
        action: 'user.account_linked',
        metadata: expect.objectContaining({ providerId: 'github' }),
      }),
    );

    // Signing in again through the same identity links nothing new.
    const again = new CookieJar();
    expect(redirectOf(await completeOAuth(t, github, stub, { jar: again })).error).toBeNull();
    expect(await signedInAs(again)).toBe(owner.id);
    expect(linkNotices(owner.email)).toHaveLength(1);
    expect(await linkAudits(owner.id)).toHaveLength(1);
  });

  it('Google: the notice names Google', async () => {
    const owner = await signedInUser(t);
    const jar = new CookieJar();
    const google: ProviderIdentity = {
      provider: 'google',
      id: `g-${nextProviderId()}`,
      email: owner.email,
      verified: true,
    };
    expect(redirectOf(await completeOAuth(t, google, stub, { jar, ip: IP, userAgent: UA })).error).toBeNull();
    expect(await signedInAs(jar)).toBe(owner.id);
    expect(linkNotices(owner.email).map((m) => m.subject)).toEqual(['Google was linked to your account']);
    expect((await linkAudits(owner.id)).map((a) => (a.metadata as { providerId: string }).providerId)).toEqual([
      'google',
    ]);
  });

  it('Google with email_verified false reaches nobody', async () => {
    const owner = await signedInUser(t);
    const jar = new CookieJar();
    const google: ProviderIdentity = {
      provider: 'google',
      id: `g-${nextProviderId()}`,
      email: owner.email,
      verified: false,
    };
    expect(redirectOf(await completeOAuth(t, google, stub, { jar })).error).toBe('email_not_verified');
    expect(await signedInAs(jar)).toBeNull();
    expect(linkNotices(owner.email)).toEqual([]);
    expect(await linkAudits(owner.id)).toEqual([]);
  });

  it('a sign-up through a provider is no link: no notice, no audit', async () => {
    const email = uniqueEmail('newcomer');
    const jar = new CookieJar();
    expect(
      redirectOf(
        await completeOAuth(t, { provider: 'github', id: nextProviderId(), email, verified: true }, stub, { jar }),
      ).error,
    ).toBeNull();
    const userId = await signedInAs(jar);
    expect(userId).not.toBeNull();
    const user = await t.database.withOwner((o) =>
      o.selectFrom('users').select(['email', 'email_verified']).where('id', '=', userId!).executeTakeFirstOrThrow(),
    );
    expect(user).toEqual({ email, email_verified: true });
    expect(linkNotices(email)).toEqual([]);
    expect(await linkAudits(userId!)).toEqual([]);
  });

  it('an account whose own address is unverified is not joined, even by a provider-verified address', async () => {
    const email = uniqueEmail('unverified');
    const userId = await t.database.withOwner(async (o) => {
      const user = await o
        .insertInto('users')
        .values({ name: 'Pending', email, email_verified: false })
        .returning('id')
        .executeTakeFirstOrThrow();
      return user.id as string;
    });
    const github: ProviderIdentity = { provider: 'github', id: nextProviderId(), email, verified: true };
    const jar = new CookieJar();
    expect(redirectOf(await completeOAuth(t, github, stub, { jar })).error).toBe('account_not_linked');
    expect(await signedInAs(jar)).toBeNull();
    expect(await linkAudits(userId)).toEqual([]);
  });

  describe('/link-social from a signed-in session', () => {
    it('links a provider-verified identity of the same address: mailed and audited', async () => {
      const owner = await signedInUser(t);
      const github: ProviderIdentity = { provider: 'github', id: nextProviderId(), email: owner.email, verified: true };
      const answer = await completeOAuth(t, github, stub, { jar: owner.jar, link: true, ip: IP, userAgent: UA });
      const { url, error } = redirectOf(answer);
      expect(error).toBeNull();
      expect(url.pathname).toBe('/app');
      const [notice] = linkNotices(owner.email);
      expect(notice?.subject).toBe('GitHub was linked to your account');
      expect(notice?.text).toContain(IP);
      expect(notice?.text).toContain(inertText(UA));
      expect(await linkAudits(owner.id)).toHaveLength(1);
      const accounts = await expectStatus<{ providerId: string }[]>(
        await call(t, '/api/auth/list-accounts', { jar: owner.jar }),
        200,
      );
      expect(accounts.map((a) => a.providerId).sort()).toEqual(['credential', 'github']);
    });

    it('refuses an identity whose address the provider did not verify', async () => {
      const owner = await signedInUser(t);
      const github: ProviderIdentity = {
        provider: 'github',
        id: nextProviderId(),
        email: owner.email,
        verified: false,
      };
      const answer = await completeOAuth(t, github, stub, { jar: owner.jar, link: true });
      expect(redirectOf(answer).error).toBe('email_not_verified');
      expect(linkNotices(owner.email)).toEqual([]);
      expect(await linkAudits(owner.id)).toEqual([]);
    });

    it('refuses an ID token (that library path links without the address check)', async () => {
      const owner = await signedInUser(t);
      await expectError(
        await call(t, '/api/auth/link-social', {
          body: { provider: 'google', idToken: { token: 'header.payload.signature' } },
          jar: owner.jar,
        }),
        400,
        'ID_TOKEN_LINKING_DISABLED',
      );
    });
  });
});
