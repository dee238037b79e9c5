import { mkdir } from 'node:fs/promises';
import type { Browser, BrowserContext, Response as PwResponse } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkIn, mailsTo } from '../support/http.js';
import { authenticatorFor, freshCode } from '../support/mfa.js';
import { ALL_PERMISSIONS } from '../support/orgs.js';
import { PASSWORD, uniqueEmail } from '../support/users.js';
import { launchChromium } from './support/chromium.js';
import { ExamplePage, SESSION_COOKIE, startExampleStack } from './support/example-page.js';
import { SCREENSHOT_DIR } from './support/servers.js';

/**
 * Debian's chromium (playwright-core) drives the example SPA (examples/spa,
 * served by `npm run example`'s own code on the trusted APP_URL) against the
 * Node API on another port of localhost, screen by screen, as its user would:
 * every call is a cross-origin fetch with credentials, through better-auth's
 * client and the typed client. A screenshot of each screen goes to
 * screenshots/ (CI's artifacts).
 *
 * What breaks it (tests/e2e/support/api-server.ts GATEHOUSE_E2E_BREAK modes):
 * without `Access-Control-Allow-Credentials`, or with CORS_ORIGIN not naming
 * the SPA, every fetch of the page rejects and the first load already fails;
 * with APP_URL not trusted by the auth library, sign-up answers 403; without
 * HttpOnly, `document.cookie` lists the session cookie
 * (expectSessionCookieHidden). The untrusted-origin side is
 * browser-origins.test.ts.
 */
