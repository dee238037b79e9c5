import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { expect } from 'vitest';
import { startExample } from '../../../examples/spa/serve.js';
import { startApiServer } from './api-server.js';
import { freePortPreferring, SCREENSHOT_DIR } from './servers.js';

export const SESSION_COOKIE = 'gatehouse.session_token';
/** The status line of an action refused with 403 STEP_UP_REQUIRED: `<name>: confirm it's you`. */
const CONFIRM = "confirm it's you";

/**
 * Drives one tab of the example SPA (examples/spa) the way its user does:
 * every action reports "<name>: ok" or "<name>: failed" in #status (and the
 * API's answer in #error), which is what the steps wait for.
 */
export class ExamplePage {
  readonly errors: string[] = [];

  constructor(
    readonly page: Page,
    readonly origin: string,
  ) {
    page.on('pageerror', (error) => this.errors.push(error.message));
  }

  text = async (selector: string): Promise<string> => ((await this.page.textContent(selector)) ?? '').trim();

  /** Runs one UI step and waits for the page to report it; fails with the page's own error text. */
  async step(name: string, run: () => Promise<unknown>): Promise<void> {
    const outcome = await this.outcome(name, run);
    expect(outcome, `${name}: ${await this.text('#error')}`).toBe(`${name}: ok`);
  }

  /** Runs one UI step that must fail; answers the page's error line. */
  async stepFails(name: string, run: () => Promise<unknown>): Promise<string> {
    expect(await this.outcome(name, run)).toBe(`${name}: failed`);
    return this.text('#error');
  }

  /**
   * Runs one UI step the API refuses with 403 STEP_UP_REQUIRED: the page asks
   * "Confirm it's you" (examples/spa/src/step-up.ts). Answers the error line.
   */
  async stepNeedsConfirmation(name: string, run: () => Promise<unknown>): Promise<string> {
    expect(await this.outcome(name, run), await this.text('#error')).toBe(`${name}: ${CONFIRM}`);
    expect(await this.page.isVisible('#step-up-form')).toBe(true);
    return this.text('#error');
  }

  /** Answers the open "Confirm it's you" prompt; the refused action `name` then runs once more and must succeed. */
  async confirmIdentity(name: string, values: Record<string, string>): Promise<void> {
    await this.step(name, async () => {
      await this.fill('step-up-form', values);
      await this.page.click('#step-up-form button[type=submit]');
    });
    expect(await this.page.isHidden('#step-up')).toBe(true);
  }

  private async outcome(name: string, run: () => Promise<unknown>): Promise<string> {
    // A previous run of the same action must not count as this one's answer.
    await this.page.evaluate(() => {
      const status = document.getElementById('status');
      if (status) status.textContent = '';
    });
    await run();
    // Also final: the prompt's own failure (a wrong factor), and the prompt opening.
    await this.page.waitForFunction(
      ([n, confirm]) => {
        const status = document.getElementById('status')?.textContent;
        return [`${n}: ok`, `${n}: failed`, `${n}: ${confirm}`, 'step up: failed'].includes(status ?? '');
      },
      [name, CONFIRM] as const,
    );
    return this.text('#status');
  }

  load(path = '/'): Promise<void> {
    return this.step('load', () => this.page.goto(new URL(path, this.origin).href));
  }

  /** Opens a screen from the navigation bar. */
  open(screen: string): Promise<void> {
    return this.step(`show ${screen}`, () => this.page.click(`#nav-${screen}`));
  }

  async fill(formId: string, values: Record<string, string>): Promise<void> {
    for (const [name, value] of Object.entries(values)) await this.page.fill(`#${formId} [name=${name}]`, value);
  }

  /** Fills a form and submits it as the action `name`. */
  submit(formId: string, name: string, values: Record<string, string>): Promise<void> {
    return this.step(name, async () => {
      await this.fill(formId, values);
      await this.page.click(`#${formId} button[type=submit]`);
    });
  }

  async signIn(email: string, password: string): Promise<void> {
    await this.open('account');
    await this.submit('signin-form', 'sign in', { email, password });
  }

  signOut(): Promise<void> {
    return this.step('sign out', () => this.page.click('#sign-out'));
  }

  /** The cells of a table's rows, as text. */
  rows(tableId: string): Promise<string[][]> {
    return this.page.$$eval(`#${tableId} tbody tr`, (rows) =>
      rows.map((row) => [...row.querySelectorAll('td')].map((cell) => (cell.textContent ?? '').trim())),
    );
  }

  async screenshot(file: string): Promise<void> {
    await this.page.screenshot({ path: join(SCREENSHOT_DIR, file), fullPage: true });
  }

  /** The API's session cookie exists for the page's origin, yet its script cannot read it. */
  async expectSessionCookieHidden(context: BrowserContext): Promise<void> {
    // The cookie exists, for the API's host and equally for the SPA's (same host, other port)...
    const jar = await context.cookies(this.origin);
    const session = jar.find((cookie) => cookie.name === SESSION_COOKIE);
    expect(session, `cookies for ${this.origin}: ${jar.map((c) => c.name).join(', ')}`).toBeDefined();
    // ...yet the SPA page's script cannot read it.
    const visible = await this.page.evaluate(() => document.cookie);
    expect(visible, 'document.cookie').not.toContain(SESSION_COOKIE);
    expect(visible, 'document.cookie').not.toContain(session!.value);
    expect(visible, 'document.cookie').not.toContain('session_data');
    expect(session!.httpOnly).toBe(true);
    expect(session!.sameSite).toBe('Lax');
  }
}

/**
 * The API on a real listener (the Node entry's composition) and the example
 * SPA served by `npm run example`'s own code on http://localhost:3000 (or a
 * free port when 3000 is taken), the API trusting exactly that origin.
 */
export async function startExampleStack(env: Record<string, string> = {}) {
  const spaPort = await freePortPreferring(3000);
  const spaOrigin = `http://localhost:${spaPort}`;
  const api = await startApiServer((port) => ({
    APP_URL: spaOrigin,
    CORS_ORIGIN: spaOrigin,
    AUTH_URL: `http://localhost:${port}`,
    DOCS_ENABLED: 'true',
    RATE_LIMIT_ENABLED: 'true',
    RATE_LIMIT_AUTH_LIMIT: '100',
    RATE_LIMIT_GLOBAL_LIMIT: '2000',
    ...env,
  }));
  const example = await startExample({ apiUrl: api.url, port: spaPort }).catch(async (error) => {
    await api.close();
    throw error;
  });
  return {
    api,
    spaOrigin,
    async close() {
      await example.close();
      await api.close();
    },
  };
}
