import { mkdir } from 'node:fs/promises';
import type { Browser, Request as PwRequest } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { linkIn, mailsTo } from '../support/http.js';
import { enableTotp, freshCode } from '../support/mfa.js';
import { createOidcProvider, type OidcTestProvider } from '../support/oidc-provider.js';
import { type SamlIdpServer, startSamlIdpServer } from '../support/saml-idp.js';
import { PASSWORD, signedInUser, uniqueEmail } from '../support/users.js';
import { launchChromium } from './support/chromium.js';
import { ExamplePage, startExampleStack } from './support/example-page.js';
import { SCREENSHOT_DIR } from './support/servers.js';

/**
 * Enterprise single sign-on in Debian's chromium, across four origins: the
 * example SPA (localhost), the API (localhost, another port), an OIDC
 * provider (oidc-provider) and a SAML IdP (samlify), both on 127.0.0.1,
 * another site. An Owner proves a domain through a DNS server on loopback
 * and connects both IdPs from the SPA's Single sign-on screen; then people
 * at the domain sign in from the SPA's Account screen through the IdPs' own
 * login pages, each in a browser of their own, and land in the SPA with a
 * session in the organization. Screenshots go to SCREENSHOT_DIR (sso-*.png).
 *
 * What breaks it: without the CSRF exemption of the assertion consumer
 * service (src/middleware/csrf.ts SAML_ACS_PATH), the IdP page's form post,
 * which Chromium sends with `Origin: <the IdP's origin>` (asserted below, so
 * the check cannot pass for want of an Origin), is refused 403 on an
 * /api/auth path whatever its cookies, the browser stays on the API's JSON
 * error ("Cross-site request refused"), and both SAML sign-ins fail to reach
 * the SPA. Without the OIDC state
 * cookie reaching the callback (a top-level cross-site GET, SameSite=Lax),
 * the callback answers `?error=invalid_state` and the page shows it.
 */

const random = crypto.randomUUID().slice(0, 8);
const DOMAIN = `acme-${random}.example`;
const SLUG = `acme-${random}`;
const ORGANIZATION = `Organization: Acme (${SLUG})`;
/** At the IdP, the account is its subject; its email is at the organization's domain. */
const ADA = { sub: `okta-user-${random}`, email: `ada-${random}@${DOMAIN}`, name: 'Ada Lovelace' };
const LATE = { sub: `okta-late-${random}`, email: `linus-${random}@${DOMAIN}`, name: 'Linus Late' };
const GRACE = `grace-${random}@${DOMAIN}`;
const CLIENT = { client_id: `gatehouse-${random}`, client_secret: crypto.randomUUID() };