describe('the example SPA in Chromium against the Node API', () => {
  let stack: Awaited<ReturnType<typeof startExampleStack>>;
  let browser: Browser;
  let context: BrowserContext;
  let ui: ExamplePage;
  const email = uniqueEmail('example');
  const invitee = uniqueEmail('invitee');
  const slug = `example-${crypto.randomUUID().slice(0, 8)}`;
  const otherSlug = `${slug}-b`;
  const apiResponses: PwResponse[] = [];
  let backupCodes: string[] = [];

  beforeAll(async () => {
    await mkdir(SCREENSHOT_DIR, { recursive: true });
    stack = await startExampleStack({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    browser = await launchChromium();
    context = await browser.newContext();
    const page = await context.newPage();
    page.on('response', (response) => {
      if (response.url().startsWith(stack.api.url) && response.request().resourceType() === 'fetch')
        apiResponses.push(response);
    });
    ui = new ExamplePage(page, stack.spaOrigin);
  });

  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  /** A new session has no active organization: choose the first one the tests made. */
  async function useOrganization(): Promise<void> {
    await ui.open('organizations');
    await ui.step('switch organization', () => ui.page.click(`#organizations button[data-slug="${slug}"]`));
    expect(await ui.text('#org')).toBe(`Organization: Example Org (${slug})`);
  }

  const lastMailLink = (to: string) => {
    const mail = mailsTo(stack.api.t, to).at(-1);
    expect(mail, `mail to ${to}`).toBeDefined();
    return linkIn(mail!.text);
  };

  /** Signs a new user up in its own browser context and follows the verification link. */
  async function signUp(page: ExamplePage, name: string, address: string): Promise<void> {
    await page.load();
    expect(await page.text('#who')).toBe('Signed out');
    await page.submit('signup-form', 'sign up', { name, email: address, password: PASSWORD });
    expect(await page.text('#account-notice')).toBe(
      `Check ${address} for the verification link (in development the API prints the mail in its log).`,
    );
    // The development mailer's log line (docs/api.md "Email") carries the link.
    const link = lastMailLink(address);
    expect(link.startsWith(`${stack.api.url}/api/auth/verify-email?token=`), link).toBe(true);
    // The user clicks it: the API verifies, signs in and redirects back to the SPA.
    await page.step('load', () => page.page.goto(link));
    expect(new URL(page.page.url()).origin).toBe(stack.spaOrigin);
    expect(await page.text('#notice')).toBe('Email verified');
    expect(await page.text('#who')).toBe(`Signed in as ${address}`);
  }

  it('signs up, follows the verification link, signs in by password and by magic link', async () => {
    await ui.load();
    expect(await ui.page.title()).toBe('Gatehouse example');
    await ui.screenshot('example-01-signed-out.png');
    await signUp(ui, 'Ada Example', email);
    await ui.expectSessionCookieHidden(context);
    expect(await ui.text('#profile')).toContain(`${email} (verified)`);
    await ui.screenshot('example-02-account.png');

    await ui.signOut();
    expect(await ui.text('#who')).toBe('Signed out');
    expect((await context.cookies(stack.spaOrigin)).filter((c) => c.name === SESSION_COOKIE && c.value)).toEqual([]);
    await ui.signIn(email, PASSWORD);
    expect(await ui.text('#who')).toBe(`Signed in as ${email}`);
    expect(await ui.text('#mfa')).toBe('single-factor');

    await ui.signOut();
    await ui.submit('magic-link-form', 'send magic link', { email });
    expect(await ui.text('#account-notice')).toBe(`Check ${email} for the sign-in link.`);
    const link = lastMailLink(email);
    expect(link.startsWith(`${stack.api.url}/api/auth/magic-link/verify?token=`), link).toBe(true);
    await ui.step('load', () => ui.page.goto(link));
    expect(new URL(ui.page.url()).origin).toBe(stack.spaOrigin);
    expect(await ui.text('#who')).toBe(`Signed in as ${email}`);
    await ui.expectSessionCookieHidden(context);
  });

  it('creates two organizations and switches between them', async () => {
    await ui.open('roles');
    expect(await ui.text('#screen-roles')).toContain('Create or choose an organization first');
    await ui.open('organizations');
    await ui.submit('org-form', 'create organization', { name: 'Example Org', slug });
    expect(await ui.text('#org')).toBe(`Organization: Example Org (${slug})`);
    // The Owner role's permissions (all of them) reach the session.
    expect(await ui.text('#permissions')).toBe(`(${ALL_PERMISSIONS.length} permissions)`);
    await ui.submit('org-form', 'create organization', { name: 'Second Org', slug: otherSlug });
    expect(await ui.text('#org')).toBe(`Organization: Second Org (${otherSlug})`);
    expect((await ui.rows('organizations')).map((cells) => cells.slice(0, 3))).toEqual(
      expect.arrayContaining([
        ['Example Org', slug, 'Use'],
        ['Second Org', otherSlug, 'active'],
      ]),
    );
    await ui.screenshot('example-03-organizations.png');
    await ui.step('switch organization', () => ui.page.click(`#organizations button[data-slug="${slug}"]`));
    expect(await ui.text('#org')).toBe(`Organization: Example Org (${slug})`);
  });

  it('creates a role from permission checkboxes, edits it, and deletes another', async () => {
    await ui.open('roles');
    expect((await ui.rows('roles')).map((cells) => cells[0])).toEqual(['Owner', 'Admin', 'Member', 'Viewer']);
    await ui.fill('role-form', { name: 'Auditors', description: 'Read-only reviewers' });
    await ui.page.check('#role-form input[value="roles:read"]');
    await ui.page.check('#role-form input[value="members:read"]');
    await ui.step('create role', () => ui.page.click('#role-form button[type=submit]'));
    expect(await ui.text('#role-created')).toBe('Created role Auditors (auditors) with members:read, roles:read');

    await ui.step('edit role', () => ui.page.click('#roles button[data-slug="auditors"]:text("Edit")'));
    expect(await ui.page.isChecked('#role-edit-form input[value="roles:read"]')).toBe(true);
    await ui.page.check('#role-edit-form input[value="organizations:read"]');
    await ui.step('save role', () => ui.page.click('#role-edit-form button[type=submit]'));
    expect(await ui.rows('roles')).toContainEqual([
      'Auditors',
      'auditors',
      'members:read, organizations:read, roles:read',
      'EditDelete',
    ]);

    await ui.submit('role-form', 'create role', { name: 'Temporary' });
    expect(await ui.text('#role-created')).toBe('Created role Temporary (temporary) with no permissions');
    await ui.screenshot('example-04-roles.png');
    await ui.step('delete role', () => ui.page.click('#roles button[data-slug="temporary"]:text("Delete")'));
    expect((await ui.rows('roles')).map((cells) => cells[0])).toEqual([
      'Owner',
      'Admin',
      'Member',
      'Viewer',
      'Auditors',
    ]);
  });

  it('invites a member, who accepts in their own browser; changes their role; cancels an invitation; removes the member', async () => {
    await ui.open('members');
    expect((await ui.rows('members')).map((cells) => cells[1])).toEqual([email]);
    await ui.fill('invite-form', { email: invitee });
    await ui.page.selectOption('#invite-form select[name=role]', 'auditors');
    await ui.step('invite member', () => ui.page.click('#invite-form button[type=submit]'));
    expect((await ui.rows('invitations')).map((cells) => cells.slice(0, 2))).toEqual([[invitee, 'auditors']]);

    const inviteeContext = await browser.newContext();
    try {
      const other = new ExamplePage(await inviteeContext.newPage(), stack.spaOrigin);
      await signUp(other, 'Ivy Invitee', invitee);
      await other.open('organizations');
      expect((await other.rows('my-invitations')).map((cells) => cells.slice(0, 2))).toEqual([
        ['Example Org', 'auditors'],
      ]);
      await other.screenshot('example-05-invitation.png');
      await other.step('accept invitation', () => other.page.click('#my-invitations button:text("Accept")'));
      expect(await other.text('#org')).toBe(`Organization: Example Org (${slug})`);
      expect(await other.text('#permissions')).toBe('(3 permissions)');
      expect(other.errors).toEqual([]);
    } finally {
      await inviteeContext.close();
    }

    await ui.open('members');
    expect((await ui.rows('members')).map((cells) => cells[1])).toEqual([email, invitee]);
    expect(await ui.rows('invitations')).toEqual([]);
    const row = `#members [data-email="${invitee}"]`;
    expect(await ui.page.$eval(`${row} select`, (s) => (s as HTMLSelectElement).selectedOptions[0]?.text)).toBe(
      'Auditors',
    );
    await ui.page.selectOption(`${row} select`, { label: 'Viewer' });
    await ui.step('change role', () => ui.page.click(`${row} button`));
    expect(await ui.page.$eval(`${row} select`, (s) => (s as HTMLSelectElement).selectedOptions[0]?.text)).toBe(
      'Viewer',
    );

    const someone = uniqueEmail('cancelled');
    await ui.submit('invite-form', 'invite member', { email: someone });
    expect((await ui.rows('invitations')).map((cells) => cells.slice(0, 2))).toEqual([[someone, 'member']]);
    await ui.screenshot('example-06-members.png');
    await ui.step('cancel invitation', () => ui.page.click(`#invitations button[data-email="${someone}"]`));
    expect(await ui.rows('invitations')).toEqual([]);
    await ui.step('remove member', () => ui.page.click(`#members button[data-email="${invitee}"]`));
    expect((await ui.rows('members')).map((cells) => cells[1])).toEqual([email]);
  });

  it('creates an API key (shown once) after confirming it is them, and revokes it', async () => {
    await ui.open('api-keys');
    await ui.fill('key-form', { name: 'Example key' });
    await ui.page.check('#key-form input[value="roles:read"]');
    // A sensitive action: the magic-link session of an account with a password never proved the password.
    expect(await ui.stepNeedsConfirmation('create API key', () => ui.page.click('#key-form button[type=submit]'))).toBe(
      'create API key: 403 STEP_UP_REQUIRED Recent authentication required',
    );
    expect(await ui.text('#step-up-reason')).toBe(
      'To create API key, enter your password. Sensitive actions need a recent sign-in.',
    );
    expect(
      await ui.page.locator('#step-up-form input').evaluateAll((inputs) => inputs.map((i) => i.getAttribute('name'))),
    ).toEqual(['password']);
    expect(await ui.rows('api-keys')).toEqual([]);
    await ui.screenshot('example-07-step-up.png');
    // A wrong password: 401, the prompt stays open, no key.
    expect(
      await ui.stepFails('step up', async () => {
        await ui.fill('step-up-form', { password: 'not the password at all' });
        await ui.page.click('#step-up-form button[type=submit]');
      }),
    ).toBe('step up: 401 INVALID_CREDENTIALS Invalid credentials');
    expect(await ui.page.isVisible('#step-up-form')).toBe(true);
    expect(await ui.text('#api-key')).toBe('');
    // The password: the session is fresh, and the refused action runs again, once.
    await ui.confirmIdentity('create API key', { password: PASSWORD });
    const key = await ui.text('#api-key');
    expect(key).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    const listed = await ui.rows('api-keys');
    expect(listed.map((cells) => cells.slice(0, 3))).toEqual([
      ['Example key', `sk_live_…${key.slice(-4)}`, 'roles:read'],
    ]);
    expect(listed.flat().join(' ')).not.toContain(key);
    await ui.screenshot('example-07-api-keys.png');

    await ui.step('revoke API key', () => ui.page.click('#api-keys button[data-name="Example key"]'));
    expect((await ui.rows('api-keys'))[0]?.[5]).toMatch(/^revoked /);
    // Shown once: gone from the page after the next render.
    expect(await ui.text('#api-key')).toBe('');
    expect(await ui.page.isVisible('#api-key-once')).toBe(false);
  });

  it('creates a webhook endpoint (secret once), sends a test event and lists its deliveries', async () => {
    await ui.open('webhooks');
    const url = 'http://127.0.0.1:9/hooks/gatehouse';
    await ui.submit('webhook-form', 'create webhook', { url, events: 'member.added, role.updated' });
    expect(await ui.text('#webhook-secret')).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(await ui.rows('webhooks')).toEqual([
      [url, 'member.added, role.updated', 'enabled', 'Send testDeliveriesDelete'],
    ]);
    await ui.step('send test event', () => ui.page.click(`#webhooks [data-url="${url}"] button.test`));
    expect(await ui.text('#webhook-secret')).toBe('');
    expect((await ui.rows('deliveries')).map((cells) => cells.slice(0, 2))).toEqual([['webhook.test', 'pending']]);
    await ui.screenshot('example-08-webhooks.png');
  });

  it('reads the audit log of what the screens did, newest first', async () => {
    await ui.open('audit-log');
    const actions = (await ui.rows('audit-log')).map((cells) => cells[1]);
    expect(actions.slice(0, 3)).toEqual(['webhook.created', 'api_key.revoked', 'api_key.created']);
    expect(actions).toEqual(
      expect.arrayContaining([
        'api_key.created',
        'member.removed',
        'member.role_changed',
        'member.added',
        'role.deleted',
        'role.updated',
        'role.created',
      ]),
    );
    await ui.screenshot('example-09-audit-log.png');
  });

  it('adds a passkey, signs in with it, requires MFA in the organization, and refuses a password session there', async () => {
    // A platform authenticator that verifies the user (Chrome DevTools Protocol's virtual authenticator).
    const cdp = await context.newCDPSession(ui.page);
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
    await ui.open('security');
    expect(await ui.text('#mfa')).toBe('single-factor');
    await ui.submit('passkey-form', 'add passkey', { name: 'Example laptop' });
    expect((await ui.rows('passkeys')).map((cells) => cells[0])).toEqual(['Example laptop']);
    expect(await ui.text('#policy')).toBe('MFA optional in this organization');
    // Nobody locks themselves out: a single-factor session cannot require MFA.
    expect(await ui.stepFails('require MFA', () => ui.page.click('#require-mfa'))).toMatch(/403 MFA_REQUIRED\b/);

    await ui.signOut();
    await ui.open('account');
    await ui.step('sign in with passkey', () => ui.page.click('#passkey-signin'));
    expect(await ui.text('#who')).toBe(`Signed in as ${email}`);
    expect(await ui.text('#mfa')).toBe('multi-factor');
    await ui.expectSessionCookieHidden(context);
    await useOrganization();
    await ui.open('security');
    await ui.step('require MFA', () => ui.page.click('#require-mfa'));
    expect(await ui.text('#policy')).toBe('MFA required in this organization');
    await ui.screenshot('example-10-passkeys-policy.png');

    await ui.signOut();
    await ui.signIn(email, PASSWORD);
    expect(await ui.text('#mfa')).toBe('single-factor');
    await useOrganization();
    expect(await ui.stepFails('show roles', () => ui.page.click('#nav-roles'))).toMatch(/403 MFA_REQUIRED\b/);
    await ui.screenshot('example-11-mfa-required.png');
  });

  it('enables TOTP from the security screen, then signs in with a code and with a backup code', async () => {
    await ui.open('security');
    expect(await ui.text('#policy')).toBe(
      'This organization requires MFA: add a second factor above, then sign in with it.',
    );
    await ui.submit('totp-enable-form', 'enable two-factor', { password: PASSWORD });
    const authenticator = authenticatorFor(await ui.text('#totp-uri'));
    backupCodes = await ui.page.locator('#backup-codes li').allTextContents();
    expect(backupCodes).toHaveLength(10);
    await ui.screenshot('example-12-two-factor.png');
    await ui.submit('totp-confirm-form', 'confirm code', { code: await freshCode(authenticator) });
    expect(await ui.text('#two-factor')).toBe('Two-factor sign-in is on.');
    // The enabling session became multi-factor: the organization lets it in.
    expect(await ui.text('#mfa')).toBe('multi-factor');
    await ui.open('roles');

    await ui.signOut();
    await ui.signIn(email, PASSWORD);
    expect(await ui.text('#who')).toBe('Signed out');
    expect(await ui.page.isVisible('#totp-form')).toBe(true);
    await ui.submit('totp-form', 'verify code', { code: await freshCode(authenticator) });
    expect(await ui.text('#mfa')).toBe('multi-factor');

    await ui.signOut();
    await ui.signIn(email, PASSWORD);
    await ui.submit('backup-code-form', 'use backup code', { code: backupCodes[0]! });
    expect(await ui.text('#who')).toBe(`Signed in as ${email}`);
    expect(await ui.text('#mfa')).toBe('multi-factor');
    await useOrganization();
    await ui.open('roles');
  });

  it('schedules the account for deletion once confirmed with the password and a backup code (tenant routes refuse it), and cancels it', async () => {
    // Eleven minutes later by the API's clock: the sign-in no longer counts as recent (STEP_UP_MAX_AGE, 600 s).
    stack.api.t.clock.advance(11 * 60_000);
    await ui.open('account');
    expect(await ui.stepNeedsConfirmation('schedule deletion', () => ui.page.click('#schedule-deletion'))).toMatch(
      /403 STEP_UP_REQUIRED\b/,
    );
    // Two-factor is on: the prompt asks for a code too.
    expect(await ui.text('#step-up-reason')).toBe(
      'To schedule deletion, enter your password and a code from your authenticator app (or one of your backup codes). Sensitive actions need a recent sign-in.',
    );
    // Cancelled: nothing happens.
    expect(await ui.stepFails('schedule deletion', () => ui.page.click('#step-up-cancel'))).toBe(
      'schedule deletion: not confirmed',
    );
    expect(await ui.page.isHidden('#step-up')).toBe(true);
    expect(await ui.text('#deletion')).toBe('Not scheduled for deletion.');
    // The password alone is not every factor of this account.
    await ui.stepNeedsConfirmation('schedule deletion', () => ui.page.click('#schedule-deletion'));
    expect(
      await ui.stepFails('step up', async () => {
        await ui.fill('step-up-form', { password: PASSWORD });
        await ui.page.click('#step-up-form button[type=submit]');
      }),
    ).toBe('step up: 401 INVALID_CREDENTIALS Invalid credentials');
    await ui.confirmIdentity('schedule deletion', { password: PASSWORD, backupCode: backupCodes[1]! });
    expect(await ui.text('#deletion')).toMatch(/^Scheduled for deletion since /);
    expect(await ui.text('#account-notice')).toMatch(/^Your account will be purged after /);
    await ui.screenshot('example-13-deletion.png');
    expect(await ui.stepFails('show roles', () => ui.page.click('#nav-roles'))).toMatch(
      /403 ACCOUNT_SCHEDULED_FOR_DELETION\b/,
    );
    await ui.open('account');
    await ui.step('cancel deletion', () => ui.page.click('#cancel-deletion'));
    expect(await ui.text('#deletion')).toBe('Not scheduled for deletion.');
    await ui.open('roles');
  });

  it('made every call cross-origin with credentials, answered for its origin, and raised no page error', async () => {
    expect(apiResponses.length).toBeGreaterThan(50);
    for (const response of apiResponses) {
      const headers = response.headers();
      const label = `${response.request().method()} ${response.url()}`;
      expect(headers['access-control-allow-origin'], label).toBe(stack.spaOrigin);
      expect(headers['access-control-allow-credentials'], label).toBe('true');
    }
    expect(ui.errors).toEqual([]);
  });
});
