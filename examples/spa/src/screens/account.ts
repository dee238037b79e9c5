// Signed out: sign up (the verification link is mailed; in development the
// API prints it in its log), sign in with a password, a magic link, a passkey
// or a provider, and the second factor when the account has one. Signed in:
// the profile, the data export, and scheduling (or cancelling) the deletion.
import { api, auth, must } from '../clients.js';
import { refresh, session } from '../session.js';
import { button, form, h, type Screen, section, when } from '../ui.js';

/** A password sign-in waiting for its second factor (only the short-lived two_factor cookie exists). */
let secondFactorPending = false;
let notice = '';

const back = () => `${location.origin}/`;

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
