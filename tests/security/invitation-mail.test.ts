/**
 * The invitation mail carries text the inviter chose: the organization's
 * name and their own. Whatever those names hold, the mail as the mailer
 * receives it has one link, the invitation on APP_URL, and shows the names
 * as quoted, inert text: no address a mail client would turn into a link
 * (scheme, `www.`, bare host names, in ASCII or CJK full stops), no markup
 * in the HTML part, no line of their own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmailMessage } from '../../src/auth/email.js';
import { inertText } from '../../src/auth/email-templates.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { createOrganization, invite, uniqueSlug } from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';

/** Names an organization can be given through the library's route (no control characters, at most 100). */
const ORGANIZATION_NAMES = [
  'https://evil.example/login?next=%2Faccount',
  'Visit www.evil.example to claim',
  'evil.example',
  'EVIL.EXAMPLE/reset',
  'evil\u3002example and evil\uff0eexample and evil\uff61example',
  '<a href="https://evil.example">Click here</a>',
  '<img src=x onerror=alert(1)>',
  '[Sign in](https://evil.example)',
  'support@evil.example',
  'javascript://evil.example/%0Aalert(1)',
  'Acme" invited you to "Evil',
  'Acme \u202eelpmaxe.live\u202c',
  'ftp://203.0.113.7/payload',
  'HTTP://EVIL.EXAMPLE',
];

/** An inviter's name as the database may hold it (written directly: not every path that sets it is a form). */
const INVITER_NAMES = [
  'Admin (reset at https://evil.example/reset)',
  'Team\r\n\r\nUrgent: https://evil.example/verify\r\n',
  'www.evil.example',
  '\u200bevil\u200b.\u200bexample',
  'Eve <script>alert(1)</script>',
];

/** Anything in a mail's text a client could take for an address: a scheme, `www.`, a dot joining two word characters (an e-mail address needs one too). */
const ADDRESS_LIKE = /[a-z][a-z0-9+.-]*:\/\/|www[.\u3002\uff0e\uff61]|[\p{L}\p{N}][.\u3002\uff0e\uff61][\p{L}\p{N}]/iu;

describe('invitation mail with hostile names', () => {
  let t: TestApp;
  const sent: EmailMessage[] = [];

  beforeAll(async () => {
    t = await createTestApp({
      mailer: {
        // Captured, and logged as the development mailer does (the sign-in helpers read the log).
        send: async (message) => {
          sent.push(message);
          t.logger.info('email', { to: message.to, subject: message.subject, text: message.text });
        },
      },
    });
  });
  afterAll(() => t?.close());

  /** The invitation mail `inviterName` sends for an organization called `organizationName`. */
  async function invitationMail(organizationName: string, inviterName: string): Promise<EmailMessage> {
    const inviter = await signedInUser(t, { name: inviterName });
    await createOrganization(t, inviter, { name: organizationName, slug: uniqueSlug() });
    const to = uniqueEmail('invitee');
    await expectStatus(await invite(t, inviter, { email: to, role: 'member' }), 200);
    const mail = sent.filter((m) => m.to === to).at(-1);
    if (!mail) throw new Error(`no invitation mail to ${to}`);
    return mail;
  }

  /** What is wrong with one mail, if anything. */
  function problemsOf(mail: EmailMessage, names: string[]): string[] {
    const problems: string[] = [];
    const appUrl = t.config.auth.appUrl;
    const text = mail.text ?? '';
    // Text: the invitation link exactly once, on APP_URL; with it removed, nothing address-like.
    const links = [...text.matchAll(/[a-z][a-z0-9+.-]*:\/\/\S+/gi)].map((m) => m[0]);
    if (links.length !== 1 || !links[0]!.startsWith(`${appUrl}/accept-invitation/`))
      problems.push(`text links ${JSON.stringify(links)}`);
    const textRest = text.replace(links[0] ?? '', '');
    if (ADDRESS_LIKE.test(textRest)) problems.push(`text: ${JSON.stringify(textRest.match(ADDRESS_LIKE)?.[0])}`);
    // Text: the template's five lines (intro, blank, link, blank, outro), none written by a name.
    if (text.split('\n').length !== 5) problems.push(`text lines ${JSON.stringify(text)}`);
    // Subject: one line, nothing address-like.
    if (/[\r\n]/.test(mail.subject) || ADDRESS_LIKE.test(mail.subject))
      problems.push(`subject ${JSON.stringify(mail.subject)}`);
    // HTML: one anchor, to the same link; no other tag than the template's; nothing address-like outside the anchor's href.
    const anchors = [...mail.html.matchAll(/<a\b[^>]*>/gi)].map((m) => m[0]);
    if (anchors.length !== 1 || anchors[0] !== `<a href="${links[0]}">`) problems.push(`anchors ${anchors.join(' ')}`);
    const htmlRest = mail.html.replace(anchors[0] ?? '', '');
    const tags = [...htmlRest.matchAll(/<\/?([a-z][\w-]*)/gi)].map((m) => m[1]!.toLowerCase());
    if (tags.some((tag) => tag !== 'p' && tag !== 'a')) problems.push(`tags ${tags.join(',')}`);
    if (ADDRESS_LIKE.test(htmlRest)) problems.push(`html: ${JSON.stringify(htmlRest.match(ADDRESS_LIKE)?.[0])}`);
    // The names are there, recognisably, as quoted text.
    for (const name of names) if (!text.includes(inertText(name))) problems.push(`text lacks ${inertText(name)}`);
    return problems;
  }

  it('has one link, to APP_URL, and the names as inert text, for every hostile organization name', async () => {
    const problems: string[] = [];
    for (const [index, organizationName] of ORGANIZATION_NAMES.entries()) {
      const inviterName = INVITER_NAMES[index % INVITER_NAMES.length]!;
      const mail = await invitationMail(organizationName, inviterName);
      for (const problem of problemsOf(mail, [organizationName, inviterName]))
        problems.push(`${JSON.stringify(organizationName)} / ${JSON.stringify(inviterName)}: ${problem}`);
    }
    expect(problems).toEqual([]);
  });

  it('shows a plain name as it is, quoted, and the invitation still opens', async () => {
    const mail = await invitationMail('Acme Widgets, Inc.', 'Ada Lovelace');
    expect(mail.subject).toBe('Join "Acme Widgets, Inc."');
    expect(mail.text).toContain('"Ada Lovelace" invited you to join "Acme Widgets, Inc.".');
    expect(mail.html).toContain('&#34;Ada Lovelace&#34; invited you to join &#34;Acme Widgets, Inc.&#34;.');
    const link = /https?:\/\/\S+/.exec(mail.text ?? '')![0];
    const invitee = await signedInUser(t, { email: mail.to });
    const invitationId = new URL(link).pathname.split('/').at(-1);
    await expectStatus(
      await call(t, '/api/auth/organization/accept-invitation', { body: { invitationId }, jar: invitee.jar }),
      200,
    );
  });

  it('writes a hostile name in a form no one mistakes for a link, without losing it', () => {
    expect(inertText('https://evil.example/a.b')).toBe('"https[:]//evil[.]example/a[.]b"');
    expect(inertText('Team\r\nUrgent\u2028now')).toBe('"Team Urgent now"');
    expect(inertText('\u202eevil\u200b.example\ufeff')).toBe('"evil[.]example"');
    expect(inertText('say "hi"')).toBe(`"say 'hi'"`);
    expect(inertText('J. Doe & Co.')).toBe('"J. Doe & Co."');
  });
});
