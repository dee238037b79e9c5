import type { EmailMessage } from './email.js';

/** Every mail carries its link in `text` too (API.md "Development email"). */
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
  invitation: (to: string, url: string, organizationName: string, inviterName: string) =>
    linkMail(
      to,
      `Join ${organizationName}`,
      `${inviterName} invited you to join ${organizationName}.`,
      'Accept invitation',
      url,
      'If you do not know them, ignore this message.',
    ),
};

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
