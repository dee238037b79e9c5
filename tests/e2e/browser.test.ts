import { mkdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Browser, BrowserContext, Page, Response as PwResponse } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkIn, mailsTo } from '../support/http.js';
import { ALL_PERMISSIONS, accountAuditRows } from '../support/orgs.js';
import { PASSWORD, uniqueEmail } from '../support/users.js';
import { type ApiServer, startApiServer } from './support/api-server.js';
import { launchChromium } from './support/chromium.js';
import { SCREENSHOT_DIR, startStaticServer, swaggerUiDist } from './support/servers.js';

/**
 * Debian's chromium (playwright-core) runs a plain SPA served
 * on the trusted APP_URL (http://localhost:3000) against the Node API on
 * another port of localhost, over `fetch(..., { credentials: 'include' })`.
 *
 * What each breakage trips:
 *
 * - CORS credentials (no `Access-Control-Allow-Credentials: true`): the
 *   browser rejects every credentialed fetch of the SPA (TypeError), so the
 *   very first step ("load" -> #who "Signed out") already fails; the network
 *   check `expectCorsFor(spaOrigin)` names the missing header.
 * - The trusted origin: if CORS_ORIGIN does not allow APP_URL the same
 *   fetches are rejected (first step fails); if the auth library does not
 *   trust APP_URL, sign-up answers 403 (INVALID_CALLBACK_URL for the SPA's
 *   callbackURL; sign-in INVALID_ORIGIN) and the "sign up" step fails. If instead a foreign origin is trusted (CORS reflecting any
 *   origin, or the library's origin check off), the untrusted page's probes
 *   read a response ("read 200 …" instead of "blocked") or its no-cors
 *   sign-in is answered 200 and a session row appears: the second test fails.
 * - The cookie's HttpOnly flag: cookies are scoped by host, not port, so the
 *   API's cookie on localhost:<apiPort> is also the SPA's on localhost:3000;
 *   without HttpOnly `document.cookie` on the SPA page would list
 *   `gatehouse.session_token`, which `expectSessionCookieHidden` refuses
 *   (and it also checks the jar's own httpOnly flag).
 */

const SESSION_COOKIE = 'gatehouse.session_token';

