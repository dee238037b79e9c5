import type { EmailMessage, Mailer } from './email.js';
import { escapeHtml, inertText } from './email-templates.js';

/**
 * docs/security.md "Security notices": what changed on an account, mailed to
 * its address so that its owner learns of a change they did not make.
 */
export type SecurityEvent =
  | { kind: 'passkey_added'; passkeyName?: string | null }
  | { kind: 'passkey_removed' }
  | { kind: 'two_factor_enabled' }
  | { kind: 'two_factor_disabled' }
  | { kind: 'backup_codes_regenerated' }
  | { kind: 'password_changed' }
  | { kind: 'password_reset' }
  | { kind: 'account_linked'; providerId: string }
  | { kind: 'api_key_created'; keyName: string; organizationName?: string | null };

/** Where and when the change was made: the client's address and user agent as the service saw them. */
export interface NoticeOrigin {
  at: Date;
  ip: string | null;
  userAgent: string | null;
}

export interface SecurityNotice {
  to: string;
  event: SecurityEvent;
  origin: NoticeOrigin;
  /** The app's address (APP_URL), where the owner signs in to undo it. */
  appUrl: string;
}

const PROVIDER_NAMES: Readonly<Record<string, string>> = { github: 'GitHub', google: 'Google' };

/** A provider's display name (`github` → GitHub); an unknown id as it is. */
export function providerName(providerId: string): string {
  return PROVIDER_NAMES[providerId] ?? providerId;
}

const UNDO_SIGN_IN = 'change your password (or reset it from the sign-in page), and sign out your other sessions';

/** Subject, what happened, and what to do if it was not the owner. */
function describe(event: SecurityEvent): { subject: string; what: string; ifNotYou: string } {
  switch (event.kind) {
    case 'passkey_added':
      return {
        subject: 'A passkey was added to your account',
        what: event.passkeyName
          ? `A passkey named ${inertText(event.passkeyName)} was added to your account. It can sign in without your password.`
          : 'A passkey was added to your account. It can sign in without your password.',
        ifNotYou: `sign in, delete the passkey, ${UNDO_SIGN_IN}.`,
      };
    case 'passkey_removed':
      return {
        subject: 'A passkey was removed from your account',
        what: 'A passkey was removed from your account; it can no longer sign in.',
        ifNotYou: `someone else holds a session of your account: ${UNDO_SIGN_IN}.`,
      };
    case 'two_factor_enabled':
      return {
        subject: 'Two-factor authentication was turned on',
        what: 'Two-factor authentication (an authenticator app) was turned on for your account. Every sign-in now asks for a code.',
        ifNotYou: `someone else holds a session of your account and chose its second factor: ${UNDO_SIGN_IN}, then turn two-factor authentication off and on again with your own authenticator.`,
      };
    case 'two_factor_disabled':
      return {
        subject: 'Two-factor authentication was turned off',
        what: 'Two-factor authentication was turned off for your account. Sign-ins no longer ask for a code.',
        ifNotYou: `${UNDO_SIGN_IN}, then turn two-factor authentication back on.`,
      };
    case 'backup_codes_regenerated':
      return {
        subject: 'New backup codes were generated',
        what: 'New two-factor backup codes were generated for your account; the earlier ones no longer work.',
        ifNotYou: `someone else holds a session of your account and its new backup codes: ${UNDO_SIGN_IN}, then generate new codes yourself.`,
      };
    case 'password_changed':
      return {
        subject: 'Your password was changed',
        what: 'The password of your account was changed.',
        ifNotYou: 'reset your password from the sign-in page at once: a reset ends every session of the account.',
      };
    case 'password_reset':
      return {
        subject: 'Your password was reset',
        what: 'The password of your account was reset with a link mailed to this address, and every session of the account was ended.',
        ifNotYou: 'someone can read this mailbox: secure your email account first, then reset your password again.',
      };
    case 'account_linked': {
      const name = providerName(event.providerId);
      return {
        subject: `${name} was linked to your account`,
        what: `A ${name} account was linked to your account. It can now sign in to it.`,
        ifNotYou: `sign in, unlink ${name} from your account, and ${UNDO_SIGN_IN}.`,
      };
    }
    case 'api_key_created':
      return {
        subject: 'An API key was created',
        what: `An API key named ${inertText(event.keyName)} was created by your account${
          event.organizationName ? ` in ${inertText(event.organizationName)}` : ''
        }.`,
        ifNotYou: `revoke the key, then ${UNDO_SIGN_IN}.`,
      };
  }
}

const MAX_USER_AGENT = 300;
/** An IPv4 or IPv6 address as written (the forwarded header is partly the client's words: anything else is not shown). */
const IP_ADDRESS = /^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f:]*:[0-9a-f:.]*)$/i;

/** The client's user agent is its own words: bounded, and inert (no line of its own, nothing a mail client links). */
function userAgentText(value: string | null): string {
  const bounded = value?.trim().slice(0, MAX_USER_AGENT);
  return bounded ? inertText(bounded) : 'unknown';
}

/** The mail: every value the client or the user chose (user agent, names) appears as inert text. */
export function securityNoticeMail({ to, event, origin, appUrl }: SecurityNotice): EmailMessage {
  const { subject, what, ifNotYou } = describe(event);
  const facts: [string, string][] = [
    ['When', `${origin.at.toISOString()} (UTC)`],
    ['From address', origin.ip && IP_ADDRESS.test(origin.ip) ? origin.ip : 'unknown'],
    ['Device (user agent)', userAgentText(origin.userAgent)],
  ];
  const advice = `If this was you, there is nothing to do. If it was not: ${ifNotYou}`;
  const signIn = `Sign in at ${appUrl}`;
  return {
    to,
    kind: 'security_notice',
    subject,
    text: [what, facts.map(([name, value]) => `${name}: ${value}`).join('\n'), advice, signIn].join('\n\n'),
    html: [
      `<p>${escapeHtml(what)}</p>`,
      `<ul>${facts.map(([name, value]) => `<li>${escapeHtml(name)}: ${escapeHtml(value)}</li>`).join('')}</ul>`,
      `<p>${escapeHtml(advice)}</p>`,
      `<p>${escapeHtml(signIn)}</p>`,
    ].join(''),
  };
}

/**
 * Mails one notice. Never throws: a failed send has been logged and emitted
 * by the mailer (email.send_failed), and the change it reports stands. Call it
 * after the response (`background(notifySecurityEvent(...))`), e.g. from
 * `POST /api/api-keys` with `{ kind: 'api_key_created', keyName }`, the
 * session's address, `c.get('clientIp')` and the request's User-Agent.
 */
export async function notifySecurityEvent(mailer: Mailer, notice: SecurityNotice): Promise<void> {
  await mailer.send(securityNoticeMail(notice)).catch(() => {});
}
