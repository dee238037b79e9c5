// Signed out: sign up (the verification link is mailed; in development the
// API prints it in its log), sign in with a password, a magic link, a passkey,
// a provider or the organization's single sign-on, and the second factor when
// the account has one. Signed in:
// the profile, the data export, and scheduling (or cancelling) the deletion.
import { api, auth, must } from '../clients.js';
import { refresh, session } from '../session.js';
import { button, form, h, type Screen, section, when } from '../ui.js';

/** A password sign-in waiting for its second factor (only the short-lived two_factor cookie exists). */
let secondFactorPending = false;
let notice = '';

const back = () => `${location.origin}/`;

/** Marks the page the identity provider sends the browser back to (with a session, or `?error=<code>`). */
const SSO_RETURN = 'sso';

/** Why a single sign-on came back without a session: the `?error=<code>` of the return. */
const SSO_ERRORS: Record<string, string> = {
  invalid_request: 'the sign-in request was not valid',
  invalid_state: 'the sign-in expired or was used already; start again',
  idp_error: 'the identity provider refused or could not be reached',
  invalid_response: "the identity provider's answer did not pass the checks",
  replayed: 'that answer from the identity provider was used already',
  domain_not_allowed: "the address is not at a verified domain of the connection's organization",
  idp_initiated_refused: 'sign-ins started at the identity provider are not accepted: start here',
  connection_disabled: 'the organization turned this connection off',
  account_unavailable: 'this account cannot sign in through single sign-on',
};

/**
 * The return from the identity provider (the page's query, read once by
 * main.ts): false when it is not one. `?error=<code>`: no session, a notice;
 * `?twoFactorRedirect=true`: the account has two-factor on and the IdP did
 * not ask for it, so the second factor completes the sign-in.
 */
export function ssoReturn(params: URLSearchParams): boolean {
  if (!params.has(SSO_RETURN)) return false;
  const error = params.get('error');
  if (error) notice = `Single sign-on failed: ${error} (${SSO_ERRORS[error] ?? 'unknown error'})`;
  else if (params.get('twoFactorRedirect') === 'true') secondFactorPending = true;
  return true;
}