describe('the SPA in Chromium against the Node API', () => {
  let api: ApiServer;
  let spa: Awaited<ReturnType<typeof startStaticServer>>;
  let untrusted: Awaited<ReturnType<typeof startStaticServer>>;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let spaOrigin: string;
  let untrustedOrigin: string;
  const email = uniqueEmail('browser');
  /** The organization the first test creates. */
  let slug = '';
  const pageErrors: string[] = [];
  const apiResponses: PwResponse[] = [];

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    const apiUrl = () => api.url;
    spa = await startStaticServer({ port: 3000, apiUrl });
    untrusted = await startStaticServer({ port: 3001, apiUrl });
    spaOrigin = `http://localhost:${spa.port}`;
    untrustedOrigin = `http://127.0.0.1:${untrusted.port}`;
    api = await startApiServer((port) => ({
      APP_URL: spaOrigin,
      CORS_ORIGIN: spaOrigin,
      AUTH_URL: `http://localhost:${port}`,
      DOCS_ENABLED: 'true',
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_AUTH_LIMIT: '100',
      RATE_LIMIT_GLOBAL_LIMIT: '1000',
    }));
    browser = await launchChromium();
    context = await browser.newContext();
    page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('response', (response) => {
      if (response.url().startsWith(api.url) && response.request().resourceType() === 'fetch')
        apiResponses.push(response);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all([spa?.close(), untrusted?.close()]);
    await api?.close();
  });

  const text = async (selector: string, on: Page = page) => ((await on.textContent(selector)) ?? '').trim();

  /** Runs one UI step and waits for the page to report it; fails with the page's own error text. */
  async function step(name: string, run: () => Promise<unknown>, on: Page = page): Promise<void> {
    await run();
    await on.waitForFunction((n) => {
      const status = document.getElementById('status')?.textContent;
      return status === `${n}: ok` || status === `${n}: failed`;
    }, name);
    expect(await text('#status', on), `${name}: ${await text('#error', on)}`).toBe(`${name}: ok`);
  }

  async function stepFails(name: string, run: () => Promise<unknown>): Promise<string> {
    await run();
    await page.waitForFunction((n) => document.getElementById('status')?.textContent === `${n}: failed`, name);
    return text('#error');
  }

  async function expectSessionCookieHidden(): Promise<void> {
    // The cookie exists, for the API's host and equally for the SPA's (same host, other port)...
    const jar = await context.cookies(spaOrigin);
    const session = jar.find((cookie) => cookie.name === SESSION_COOKIE);
    expect(session, `cookies for ${spaOrigin}: ${jar.map((c) => c.name).join(', ')}`).toBeDefined();
    // ...yet the SPA page's script cannot read it.
    const visible = await page.evaluate(() => document.cookie);
    expect(visible, 'document.cookie').not.toContain(SESSION_COOKIE);
    expect(visible, 'document.cookie').not.toContain(session!.value);
    expect(visible, 'document.cookie').not.toContain('session_data');
    // The flags the browser stored, for the failure message's sake.
    expect(session!.httpOnly).toBe(true);
    expect(session!.sameSite).toBe('Lax');
  }

  /** Every credentialed fetch the SPA made was answered for its origin, with credentials allowed. */
  function expectCorsFor(origin: string): void {
    expect(apiResponses.length).toBeGreaterThan(0);
    for (const response of apiResponses) {
      const headers = response.headers();
      const label = `${response.request().method()} ${response.url()}`;
      expect(headers['access-control-allow-origin'], label).toBe(origin);
      expect(headers['access-control-allow-credentials'], label).toBe('true');
    }
  }

  it('signs up, verifies, signs in, creates an organization, a role and an API key, and signs out', async () => {
    await step('load', () => page.goto(`${spaOrigin}/`));
    expect(await page.title()).toBe('Gatehouse SPA (e2e)');
    expect(await text('#who')).toBe('Signed out');

    await page.fill('#signup-form [name=name]', 'Ada Browser');
    await page.fill('#signup-form [name=email]', email);
    await page.fill('#signup-form [name=password]', PASSWORD);
    await step('sign up', () => page.click('#signup-form button'));
    expect(await text('#signup-result')).toBe(`Check ${email} for the verification link`);

    // The development mailer's log line (API.md "Development email") carries the link.
    const mail = mailsTo(api.t, email).at(-1);
    expect(mail, 'verification mail').toBeDefined();
    const link = linkIn(mail!.text);
    expect(link.startsWith(`${api.url}/api/auth/verify-email?token=`), link).toBe(true);
    // The user clicks it: the API verifies, signs in and redirects back to the SPA.
    await step('load', () => page.goto(link));
    expect(new URL(page.url()).origin).toBe(spaOrigin);
    expect(await text('#verified')).toBe('Email verified');
    expect(await text('#who')).toBe(`Signed in as ${email}`);
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'browser-1-verified.png'), fullPage: true });
    await expectSessionCookieHidden();

    await page.fill('#signin-form [name=email]', email);
    await page.fill('#signin-form [name=password]', PASSWORD);
    await step('sign in', () => page.click('#signin-form button'));
    expect(await text('#who')).toBe(`Signed in as ${email}`);
    await expectSessionCookieHidden();

    slug = `browser-${crypto.randomUUID().slice(0, 8)}`;
    await page.fill('#org-form [name=name]', 'Browser Org');
    await page.fill('#org-form [name=slug]', slug);
    await step('create organization', () => page.click('#org-form button'));
    expect(await text('#org')).toBe(`Organization: Browser Org (${slug})`);
    // The Owner role's permissions (all of them) reach the session.
    expect(await text('#permissions')).toBe(`(${ALL_PERMISSIONS.length} permissions)`);

    await step('list roles', () => page.click('#list-roles'));
    expect(await page.locator('#roles li').allTextContents()).toEqual([
      'Owner (owner)',
      'Admin (admin)',
      'Member (member)',
      'Viewer (viewer)',
    ]);

    await page.fill('#role-form [name=name]', 'Auditors');
    await page.fill('#role-form [name=description]', 'Read-only reviewers');
    await page.fill('#role-form [name=permissions]', 'roles:read, members:read');
    await step('create role', () => page.click('#role-form button'));
    expect(await text('#role-created')).toBe('Created role Auditors (auditors) with members:read, roles:read');
    expect(await page.locator('#roles li').allTextContents()).toEqual([
      'Owner (owner)',
      'Admin (admin)',
      'Member (member)',
      'Viewer (viewer)',
      'Auditors (auditors)',
    ]);

    await page.fill('#key-form [name=name]', 'Browser key');
    await page.fill('#key-form [name=scopes]', 'roles:read');
    await step('create API key', () => page.click('#key-form button'));
    const key = await text('#api-key');
    expect(key).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    const listed = await page.locator('#api-keys li').allTextContents();
    expect(listed).toEqual([`Browser key: sk_live_…${key.slice(-4)} [roles:read]`]);
    expect(listed.join(' ')).not.toContain(key);
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'browser-2-signed-in.png'), fullPage: true });

    await step('sign out', () => page.click('#sign-out'));
    expect(await text('#who')).toBe('Signed out');
    expect((await context.cookies(spaOrigin)).filter((c) => c.name === SESSION_COOKIE && c.value !== '')).toEqual([]);
    expect(await stepFails('list roles', () => page.click('#list-roles'))).toMatch(
      /^list roles: Error: 401 UNAUTHORIZED\b/,
    );
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'browser-3-signed-out.png'), fullPage: true });

    expectCorsFor(spaOrigin);
    expect(pageErrors).toEqual([]);
  });

  it('gives a page on an untrusted origin no readable response and no sign-in', async () => {
    // The victim is signed in on the SPA (same browser, same cookie jar)...
    await page.goto(`${spaOrigin}/`);
    await page.fill('#signin-form [name=email]', email);
    await page.fill('#signin-form [name=password]', PASSWORD);
    await step('sign in', () => page.click('#signin-form button'));
    const user = await api.t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    const sessionRows = async () =>
      Number(
        (
          await api.t.db
            .selectFrom('sessions')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('user_id', '=', user.id)
            .executeTakeFirstOrThrow()
        ).n,
      );
    const sessionsBefore = await sessionRows();

    // ...and opens a page on another origin, which knows (or guesses) the credentials too.
    const hostile = await context.newPage();
    const simpleSignIns: { status: number; setCookie: string | undefined }[] = [];
    hostile.on('response', async (response) => {
      if (response.url() === `${api.url}/api/auth/sign-in/email` && response.request().method() === 'POST') {
        simpleSignIns.push({ status: response.status(), setCookie: (await response.allHeaders())['set-cookie'] });
      }
    });
    await hostile.goto(`${untrustedOrigin}/untrusted.html`);
    await hostile.fill('[name=email]', email);
    await hostile.fill('[name=password]', PASSWORD);
    await hostile.click('button');
    await hostile.waitForFunction(() => document.getElementById('done')?.textContent === 'done');

    // CORS: no response is readable from this origin (fetch rejects).
    expect(await text('#probe-session', hostile)).toBe('blocked TypeError');
    expect(await text('#probe-signin', hostile)).toBe('blocked TypeError');
    // A request without preflight is sent, but its answer stays opaque...
    expect(await text('#probe-simple', hostile)).toBe('opaque 0');
    // ...and the server refused it: the origin check on the auth routes (403), no cookie, no session.
    await expect.poll(() => simpleSignIns.length).toBeGreaterThan(0);
    for (const attempt of simpleSignIns) {
      expect(attempt.status).toBe(403);
      expect(attempt.setCookie ?? '').not.toContain(SESSION_COOKIE);
    }
    expect(await sessionRows()).toBe(sessionsBefore);
    await hostile.screenshot({ path: join(SCREENSHOT_DIR, 'browser-4-untrusted.png'), fullPage: true });
    await hostile.close();

    // The trusted page is untouched.
    await step('load', () => page.reload());
    expect(await text('#who')).toBe(`Signed in as ${email}`);
  });

  it('registers a passkey from the SPA, signs in with it (multi-factor), and passes an organization that requires MFA', async () => {
    // A platform authenticator that verifies the user (Chrome DevTools Protocol's virtual authenticator).
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    const useOrganization = async () => {
      await page.fill('#switch-form [name=slug]', slug);
      await step('switch organization', () => page.click('#switch-form button'));
    };

    // Signed in by password (the previous test): single-factor.
    await page.goto(`${spaOrigin}/`);
    await step('sign in', async () => {
      await page.fill('#signin-form [name=email]', email);
      await page.fill('#signin-form [name=password]', PASSWORD);
      await page.click('#signin-form button');
    });
    await useOrganization();
    expect(await text('#mfa')).toBe('single-factor');
    await step('add passkey', () => page.click('#add-passkey'));
    expect(await text('#passkeys')).toBe('Passkeys: Browser passkey');
    const user = await api.t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    const stored = await api.t.database.withOwner((owner) =>
      owner.selectFrom('passkeys').select(['name', 'device_type']).where('user_id', '=', user.id).execute(),
    );
    expect(stored).toEqual([{ name: 'Browser passkey', device_type: expect.any(String) }]);
    const added = await accountAuditRows(api.t, user.id, 'user.passkey_added');
    expect(added.map((entry) => entry.metadata)).toEqual([
      { userId: user.id, passkeyId: expect.any(String), name: 'Browser passkey', deviceType: stored[0]!.device_type },
    ]);
    // Nobody locks themselves out: a single-factor session cannot require MFA.
    expect(await stepFails('require MFA', () => page.click('#require-mfa'))).toMatch(/403 MFA_REQUIRED\b/);

    await step('sign out', () => page.click('#sign-out'));
    await step('sign in with passkey', () => page.click('#passkey-signin'));
    expect(await text('#who')).toBe(`Signed in as ${email}`);
    expect(await text('#mfa')).toBe('multi-factor');
    await expectSessionCookieHidden();
    await useOrganization();
    await step('require MFA', () => page.click('#require-mfa'));
    expect(await text('#policy')).toBe('MFA required');
    await step('list roles', () => page.click('#list-roles'));
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'browser-5-passkey-mfa.png'), fullPage: true });

    // A password session is not multi-factor: the organization refuses it.
    await step('sign out', () => page.click('#sign-out'));
    await step('sign in', async () => {
      await page.fill('#signin-form [name=email]', email);
      await page.fill('#signin-form [name=password]', PASSWORD);
      await page.click('#signin-form button');
    });
    await useOrganization();
    expect(await text('#mfa')).toBe('single-factor');
    expect(await stepFails('list roles', () => page.click('#list-roles'))).toMatch(/403 MFA_REQUIRED\b/);
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'browser-6-mfa-required.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  });

  it('renders the /api/docs operation list (Swagger UI assets routed to a local copy)', async () => {
    const dist = swaggerUiDist();
    expect(dist, 'swagger-ui-dist: run `bash .ci/e2e.sh` once (it fetches a pinned copy)').not.toBeNull();
    const docsContext = await browser.newContext();
    const docs = await docsContext.newPage();
    const served: string[] = [];
    const refused: string[] = [];
    const cspViolations: string[] = [];
    // The network is closed: the CDN's files come from the local copy, anything else foreign is refused.
    await docsContext.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === 'localhost' || url.hostname === '127.0.0.1') return route.continue();
      const match = /^\/npm\/swagger-ui-dist(@[^/]+)?\/([\w.-]+)$/.exec(url.pathname);
      if (url.hostname === 'cdn.jsdelivr.net' && match) {
        const file = basename(match[2]!);
        served.push(file);
        return route.fulfill({
          status: 200,
          // The page loads the bundle with crossorigin="anonymous", as from the real CDN.
          headers: {
            'access-control-allow-origin': '*',
            'content-type': file.endsWith('.css') ? 'text/css' : 'text/javascript',
          },
          body: await readFile(join(dist!, file)),
        });
      }
      refused.push(url.href);
      return route.abort();
    });
    docs.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) cspViolations.push(message.text());
    });
    const errors: string[] = [];
    docs.on('pageerror', (error) => errors.push(error.message));

    const spec = (await (await fetch(`${api.url}/api/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const expected = Object.entries(spec.paths)
      .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();

    await docs.goto(`${api.url}/api/docs`);
    await docs.waitForSelector('.opblock', { timeout: 30_000 });
    const rendered = await docs.$$eval('.opblock', (blocks) =>
      blocks.map((block) => {
        const method = block.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '?';
        // A deprecated operation's path carries `.opblock-summary-path__deprecated` instead.
        const pathNode = block.querySelector('.opblock-summary-path, .opblock-summary-path__deprecated');
        const path = pathNode?.getAttribute('data-path') ?? pathNode?.textContent?.trim() ?? '?';
        return `${method} ${path}`;
      }),
    );
    expect(rendered.sort()).toEqual(expected);
    // Spec §4: the old member-role route is shown as deprecated.
    expect(
      await docs.$$eval('.opblock-deprecated .opblock-summary-path__deprecated', (nodes) =>
        nodes.map((n) => n.getAttribute('data-path')),
      ),
    ).toEqual(['/api/roles/members/{id}/role']);
    expect(await docs.textContent('.info .title')).toContain('Gatehouse');
    expect(served.sort()).toEqual(['swagger-ui-bundle.js', 'swagger-ui.css']);
    expect(refused).toEqual([]);
    expect(cspViolations).toEqual([]);
    expect(errors).toEqual([]);
    await docs.screenshot({ path: join(SCREENSHOT_DIR, 'browser-7-api-docs.png'), fullPage: true });
    await docsContext.close();
  });
});
