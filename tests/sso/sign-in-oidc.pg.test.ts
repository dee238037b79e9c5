import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeTxtResolver } from '../../src/platform/dns-txt.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { CookieJar, call, expectError, expectStatus, pathOf } from '../support/http.js';
import { completeWithTotp, enableTotp, freshCode } from '../support/mfa.js';
import { createOidcProvider, type OidcTestProvider } from '../support/oidc-provider.js';
import {
  accountAuditRows,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  roleBySlug,
  type TestOrganization,
  uniqueSlug,
} from '../support/orgs.js';
import { claimDomain, errorOf, sessionOf as sessionAnswer, userRow as storedUser } from '../support/sso.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/sso.md "Sign-in" over OpenID Connect, end to end: the service's
 * routes, the auth library, a real database and a certified OpenID Provider
 * (panva's oidc-provider) on loopback, whose login form the test fills as a
 * browser would. Connections and domains are set up through their routes
 * (the issuer discovered, the domain proved by a TXT record on a loopback
 * DNS server).
 */

describe('single sign-on over OIDC', () => {
  let t: TestApp;
  let idp: OidcTestProvider;
  const accounts: Record<string, Record<string, unknown>> = {};
  let org: TestOrganization;
  let domain: string;
  let connectionId: string;
  let dns: TestDnsServer;

  /** A person at the IdP: `sub` is their login. */
  function person(label: string, claims: Record<string, unknown> = {}, at = domain) {
    const sub = `${label}-${crypto.randomUUID().slice(0, 8)}`;
    accounts[sub] = { email: `${sub}@${at}`, email_verified: true, name: `Person ${label}`, ...claims };
    return { sub, email: `${sub}@${at}` };
  }

  /** A connection through POST /api/sso/connections (the issuer discovered), its client registered at the IdP. */
  async function insertConnection(
    organization: TestOrganization,
    options: { mfaAtIdp?: boolean; roleMappings?: unknown[]; defaultRoleId?: string } = {},
  ): Promise<string> {
    const clientSecret = `secret-${crypto.randomUUID()}`;
    const clientId = `client-${crypto.randomUUID()}`;
    const body = {
      type: 'oidc',
      name: 'Test OIDC',
      issuer: idp.issuer,
      clientId,
      clientSecret,
      scopes: ['openid', 'email', 'profile', 'groups'],
      ...options,
    };
    const created = await call(t, '/api/sso/connections', { body, jar: organization.owner.jar });
    const { id, sp } = await expectStatus<{ id: string; sp: { redirectUri: string } }>(created, 201);
    expect(sp.redirectUri).toBe(`${t.config.auth.url}/api/auth/sso/callback/${id}`);
    idp.addClient({ client_id: clientId, client_secret: clientSecret, redirect_uris: [sp.redirectUri] });
    return id;
  }

  /** A domain claimed through POST /api/sso/domains and, unless told otherwise, verified by its TXT record. */
  const verifyDomain = (organization: TestOrganization, name: string, verified = true) =>
    claimDomain(t, dns, organization, name, verified);

  async function setEnabled(organization: TestOrganization, id: string, enabled: boolean) {
    const patched = await call(t, `/api/sso/connections/${id}`, {
      method: 'PATCH',
      body: { enabled },
      jar: organization.owner.jar,
    });
    await expectStatus(patched, 200);
  }

  /** POST /sign-in/sso, then the IdP's login: the callback URL the IdP sends the browser to. */
  async function startAndLogin(sub: string, body: Record<string, unknown>, jar = new CookieJar()) {
    const { url } = await expectStatus<{ url: string }>(await call(t, '/api/auth/sign-in/sso', { body, jar }), 200);
    return { url, callback: await idp.signIn(url, { sub }), jar };
  }

  /** The whole sign-in; the callback's answer and the browser's jar. */
  async function signIn(who: { sub: string; email: string }, extra: Record<string, unknown> = {}) {
    const { callback, jar } = await startAndLogin(who.sub, { email: who.email, callbackURL: '/app', ...extra });
    const response = await call(t, pathOf(callback), { jar });
    return { response, jar, location: response.headers.get('location') ?? '' };
  }

  const stepUpAt = async (sessionId: string) =>
    (
      await t.database.withOwner((owner) =>
        owner.selectFrom('sessions').select('step_up_at').where('id', '=', sessionId).executeTakeFirstOrThrow(),
      )
    ).step_up_at;
  const sessionOf = (jar: CookieJar) => sessionAnswer(t, jar);
  const userRow = (email: string) => storedUser(t, email);
  const accountsOf = (userId: string) =>
    t.database.withOwner((owner) =>
      owner
        .selectFrom('accounts')
        .select(['provider_id', 'account_id', 'password'])
        .where('user_id', '=', userId)
        .execute(),
    );
  const memberRole = (tenantId: string, userId: string) =>
    t.database.withOwner(async (owner) => {
      const row = await owner
        .selectFrom('members')
        .select(['role_id', 'role'])
        .where('organization_id', '=', tenantId)
        .where('user_id', '=', userId)
        .executeTakeFirst();
      return row;
    });

  beforeAll(async () => {
    idp = await createOidcProvider({ accounts });
    dns = await startDnsServer();
    const resolveTxt = createNodeTxtResolver([dns.address], { timeoutMs: 500, tries: 1 });
    t = await createTestApp({ env: { SSO_ALLOW_PRIVATE_URLS: 'true' }, resolveTxt });
    domain = `${uniqueSlug('acme')}.test`;
    const owner = await signedInUser(t, { email: `owner@${domain}` });
    org = await createOrganization(t, owner);
    await verifyDomain(org, domain);
    connectionId = await insertConnection(org);
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
    await dns?.close();
  });

  it('a new person: account created (address verified, no password), joined as Member, signed in to the organization', async () => {
    const who = person('new');
    const { response, jar, location } = await signIn(who);
    expect(response.status).toBe(302);
    expect(location).toBe('/app');
    const session = await sessionOf(jar);
    expect(session?.user.email).toBe(who.email);
    expect(session?.session.activeOrganizationId).toBe(org.id);
    // An account with no password or second factor: the sign-in proved all it has.
    expect(session?.session.mfa).toBe(false);
    expect(Date.parse(session!.session.stepUpUntil)).toBeGreaterThan(t.clock().getTime());
    const user = await userRow(who.email);
    expect(user).toMatchObject({ email_verified: true, name: 'Person new', role: 'user' });
    expect(await accountsOf(user!.id)).toEqual([
      { provider_id: `sso:${connectionId}`, account_id: who.sub, password: null },
    ]);
    const member = await roleBySlug(t, org.owner, 'member');
    expect((await memberRole(org.id, user!.id))?.role_id).toBe(member.id);
    const added = (await auditRows(t, org.id, 'member.added')).filter((row) => row.metadata.userId === user!.id);
    expect(added).toHaveLength(1);
    expect(added[0]!.metadata).toMatchObject({ via: 'sso', roleId: member.id, roleSlug: 'member', connectionId });
    const stored = await t.database.withOwner((owner) =>
      owner
        .selectFrom('sessions')
        .select(['sso_connection_id'])
        .where('id', '=', session!.session.id)
        .executeTakeFirst(),
    );
    expect(stored?.sso_connection_id).toBe(connectionId);
    // The OIDC request named the address the person typed.
  });

  it('an existing password account with that address is linked, not duplicated; its session needs the password for step-up', async () => {
    const existing = await signedInUser(t, { email: `${crypto.randomUUID().slice(0, 8)}@${domain}` });
    const sub = existing.email.split('@')[0]!;
    accounts[sub] = { email: existing.email, email_verified: true, name: 'Someone Else' };
    const { response, jar } = await signIn({ sub, email: existing.email });
    expect(response.status).toBe(302);
    const session = await sessionOf(jar);
    expect(session?.user.id).toBe(existing.id);
    expect(await stepUpAt(session!.session.id)).toBeNull();
    const linked = await accountsOf(existing.id);
    expect(linked.map((row) => row.provider_id).sort()).toEqual(['credential', `sso:${connectionId}`]);
    expect((await userRow(existing.email))?.name).toBe('Test User');
    const linkedAudit = await accountAuditRows(t, existing.id, 'user.account_linked');
    expect(linkedAudit.map((row) => row.metadata.providerId)).toEqual([`sso:${connectionId}`]);
  });

  it('an unverified account with that address: what it had before the proof goes, then it is linked and verified', async () => {
    const email = `unproven-${crypto.randomUUID().slice(0, 8)}@${domain}`;
    // Someone signed up with the address and never proved it; they linked an OAuth identity meanwhile.
    const userId = await t.database.withOwner(async (owner) => {
      const user = await owner
        .insertInto('users')
        .values({ name: 'Squatter', email, email_verified: false })
        .returning('id')
        .executeTakeFirstOrThrow();
      await owner
        .insertInto('accounts')
        .values({ user_id: user.id, account_id: `gh-${user.id}`, provider_id: 'github' })
        .execute();
      return user.id as string;
    });
    const sub = email.split('@')[0]!;
    accounts[sub] = { email, email_verified: true };
    const { jar } = await signIn({ sub, email });
    expect((await sessionOf(jar))?.user.id).toBe(userId);
    expect((await userRow(email))?.email_verified).toBe(true);
    expect(await accountsOf(userId)).toEqual([{ provider_id: `sso:${connectionId}`, account_id: sub, password: null }]);
  });

  it('an unverified account someone signed up with a password: the password goes with the proof', async () => {
    const email = `squatted-${crypto.randomUUID().slice(0, 8)}@${domain}`;
    const password = 'squatters password 123';
    // The squatter signs up under the address (never verified) and keeps the password.
    await expectStatus(await call(t, '/api/auth/sign-up/email', { body: { email, password, name: 'Squatter' } }), 200);
    const squatter = (await userRow(email))!;
    expect(squatter.email_verified).toBe(false);
    const sub = email.split('@')[0]!;
    accounts[sub] = { email, email_verified: true };
    const { jar } = await signIn({ sub, email });
    expect((await sessionOf(jar))?.user.id).toBe(squatter.id);
    expect(await accountsOf(squatter.id)).toEqual([
      { provider_id: `sso:${connectionId}`, account_id: sub, password: null },
    ]);
    // The address is verified now: with the password kept, the squatter would be in.
    const attempt = await call(t, '/api/auth/sign-in/email', { body: { email, password } });
    expect(attempt.status).toBe(401);
    expect(attempt.headers.getSetCookie().some((c) => c.includes('session_token=') && !/max-age=0/i.test(c))).toBe(
      false,
    );
  });

  it('two first sign-ins of one person at once: one account, one membership, two sessions', async () => {
    const who = person('twice');
    const flows = [await startAndLogin(who.sub, { email: who.email, callbackURL: '/app' })];
    flows.push(await startAndLogin(who.sub, { email: who.email, callbackURL: '/app' }));
    const answers = await Promise.all(flows.map(({ callback, jar }) => call(t, pathOf(callback), { jar })));
    expect(answers.map((answer) => answer.headers.get('location'))).toEqual(['/app', '/app']);
    const user = (await userRow(who.email))!;
    expect(await accountsOf(user.id)).toHaveLength(1);
    const sessions = await Promise.all(flows.map(({ jar }) => sessionOf(jar)));
    expect(sessions.map((session) => session?.user.id)).toEqual([user.id, user.id]);
    const added = (await auditRows(t, org.id, 'member.added')).filter((row) => row.metadata.userId === user.id);
    expect(added).toHaveLength(1);
  });

  it('the authorization URL carries PKCE, nonce, state and the typed address as login_hint; a slug works too', async () => {
    const who = person('hint');
    const { url } = await expectStatus<{ url: string }>(
      await call(t, '/api/auth/sign-in/sso', { body: { email: who.email, callbackURL: '/app' } }),
      200,
    );
    const params = new URL(url).searchParams;
    expect(params.get('login_hint')).toBe(who.email);
    expect(params.get('code_challenge_method')).toBe('S256');
    for (const name of ['state', 'nonce', 'code_challenge']) expect(params.get(name)).toMatch(/^[\w-]{43}$/);
    const bySlug = await call(t, '/api/auth/sign-in/sso', {
      body: { organizationSlug: org.slug, callbackURL: '/app' },
    });
    const slugUrl = new URL((await expectStatus<{ url: string }>(bySlug, 200)).url);
    expect(slugUrl.searchParams.get('login_hint')).toBeNull();
    expect(slugUrl.searchParams.get('redirect_uri')).toBe(`${t.config.auth.url}/api/auth/sso/callback/${connectionId}`);
  });

  it('sign-in/sso: 404 with no connection for the address or slug; 400 for both, neither, or a callback elsewhere', async () => {
    const unknown = await call(t, '/api/auth/sign-in/sso', { body: { email: 'a@nowhere.test', callbackURL: '/app' } });
    await expectError(unknown, 404, 'NOT_FOUND');
    const noSlug = await call(t, '/api/auth/sign-in/sso', {
      body: { organizationSlug: 'no-such-org', callbackURL: '/' },
    });
    await expectError(noSlug, 404, 'NOT_FOUND');
    for (const body of [
      { email: `a@${domain}`, organizationSlug: org.slug, callbackURL: '/app' },
      { callbackURL: '/app' },
      { email: `a@${domain}`, callbackURL: 'https://evil.test/steal' },
      { email: `a@${domain}`, callbackURL: '//evil.test/steal' },
      { email: `a@${domain}`, callbackURL: '/app', errorCallbackURL: 'https://evil.test/' },
    ]) {
      await expectError(await call(t, '/api/auth/sign-in/sso', { body }), 400, 'VALIDATION_ERROR');
    }
    // An absolute URL at APP_URL's origin is fine.
    const absolute = await call(t, '/api/auth/sign-in/sso', {
      body: { email: `a@${domain}`, callbackURL: `${t.config.auth.appUrl}/done` },
    });
    expect(absolute.status).toBe(200);
  });

  describe('roles', () => {
    let mapped: TestOrganization;
    let mappedDomain: string;
    let mappedConnection: string;
    let roles: Record<'owner' | 'admin' | 'member' | 'viewer', string>;

    beforeAll(async () => {
      mappedDomain = `${uniqueSlug('mapped')}.test`;
      const owner = await signedInUser(t, { email: `boss@${mappedDomain}` });
      mapped = await createOrganization(t, owner);
      await verifyDomain(mapped, mappedDomain);
      roles = {
        owner: (await roleBySlug(t, owner, 'owner')).id,
        admin: (await roleBySlug(t, owner, 'admin')).id,
        member: (await roleBySlug(t, owner, 'member')).id,
        viewer: (await roleBySlug(t, owner, 'viewer')).id,
      };
      mappedConnection = await insertConnection(mapped, {
        defaultRoleId: roles.viewer,
        roleMappings: [
          { claim: 'groups', value: 'admins', roleId: roles.admin },
          { claim: 'groups', value: 'staff', roleId: roles.member },
        ],
      });
    });

    const roleChanges = async (userId: string) =>
      (await auditRows(t, mapped.id, 'member.role_changed')).filter((row) => row.actor_id === userId);

    it('joins with the first matching mapping (an array claim containing the value), and follows the IdP at each sign-in', async () => {
      const who = person('mapped', { groups: ['staff', 'admins'] }, mappedDomain);
      expect((await signIn(who)).response.status).toBe(302);
      const user = (await userRow(who.email))!;
      expect(await memberRole(mapped.id, user.id)).toEqual({ role_id: roles.admin, role: 'admin' });
      const added = (await auditRows(t, mapped.id, 'member.added')).filter((row) => row.metadata.userId === user.id);
      expect(added[0]?.metadata).toMatchObject({ via: 'sso', roleId: roles.admin, connectionId: mappedConnection });

      // The IdP takes the person out of `admins`: the next sign-in follows.
      accounts[who.sub] = { ...accounts[who.sub], groups: ['staff'] };
      expect((await signIn(who)).response.status).toBe(302);
      expect(await memberRole(mapped.id, user.id)).toEqual({ role_id: roles.member, role: 'member' });
      // No mapping matches any more: the connection's default role.
      accounts[who.sub] = { ...accounts[who.sub], groups: [] };
      expect((await signIn(who)).response.status).toBe(302);
      expect((await memberRole(mapped.id, user.id))?.role_id).toBe(roles.viewer);
      const changes = await roleChanges(user.id);
      expect(changes.map((row) => [row.metadata.previousRoleId, row.metadata.roleId, row.metadata.via])).toEqual([
        [roles.admin, roles.member, 'sso'],
        [roles.member, roles.viewer, 'sso'],
      ]);
      // Unchanged: no entry.
      expect((await signIn(who)).response.status).toBe(302);
      expect(await roleChanges(user.id)).toHaveLength(2);
    });

    it('no mapping matches on joining: the default role; a scalar claim matches by equality', async () => {
      const plain = person('plain', {}, mappedDomain);
      await signIn(plain);
      expect((await memberRole(mapped.id, (await userRow(plain.email))!.id))?.role_id).toBe(roles.viewer);
      const scalar = person('scalar', { groups: 'admins' }, mappedDomain);
      await signIn(scalar);
      expect((await memberRole(mapped.id, (await userRow(scalar.email))!.id))?.role_id).toBe(roles.admin);
    });

    it('the last Owner stays Owner whatever the mappings say; with a second Owner the mapping applies', async () => {
      const boss = mapped.owner;
      const sub = boss.email.split('@')[0]!;
      accounts[sub] = { email: boss.email, email_verified: true, groups: ['staff'] };
      expect((await signIn({ sub, email: boss.email })).response.status).toBe(302);
      expect(await memberRole(mapped.id, boss.id)).toEqual({ role_id: roles.owner, role: 'owner' });
      expect(await roleChanges(boss.id)).toEqual([]);

      // Another Owner appears: the first Owner's role now follows the IdP.
      const second = person('second', { groups: ['staff'] }, mappedDomain);
      await signIn(second);
      const secondUser = (await userRow(second.email))!;
      await t.database.withOwner((owner) =>
        owner
          .updateTable('members')
          .set({ role_id: roles.owner, role: 'owner' })
          .where('organization_id', '=', mapped.id)
          .where('user_id', '=', secondUser.id)
          .execute(),
      );
      expect((await signIn({ sub, email: boss.email })).response.status).toBe(302);
      expect(await memberRole(mapped.id, boss.id)).toEqual({ role_id: roles.member, role: 'member' });
    });

    it('a connection without mappings never changes an existing member’s role', async () => {
      const who = person('steady');
      await signIn(who);
      const user = (await userRow(who.email))!;
      const admin = (await roleBySlug(t, org.owner, 'admin')).id;
      await t.database.withOwner((owner) =>
        owner
          .updateTable('members')
          .set({ role_id: admin, role: 'admin' })
          .where('organization_id', '=', org.id)
          .where('user_id', '=', user.id)
          .execute(),
      );
      await signIn(who);
      expect((await memberRole(org.id, user.id))?.role).toBe('admin');
    });
  });

  it("disabling the connection ends the sessions it created, and deleting it too; the person's other sessions stay", async () => {
    const own = `${uniqueSlug('ending')}.test`;
    const ending = await createOrganization(t, await signedInUser(t, { email: `owner@${own}` }));
    await verifyDomain(ending, own);
    const id = await insertConnection(ending);
    const who = person('ending', {}, own);
    const first = await signIn(who);
    expect((await sessionOf(first.jar))?.session.activeOrganizationId).toBe(ending.id);
    const owner = await sessionOf(ending.owner.jar);

    await setEnabled(ending, id, false);
    expect(await sessionOf(first.jar)).toBeNull();
    expect((await sessionOf(ending.owner.jar))?.session.id).toBe(owner?.session.id);

    await setEnabled(ending, id, true);
    const second = await signIn(who);
    expect(await sessionOf(second.jar)).not.toBeNull();
    await expectStatus(await call(t, `/api/sso/connections/${id}`, { method: 'DELETE', jar: ending.owner.jar }), 200);
    expect(await sessionOf(second.jar)).toBeNull();
  });

  describe('refusals: a redirect with ?error=<code>, no session, nothing written', () => {
    const refused = async (
      result: { response: Response; jar: CookieJar; location: string },
      code: string,
      at = '/app',
    ) => {
      expect(result.response.status).toBe(302);
      const location = new URL(result.location, 'http://relative.invalid');
      expect(location.searchParams.get('error'), result.location).toBe(code);
      if (at.startsWith('/')) expect(location.pathname).toBe(at);
      else expect(`${location.origin}${location.pathname}`).toBe(new URL(at).href);
      expect(result.jar.names().some((name) => name.includes('session_token'))).toBe(false);
      expect(await sessionOf(result.jar)).toBeNull();
    };

    it('an address at a domain the organization has not verified, or at another organization’s', async () => {
      const pending = `${uniqueSlug('pending')}.test`;
      await verifyDomain(org, pending, false);
      const other = await createOrganization(t, await signedInUser(t));
      const foreign = `${uniqueSlug('foreign')}.test`;
      await verifyDomain(other, foreign);
      for (const at of [pending, foreign]) {
        const who = person('outsider', {}, at);
        // The sign-in starts with the organization's slug; the IdP asserts an address elsewhere.
        const { callback, jar } = await startAndLogin(who.sub, {
          organizationSlug: org.slug,
          callbackURL: '/app',
          errorCallbackURL: '/login',
        });
        const response = await call(t, pathOf(callback), { jar });
        await refused(
          { response, jar, location: response.headers.get('location') ?? '' },
          'domain_not_allowed',
          '/login',
        );
        expect(await userRow(who.email)).toBeUndefined();
      }
    });

    /** Another jar holding the same cookies: the same browser, coming back again. */
    function copyOf(jar: CookieJar): CookieJar {
      const copy = new CookieJar();
      const headers = new Headers();
      for (const name of jar.names()) headers.append('set-cookie', `${name}=${jar.get(name)}`);
      copy.store(new Response(null, { headers }));
      return copy;
    }
    const refusal = (response: Response, jar: CookieJar) => ({
      response,
      jar,
      location: response.headers.get('location') ?? '',
    });

    it('an unknown state, a state used twice, and the state of another connection', async () => {
      const who = person('state');
      const started = await startAndLogin(who.sub, { email: who.email, callbackURL: '/app' });
      const browser = copyOf(started.jar);
      const forged = new URL(started.callback);
      forged.searchParams.set('state', 'x'.repeat(43));
      const unknownJar = copyOf(browser);
      const unknown = await call(t, pathOf(forged.href), { jar: unknownJar });
      await refused(refusal(unknown, unknownJar), 'invalid_state', t.config.auth.appUrl);

      const first = await call(t, pathOf(started.callback), { jar: copyOf(browser) });
      expect(first.headers.get('location')).toBe('/app');
      const again = copyOf(browser);
      const replay = await call(t, pathOf(started.callback), { jar: again });
      await refused(refusal(replay, again), 'invalid_state', t.config.auth.appUrl);

      // A state started for one connection, brought to another's callback.
      const otherConnection = await insertConnection(org);
      const next = await startAndLogin(who.sub, { email: who.email, callbackURL: '/app', errorCallbackURL: '/oops' });
      const nextBrowser = copyOf(next.jar);
      const moved = new URL(next.callback);
      moved.pathname = `/api/auth/sso/callback/${otherConnection}`;
      const wrong = await call(t, pathOf(moved.href), { jar: next.jar });
      await refused(refusal(wrong, next.jar), 'invalid_state', '/oops');
      // Consumed by the refusal: not usable at its own connection either, even from the browser that started it.
      const late = await call(t, pathOf(next.callback), { jar: nextBrowser });
      expect(errorOf(late.headers.get('location')!)).toBe('invalid_state');
    });

    it('a callback brought to another browser (login CSRF): refused, and the flow is spent', async () => {
      const attacker = person('attacker');
      const started = await startAndLogin(attacker.sub, { email: attacker.email, callbackURL: '/app' });
      // The victim's browser follows the attacker's callback URL: it did not start this sign-in.
      const victim = new CookieJar();
      const lured = await call(t, pathOf(started.callback), { jar: victim });
      await refused(refusal(lured, victim), 'invalid_state', t.config.auth.appUrl);
      const own = await call(t, pathOf(started.callback), { jar: started.jar });
      expect(errorOf(own.headers.get('location')!)).toBe('invalid_state');
      expect(await userRow(attacker.email)).toBeUndefined();
    });

    it('a state past its ten minutes', async () => {
      const who = person('late');
      const { callback, jar } = await startAndLogin(who.sub, { email: who.email, callbackURL: '/app' });
      t.clock.advance(10 * 60 * 1000 + 1000);
      try {
        const response = await call(t, pathOf(callback), { jar });
        await refused(
          { response, jar, location: response.headers.get('location') ?? '' },
          'invalid_state',
          t.config.auth.appUrl,
        );
      } finally {
        t.clock.advance(-(10 * 60 * 1000 + 1000));
      }
    });

    it('the IdP refusing (error=access_denied), a missing code, an unknown or malformed connection id', async () => {
      const who = person('deny');
      const { callback, jar } = await startAndLogin(who.sub, {
        email: who.email,
        callbackURL: '/app',
        errorCallbackURL: '/e',
      });
      const state = new URL(callback).searchParams.get('state')!;
      const denied = await call(t, `/api/auth/sso/callback/${connectionId}?error=access_denied&state=${state}`, {
        jar,
      });
      await refused({ response: denied, jar, location: denied.headers.get('location') ?? '' }, 'idp_error', '/e');
      const again = await startAndLogin(who.sub, { email: who.email, callbackURL: '/app', errorCallbackURL: '/e' });
      const noCode = `/api/auth/sso/callback/${connectionId}?state=${new URL(again.callback).searchParams.get('state')}`;
      const missing = await call(t, noCode, { jar: again.jar });
      await refused(
        { response: missing, jar: again.jar, location: missing.headers.get('location') ?? '' },
        'invalid_request',
        '/e',
      );
      for (const id of ['not-a-uuid', crypto.randomUUID()]) {
        const response = await call(t, `/api/auth/sso/callback/${id}?code=x`, { jar });
        const location = new URL(response.headers.get('location') ?? '', 'http://x');
        expect([response.status, location.searchParams.get('error')]).toEqual([302, 'invalid_request']);
      }
    });

    it('a connection disabled between the start and the callback: connection_disabled; no longer offered', async () => {
      const own = await insertConnection(org);
      // The oldest enabled connection serves sign-ins: the others are disabled for this test.
      const others = await asOwnerInTenant(t, org.id, (trx) =>
        trx.selectFrom('sso_connections').select('id').where('tenant_id', '=', org.id).where('id', '<>', own).execute(),
      );
      for (const { id } of others) await setEnabled(org, id, false);
      try {
        const who = person('disabled');
        const { callback, jar } = await startAndLogin(who.sub, { email: who.email, callbackURL: '/app' });
        expect(new URL(callback).pathname).toBe(`/api/auth/sso/callback/${own}`);
        await setEnabled(org, own, false);
        const response = await call(t, pathOf(callback), { jar });
        await refused(
          { response, jar, location: response.headers.get('location') ?? '' },
          'connection_disabled',
          t.config.auth.appUrl,
        );
        expect(await userRow(who.email)).toBeUndefined();
        const none = await call(t, '/api/auth/sign-in/sso', { body: { email: who.email, callbackURL: '/app' } });
        await expectError(none, 404, 'NOT_FOUND');
      } finally {
        for (const { id } of others) await setEnabled(org, id, true);
      }
    });

    it('accounts with a platform role, or scheduled for deletion, and an identity linked to another account', async () => {
      for (const change of [{ role: 'admin' }, { deleted_at: new Date() }]) {
        const existing = await signedInUser(t, { email: `${crypto.randomUUID().slice(0, 8)}@${domain}` });
        await t.database.withOwner((owner) =>
          owner.updateTable('users').set(change).where('id', '=', existing.id).execute(),
        );
        const sub = existing.email.split('@')[0]!;
        accounts[sub] = { email: existing.email, email_verified: true };
        const result = await signIn({ sub, email: existing.email });
        await refused(result, 'account_unavailable', t.config.auth.appUrl);
        expect(await accountsOf(existing.id)).toEqual([expect.objectContaining({ provider_id: 'credential' })]);
      }
      // The IdP reassigns a subject to another address: the link stays with its account.
      const first = person('first');
      await signIn(first);
      const second = person('second');
      accounts[first.sub] = { ...accounts[first.sub], email: second.email };
      const result = await signIn({ sub: first.sub, email: second.email });
      await refused(result, 'account_unavailable', t.config.auth.appUrl);
      expect(await userRow(second.email)).toBeUndefined();
    });
  });

  describe('second factor', () => {
    it('a user with two-factor is held back (as after OAuth) and completes with a code; the session is then multi-factor', async () => {
      const user = await signedInUser(t, { email: `${crypto.randomUUID().slice(0, 8)}@${domain}` });
      const factor = await enableTotp(t, user.jar);
      const sub = user.email.split('@')[0]!;
      accounts[sub] = { email: user.email, email_verified: true };
      const { response, jar, location } = await signIn({ sub, email: user.email });
      expect(response.status).toBe(302);
      const target = new URL(location, 'http://x');
      expect([target.pathname, target.searchParams.get('twoFactorRedirect')]).toEqual(['/app', 'true']);
      expect(jar.get('gatehouse.session_token')).toBeUndefined();
      expect(jar.get('gatehouse.two_factor')).toBeDefined();
      expect(await sessionOf(jar)).toBeNull();
      await completeWithTotp(t, jar, factor.authenticator);
      const session = await sessionOf(jar);
      // Still the connection's session: in its organization, counted by requireSso, ended with the connection.
      expect(session).toMatchObject({ user: { id: user.id }, session: { mfa: true, activeOrganizationId: org.id } });
      const stored = await t.database.withOwner((owner) =>
        owner
          .selectFrom('sessions')
          .select('sso_connection_id')
          .where('id', '=', session!.session.id)
          .executeTakeFirstOrThrow(),
      );
      expect(stored.sso_connection_id).toBe(connectionId);
    });

    it('a connection disabled while the second factor is due: the code then makes no session', async () => {
      const own = `${uniqueSlug('held')}.test`;
      const held = await createOrganization(t, await signedInUser(t, { email: `owner@${own}` }));
      await verifyDomain(held, own);
      const id = await insertConnection(held);
      const user = await signedInUser(t, { email: `${crypto.randomUUID().slice(0, 8)}@${own}` });
      const factor = await enableTotp(t, user.jar);
      const sub = user.email.split('@')[0]!;
      accounts[sub] = { email: user.email, email_verified: true };
      const { jar, location } = await signIn({ sub, email: user.email });
      expect(new URL(location, 'http://x').searchParams.get('twoFactorRedirect')).toBe('true');
      await setEnabled(held, id, false);
      const refused = await call(t, '/api/auth/two-factor/verify-totp', {
        body: { code: await freshCode(factor.authenticator) },
        jar,
      });
      expect(refused.status).toBe(403);
      expect(jar.get('gatehouse.session_token')).toBeUndefined();
      expect(await sessionOf(jar)).toBeNull();
    });

    it('with mfaAtIdp the IdP’s second factor counts: signed in at once, multi-factor and fresh', async () => {
      const mfaDomain = `${uniqueSlug('mfa')}.test`;
      const mfaOrg = await createOrganization(t, await signedInUser(t, { email: `owner@${mfaDomain}` }));
      await verifyDomain(mfaOrg, mfaDomain);
      await insertConnection(mfaOrg, { mfaAtIdp: true });
      const user = await signedInUser(t, { email: `two@${mfaDomain}` });
      await enableTotp(t, user.jar);
      accounts.two = { email: user.email, email_verified: true };
      const { location, jar } = await signIn({ sub: 'two', email: user.email });
      expect(location).toBe('/app');
      const session = await sessionOf(jar);
      expect(session).toMatchObject({ user: { id: user.id }, session: { mfa: true, activeOrganizationId: mfaOrg.id } });
      expect(Date.parse(session!.session.stepUpUntil)).toBeGreaterThan(t.clock().getTime());
    });
  });
});