export const account: Screen = async (root) => {
  const message = h('p', { id: 'account-notice' }, notice);
  notice = '';
  if (session()) return signedInView(root, message);
  if (secondFactorPending) {
    root.append(message, secondFactor());
    return;
  }
  const providers = await must(api.GET('/api/auth/providers'));
  root.append(
    message,
    section(
      'Create an account',
      form(
        'signup-form',
        'sign up',
        [
          { name: 'name', label: 'Name', autocomplete: 'name' },
          { name: 'email', label: 'Email', type: 'email', autocomplete: 'email' },
          { name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password' },
        ],
        async ({ name, email, password }) => {
          // The verification link signs the user in and comes back here (?verified=1).
          await must(
            api.POST('/api/auth/sign-up/email', {
              body: { name, email, password, callbackURL: `${back()}?verified=1` },
            }),
          );
          notice = `Check ${email} for the verification link (in development the API prints the mail in its log).`;
          await refresh();
        },
      ),
    ),
    section(
      'Sign in',
      form(
        'signin-form',
        'sign in',
        [
          { name: 'email', label: 'Email', type: 'email', autocomplete: 'username' },
          { name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password' },
        ],
        async ({ email, password }) => {
          const data = await must(api.POST('/api/auth/sign-in/email', { body: { email, password } }));
          // A user with a second factor gets { twoFactorRedirect: true } and no session yet.
          secondFactorPending = data?.twoFactorRedirect === true;
          await refresh();
        },
      ),
      form(
        'magic-link-form',
        'send magic link',
        [{ name: 'email', label: 'Email', type: 'email' }],
        async ({ email }) => {
          await must(api.POST('/api/auth/sign-in/magic-link', { body: { email, callbackURL: back() } }));
          notice = `Check ${email} for the sign-in link.`;
          await refresh();
        },
      ),
      form(
        'sso-signin-form',
        'sign in with SSO',
        [{ name: 'email', label: 'Work email (single sign-on)', type: 'email', autocomplete: 'username' }],
        async ({ email }) => {
          // 404 NOT_FOUND: no enabled connection serves the address's domain. Both ways back land here.
          const returnTo = `${back()}?${SSO_RETURN}=1`;
          const body = { email, callbackURL: returnTo, errorCallbackURL: returnTo };
          const { url } = await must(api.POST('/api/auth/sign-in/sso', { body }));
          location.assign(url);
        },
      ),
      h(
        'p',
        {},
        button(
          'sign in with passkey',
          async () => {
            await must(auth.signIn.passkey());
            await refresh();
          },
          { id: 'passkey-signin', textContent: 'Sign in with a passkey' },
        ),
        ...(['google', 'github'] as const)
          .filter((provider) => providers[provider])
          .map((provider) =>
            button(
              `sign in with ${provider}`,
              () => must(auth.signIn.social({ provider, callbackURL: back(), errorCallbackURL: back() })),
              { id: `${provider}-signin`, textContent: `Continue with ${provider === 'google' ? 'Google' : 'GitHub'}` },
            ),
          ),
      ),
    ),
  );
};

function secondFactor(): HTMLElement {
  const done = async () => {
    secondFactorPending = false;
    await refresh();
  };
  return section(
    'Second factor',
    h('p', {}, 'Enter the code from your authenticator app, or one of your backup codes.'),
    form(
      'totp-form',
      'verify code',
      [{ name: 'code', label: 'Code', autocomplete: 'one-time-code' }],
      async ({ code }) => {
        await must(auth.twoFactor.verifyTotp({ code }));
        await done();
      },
    ),
    form('backup-code-form', 'use backup code', [{ name: 'code', label: 'Backup code' }], async ({ code }) => {
      await must(auth.twoFactor.verifyBackupCode({ code }));
      await done();
    }),
  );
}

async function signedInView(root: HTMLElement, message: HTMLElement): Promise<void> {
  const profile = await must(api.GET('/api/users/me'));
  const scheduled = profile.deletedAt !== null;
  const exported = h('pre', { id: 'export-data', hidden: true });
  root.append(
    message,
    section(
      'Profile',
      h(
        'dl',
        { id: 'profile' },
        h('dt', {}, 'Name'),
        h('dd', {}, profile.name),
        h('dt', {}, 'Email'),
        h('dd', {}, `${profile.email} (${profile.emailVerified ? 'verified' : 'not verified'})`),
        h('dt', {}, 'Platform role'),
        h('dd', {}, profile.role),
      ),
      button(
        'export data',
        async () => {
          const data = await must(api.GET('/api/users/me/export'));
          exported.textContent = JSON.stringify(data, null, 2);
          exported.hidden = false;
        },
        { id: 'export', textContent: 'Export my data' },
      ),
      exported,
    ),
    section(
      'Delete account',
      h(
        'p',
        { id: 'deletion' },
        scheduled
          ? `Scheduled for deletion since ${when(profile.deletedAt)}: most routes refuse this account until you cancel.`
          : 'Not scheduled for deletion.',
      ),
      scheduled
        ? button(
            'cancel deletion',
            async () => {
              await must(api.POST('/api/users/me/reactivate'));
              notice = 'Deletion cancelled.';
              await refresh();
            },
            { id: 'cancel-deletion', textContent: 'Cancel deletion' },
          )
        : button(
            'schedule deletion',
            async () => {
              const { purgeAfter } = await must(api.POST('/api/users/me/deletion'));
              notice = `Your account will be purged after ${when(purgeAfter)}.`;
              await refresh();
            },
            { id: 'schedule-deletion', textContent: 'Schedule account deletion' },
          ),
    ),
  );
}
