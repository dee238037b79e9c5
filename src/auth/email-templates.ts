import { oneLine } from '../shared/text.js';
import type { EmailMessage } from './email.js';

/** Every mail carries its link in `text` too (docs/api.md "Email"). */
function linkMail(
  to: string,
  subject: string,
  intro: string,
  action: string,
  url: string,
  outro: string,
): EmailMessage {
  const safeUrl = escapeHtml(url);
  return {
    to,
    subject,
    html: `<p>${escapeHtml(intro)}</p><p><a href="${safeUrl}">${escapeHtml(action)}</a></p><p>${escapeHtml(outro)}</p>`,
    text: `${intro}\n\n${action}: ${url}\n\n${outro}`,
  };
}

export const emails = {
  verification: (to: string, url: string) =>
    linkMail(
      to,
      'Verify your email address',
      'Confirm this address to finish signing up.',
      'Verify email',
      url,
      'If you did not sign up, ignore this message.',
    ),
  magicLink: (to: string, url: string) =>
    linkMail(
      to,
      'Your sign-in link',
      'Use this link to sign in. It works once and expires in 5 minutes.',
      'Sign in',
      url,
      'If you did not ask for it, ignore this message.',
    ),
  resetPassword: (to: string, url: string) =>
    linkMail(
      to,
      'Reset your password',
      'Someone asked to reset the password of this account.',
      'Reset password',
      url,
      'If it was not you, ignore this message: your password stays as it is.',
    ),
  existingAccount: (to: string, url: string) =>
    linkMail(
      to,
      'Sign-up attempt with your address',
      'Someone tried to create an account with this address, which already has one.',
      'Sign in',
      url,
      'If it was not you, ignore this message; if you forgot your password, reset it from the sign-in page.',
    ),
  /** The names are the inviter's choice: quoted and inert (`inertText`), so the mail's one link is `url`. */
  invitation: (to: string, url: string, organizationName: string, inviterName: string) =>
    linkMail(
      to,
      `Join ${inertText(organizationName)}`,
      `${inertText(inviterName)} invited you to join ${inertText(organizationName)}.`,
      'Accept invitation',
      url,
      'If you do not know them, ignore this message.',
    ),
};

// Invisible format characters (zero-width, bidirectional overrides and isolates), which make a name read as other text.
const INVISIBLE = /[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]/g;
// A full stop (ASCII, ideographic, full-width, half-width) joining two parts of a word: what makes a host name.
const JOINING_DOT = /(?<=\S)[.\u3002\uff0e\uff61](?=[\p{L}\p{N}])/gu;

/**
 * Text someone else chose (an organization's or a person's name), as a mail
 * shows it: on one line, without invisible characters, quoted, and with
 * nothing a mail client would turn into a link: `://` is written `[:]//`
 * and a dot inside a word `[.]` (the "defanged" form of security advisories),
 * so neither `https://evil.example` nor `evil.example` or `www.evil.example`
 * is recognised as an address, in the text part or in the HTML one (which
 * escapes it besides).
 */
export function inertText(value: string): string {
  // On one line: a line break in a name would let it write lines of its own.
  const flat = oneLine(value).replace(INVISIBLE, '').trim();
  // A quote inside would close the quotation early and let the rest read as the mail's own words.
  return `"${flat.replaceAll('"', "'").replaceAll('://', '[:]//').replace(JOINING_DOT, '[.]')}"`;
}

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
