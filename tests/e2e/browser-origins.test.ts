import { mkdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkIn, mailsTo } from '../support/http.js';
import { PASSWORD, uniqueEmail } from '../support/users.js';
import type { ApiServer } from './support/api-server.js';
import { launchChromium } from './support/chromium.js';
import { ExamplePage, SESSION_COOKIE, startExampleStack } from './support/example-page.js';
import { SCREENSHOT_DIR, startStaticServer, swaggerUiDist } from './support/servers.js';

/**
 * The other side of the example's origin: a page on an origin the API does
 * not trust (tests/e2e/hostile, the only test-made page) gets no readable
 * response and no sign-in with the visitor's cookies, when CORS reflects any
 * origin or the auth library's origin check is off
 * (GATEHOUSE_E2E_BREAK=cors-any-origin / trust-any-origin), this fails. And
 * /api/docs renders the whole OpenAPI document under the service's CSP.
 */
describe('origins in Chromium: an untrusted page, and the docs', () => {
  let stack: Awaited<ReturnType<typeof startExampleStack>>;
  let api: ApiServer;
  let untrusted: Awaited<ReturnType<typeof startStaticServer>>;
  let untrustedOrigin: string;
  let browser: Browser;
  let context: BrowserContext;
  let ui: ExamplePage;
  const email = uniqueEmail('origins');

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    stack = await startExampleStack();
    api = stack.api;
    untrusted = await startStaticServer({ port: 3001, apiUrl: () => api.url });
    untrustedOrigin = `http://127.0.0.1:${untrusted.port}`;
    browser = await launchChromium();
    context = await browser.newContext();
    ui = new ExamplePage(await context.newPage(), stack.spaOrigin);
    // A verified account, made through the example.
    await ui.load();
    await ui.submit('signup-form', 'sign up', { name: 'Otto Origins', email, password: PASSWORD });
    await ui.step('load', () => ui.page.goto(linkIn(mailsTo(api.t, email).at(-1)!.text)));
    await ui.signOut();
  });

  afterAll(async () => {
    await browser?.close();
    await untrusted?.close();
    await stack?.close();
  });

  const textOf = async (page: Page, selector: string) => ((await page.textContent(selector)) ?? '').trim();

  it('gives a page on an untrusted origin no readable response and no sign-in', async () => {
    // The victim is signed in on the SPA (same browser, same cookie jar)...
    await ui.load();
    await ui.signIn(email, PASSWORD);
    expect(await ui.text('#who')).toBe(`Signed in as ${email}`);
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
    expect(await textOf(hostile, '#probe-session')).toBe('blocked TypeError');
    expect(await textOf(hostile, '#probe-signin')).toBe('blocked TypeError');
    // A request without preflight is sent, but its answer stays opaque...
    expect(await textOf(hostile, '#probe-simple')).toBe('opaque 0');
    // ...and the server refused it: the origin check on the auth routes (403), no cookie, no session.
    await expect.poll(() => simpleSignIns.length).toBeGreaterThan(0);
    for (const attempt of simpleSignIns) {
      expect(attempt.status).toBe(403);
      expect(attempt.setCookie ?? '').not.toContain(SESSION_COOKIE);
    }
    expect(await sessionRows()).toBe(sessionsBefore);
    await hostile.screenshot({ path: join(SCREENSHOT_DIR, 'origins-1-untrusted.png'), fullPage: true });
    await hostile.close();

    // The trusted page is untouched.
    await ui.step('load', () => ui.page.reload());
    expect(await ui.text('#who')).toBe(`Signed in as ${email}`);
    expect(ui.errors).toEqual([]);
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
    // The old member-role route is shown as deprecated (docs/api.md "Members and ownership").
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
    await docs.screenshot({ path: join(SCREENSHOT_DIR, 'origins-2-api-docs.png'), fullPage: true });
    await docsContext.close();
  });
});