describe('single sign-on in Chromium: the example SPA, an OIDC provider and a SAML IdP', () => {
  let stack: Awaited<ReturnType<typeof startExampleStack>>;
  let dns: TestDnsServer;
  let oidc: OidcTestProvider;
  let idp: SamlIdpServer;
  let browser: Browser;
  let ui: ExamplePage;
  let ada: ExamplePage;
  const owner = uniqueEmail('sso-owner');
  const pages: ExamplePage[] = [];
  let organizationId = '';
  let acsUrl = '';

  /** A browser of its own; the IdPs' pages load nothing from the internet (oidc-provider's imports a web font). */
  async function newPage(): Promise<ExamplePage> {
    const context = await browser.newContext();
    await context.route(
      (url) => !['localhost', '127.0.0.1'].includes(url.hostname),
      (route) => route.abort(),
    );
    const page = new ExamplePage(await context.newPage(), stack.spaOrigin);
    pages.push(page);
    return page;
  }

  /** The API's clock (a test clock, frozen) at the wall clock the IdPs sign their times with. */
  const syncClock = () => stack.api.t.clock.set(Date.now());

  /** GET /api/session from the page, with the browser's cookies. */
  const sessionOf = (page: ExamplePage) =>
    page.page.evaluate(async (api) => {
      const response = await fetch(`${api}/api/session`, { credentials: 'include' });
      return (await response.json()) as {
        user: { email: string; name: string; emailVerified: boolean };
        session: { activeOrganizationId: string | null; mfa: boolean };
        permissions: string[];
      } | null;
    }, stack.api.url);

  /** From the SPA's Account screen to the IdP's page. */
  async function startSignIn(page: ExamplePage, email: string, idpOrigin: string): Promise<void> {
    await page.load();
    expect(await page.text('#who')).toBe('Signed out');
    await page.fill('sso-signin-form', { email });
    const leaving = page.page.waitForURL((url) => url.origin === idpOrigin, { timeout: 10_000 });
    await page.page.click('#sso-signin-form button[type=submit]');
    // A refusal stays on the SPA, which says why.
    await leaving.catch(async (error: Error) => {
      throw new Error(`${error.message}; the page says: ${await page.text('#status')} ${await page.text('#error')}`);
    });
  }

  /** Submits the IdP's form; the browser comes back to the SPA, which loads. */
  function finishSignIn(page: ExamplePage): Promise<void> {
    return page.step('load', async () => {
      const back = page.page.waitForURL((url) => url.origin === stack.spaOrigin, { timeout: 10_000 });
      await page.page.click('button[type=submit]');
      // A refusal on the way (the ACS's 403, say) leaves the browser on the API's answer: say which.
      await back.catch(async (error: Error) => {
        const body = ((await page.page.textContent('body')) ?? '').slice(0, 300);
        throw new Error(`${error.message}; the browser stopped at ${page.page.url()}: ${body}`);
      });
    });
  }

  async function expectMember(page: ExamplePage, email: string, name: string): Promise<void> {
    expect(page.page.url()).toBe(`${stack.spaOrigin}/?sso=1`);
    expect(await page.text('#account-notice')).toBe('');
    expect(await page.text('#who')).toBe(`Signed in as ${email}`);
    expect(await page.text('#org')).toBe(ORGANIZATION);
    expect(await page.text('#profile')).toContain(`${email} (verified)`);
    const session = await sessionOf(page);
    expect(session?.user).toMatchObject({ email, name, emailVerified: true });
    expect(session?.session).toMatchObject({ activeOrganizationId: organizationId, mfa: false });
    expect(session?.permissions).toContain('organizations:read');
    expect(session?.permissions).not.toContain('organizations:write');
  }

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    dns = await startDnsServer();
    oidc = await createOidcProvider({
      accounts: Object.fromEntries(
        [ADA, LATE].map((person) => [person.sub, { email: person.email, email_verified: true, name: person.name }]),
      ),
    });
    idp = await startSamlIdpServer();
    stack = await startExampleStack({ SSO_ALLOW_PRIVATE_URLS: 'true', DNS_SERVERS: dns.address });
    browser = await launchChromium();
    ui = await newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await stack?.close();
    await idp?.close();
    await oidc?.close();
    await dns?.close();
  });

  it('an Owner proves the domain through DNS and connects an OIDC provider and a SAML IdP from the SPA', async () => {
    await ui.load();
    await ui.submit('signup-form', 'sign up', { name: 'Olive Owner', email: owner, password: PASSWORD });
    const mail = mailsTo(stack.api.t, owner).at(-1);
    expect(mail, `mail to ${owner}`).toBeDefined();
    await ui.step('load', () => ui.page.goto(linkIn(mail!.text)));
    expect(await ui.text('#who')).toBe(`Signed in as ${owner}`);
    await ui.open('organizations');
    await ui.submit('org-form', 'create organization', { name: 'Acme', slug: SLUG });
    expect(await ui.text('#org')).toBe(ORGANIZATION);
    organizationId = (await sessionOf(ui))?.session.activeOrganizationId ?? '';
    expect(organizationId).not.toBe('');

    await ui.open('sso');
    expect(await ui.rows('sso-domains')).toEqual([]);
    // The verification link's session never proved the password: a sensitive action asks for it.
    expect(
      await ui.stepNeedsConfirmation('add domain', async () => {
        await ui.fill('sso-domain-form', { domain: DOMAIN });
        await ui.page.click('#sso-domain-form button[type=submit]');
      }),
    ).toMatch(/403 STEP_UP_REQUIRED\b/);
    await ui.confirmIdentity('add domain', { password: PASSWORD });
    const txtName = await ui.text('#sso-domains .txt-name');
    const txtValue = await ui.text('#sso-domains .txt-value');
    expect(txtName).toBe(`_gatehouse-challenge.${DOMAIN}`);
    expect(txtValue).toMatch(/^gatehouse-domain-verification=[\w-]{32}$/);
    expect((await ui.rows('sso-domains')).map((cells) => cells.slice(0, 2))).toEqual([[DOMAIN, 'pending']]);
    const verify = `#sso-domains [data-domain="${DOMAIN}"] button.verify`;
    // Not published yet: the DNS server answers NXDOMAIN.
    expect(await ui.stepFails('verify domain', () => ui.page.click(verify))).toMatch(/409 DOMAIN_NOT_VERIFIED\b/);
    dns.records.set(txtName, [txtValue]);
    await ui.step('verify domain', () => ui.page.click(verify));
    // Both checks asked the DNS server (16: TXT).
    expect(dns.questions.filter((question) => question === `${txtName} 16`).length).toBeGreaterThanOrEqual(2);
    expect((await ui.rows('sso-domains'))[0]?.[1]).toMatch(/^verified /);
    await ui.screenshot('sso-01-domain-verified.png');

    await ui.submit('sso-oidc-form', 'create OIDC connection', {
      name: 'Acme Okta',
      issuer: oidc.issuer,
      clientId: CLIENT.client_id,
      clientSecret: CLIENT.client_secret,
    });
    // What to enter in the IdP's app: its redirect URI names the connection.
    const redirectUri = await ui.text('#sso-connections .redirect-uri');
    expect(redirectUri).toMatch(new RegExp(`^${stack.api.url}/api/auth/sso/callback/[0-9a-f-]{36}$`));
    oidc.addClient({ ...CLIENT, redirect_uris: [redirectUri] });

    await ui.fill('sso-saml-form', { name: 'Acme Entra', metadataXml: idp.metadataXml });
    await ui.step('create SAML connection', () => ui.page.click('#sso-saml-form button[type=submit]'));
    acsUrl = await ui.text('#sso-connections .acs-url');
    expect(acsUrl).toMatch(new RegExp(`^${stack.api.url}/api/auth/sso/saml2/callback/[0-9a-f-]{36}$`));
    const entityId = await ui.text('#sso-connections .entity-id');
    expect(entityId).toBe(`${stack.api.url}/api/sso/connections/${acsUrl.split('/').at(-1)}/saml-metadata`);
    expect((await ui.rows('sso-connections')).map((cells) => cells.slice(0, 3))).toEqual([
      ['Acme Okta', `OIDC (${oidc.issuer})`, 'enabled'],
      ['Acme Entra', `SAML (${idp.entityId})`, 'enabled'],
    ]);
    await ui.screenshot('sso-02-connections.png');
  });

  it("a person at the domain signs in through the OIDC provider's login page and lands in the organization", async () => {
    ada = await newPage();
    // No connection serves another domain.
    await ada.load();
    expect(
      await ada.stepFails('sign in with SSO', async () => {
        await ada.fill('sso-signin-form', { email: uniqueEmail('elsewhere') });
        await ada.page.click('#sso-signin-form button[type=submit]');
      }),
    ).toMatch(/404 NOT_FOUND\b/);

    syncClock();
    // The oldest enabled connection serves the domain: the OIDC provider's page, with the address as login_hint.
    await startSignIn(ada, ADA.email, oidc.issuer);
    expect(await ada.page.inputValue('input[name=login]')).toBe(ADA.email);
    await ada.page.fill('input[name=login]', ADA.sub);
    await ada.page.fill('input[name=password]', 'the password the IdP checks');
    await ada.screenshot('sso-03-oidc-login-page.png');
    await finishSignIn(ada);
    await expectMember(ada, ADA.email, ADA.name);
    await ada.screenshot('sso-04-oidc-signed-in.png');
    expect(ada.errors).toEqual([]);
  });

  it("another person signs in through the SAML IdP's page, whose form posts the response cross-site to the ACS", async () => {
    // A sign-in under way through the OIDC connection when the Owner turns it off: it comes back refused.
    const late = await newPage();
    syncClock();
    await startSignIn(late, LATE.email, oidc.issuer);
    await ui.open('sso');
    await ui.step('disable connection', () => ui.page.click('#sso-connections [data-name="Acme Okta"] button.toggle'));
    expect((await ui.rows('sso-connections')).map((cells) => cells[2])).toEqual(['disabled', 'enabled']);
    await late.page.fill('input[name=login]', LATE.sub);
    await late.page.fill('input[name=password]', 'the password the IdP checks');
    await finishSignIn(late);
    expect(late.page.url()).toBe(`${stack.spaOrigin}/?sso=1&error=connection_disabled`);
    expect(await late.text('#who')).toBe('Signed out');
    expect(await late.text('#account-notice')).toBe(
      'Single sign-on failed: connection_disabled (the organization turned this connection off)',
    );
    await late.screenshot('sso-05-sign-in-refused.png');
    // Disabling also ended the sessions the connection created.
    await ada.load();
    expect(await ada.text('#who')).toBe('Signed out');

    const grace = await newPage();
    const posts: PwRequest[] = [];
    grace.page.on('request', (request) => {
      if (request.url() === acsUrl) posts.push(request);
    });
    syncClock();
    await startSignIn(grace, GRACE, idp.origin);
    expect(await grace.page.title()).toBe('Test IdP sign-in');
    await grace.page.fill('input[name=email]', GRACE);
    await grace.screenshot('sso-06-saml-login-page.png');
    await finishSignIn(grace);
    // The IdP's page posted the form to the ACS from its own origin: the one cross-site form the API accepts.
    expect(posts).toHaveLength(1);
    const headers = await posts[0]!.allHeaders();
    expect(posts[0]!.method()).toBe('POST');
    expect(headers.origin).toBe(idp.origin);
    expect(headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(idp.requests).toHaveLength(1);
    await expectMember(grace, GRACE, GRACE.slice(0, GRACE.indexOf('@')));
    await grace.screenshot('sso-07-saml-signed-in.png');

    // The Owner sees both people joined, as Members.
    await ui.open('members');
    const members = await ui.rows('members');
    expect(members.map((cells) => cells[1]).sort()).toEqual([owner, ADA.email, GRACE].sort());
    await ui.screenshot('sso-08-members.png');
  });

  it('an account at the domain with two-factor on is linked and joins; the SPA asks for its code before the session', async () => {
    const henry = await signedInUser(stack.api.t, { email: `henry-${random}@${DOMAIN}`, name: 'Henry Holt' });
    const { authenticator } = await enableTotp(stack.api.t, henry.jar);
    const page = await newPage();
    syncClock();
    await startSignIn(page, henry.email, idp.origin);
    await page.page.fill('input[name=email]', henry.email);
    await finishSignIn(page);
    // The connection does not say the IdP asked for a second factor: the account's own applies.
    expect(page.page.url()).toBe(`${stack.spaOrigin}/?sso=1&twoFactorRedirect=true`);
    expect(await page.text('#who')).toBe('Signed out');
    expect(await page.page.isVisible('#totp-form')).toBe(true);
    await page.screenshot('sso-09-second-factor.png');
    await page.submit('totp-form', 'verify code', { code: await freshCode(authenticator) });
    expect(await page.text('#who')).toBe(`Signed in as ${henry.email}`);
    expect(await page.text('#mfa')).toBe('multi-factor');
    // Completing the second factor keeps the single sign-on's organization.
    expect(await page.text('#org')).toBe(ORGANIZATION);
    expect((await sessionOf(page))?.session).toMatchObject({ mfa: true, activeOrganizationId: organizationId });
    // The sign-in made the account a member of the organization.
    await page.open('organizations');
    expect((await page.rows('organizations')).map((cells) => cells.slice(0, 2))).toEqual([['Acme', SLUG]]);
  });

  it('raised no page error in any browser', () => {
    expect(pages.flatMap((page) => page.errors)).toEqual([]);
  });
});
