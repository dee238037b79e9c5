// Second factors (better-auth's twoFactor and passkey plugins) and the
// active organization's policy: when it requires MFA, its routes answer
// 403 MFA_REQUIRED to sessions that are not multi-factor.
import { ApiFailure, api, auth, must } from '../clients.js';
import { activeOrganization, can, refresh, rerender, session, signedIn } from '../session.js';
import { button, form, h, type Screen, section, table, when } from '../ui.js';

/** An enrolment waiting for its first code: the URI for the authenticator app and the backup codes, shown once. */
let enrolment: { totpURI: string; backupCodes: string[] } | null = null;

export const security: Screen = async (root) => {
  if (!signedIn(root)) return;
  const user = session()!.user;
  root.append(user.twoFactorEnabled ? twoFactorOn() : twoFactorOff(), await passkeys());
  if (activeOrganization() && can('organizations:read')) root.append(await policy());
};

function twoFactorOff(): HTMLElement {
  if (enrolment) {
    const { totpURI, backupCodes } = enrolment;
    return section(
      'Authenticator app',
      h('p', {}, 'Add this to your authenticator app (most read it as a QR code; any QR generator makes one):'),
      h('code', { id: 'totp-uri' }, totpURI),
      h('p', {}, 'Backup codes, each good once; keep them somewhere safe, they are not shown again:'),
      h('ul', { id: 'backup-codes' }, ...backupCodes.map((code) => h('li', {}, code))),
      form('totp-confirm-form', 'confirm code', [{ name: 'code', label: 'Code from the app' }], async ({ code }) => {
        await must(auth.twoFactor.verifyTotp({ code }));
        enrolment = null;
        await refresh();
      }),
    );
  }
  return section(
    'Authenticator app',
    h('p', { id: 'two-factor' }, 'Two-factor sign-in is off.'),
    form(
      'totp-enable-form',
      'enable two-factor',
      [{ name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password' }],
      async ({ password }) => {
        const enabled = await must(auth.twoFactor.enable({ password }));
        if (!('totpURI' in enabled)) throw new Error('the answer has no totpURI');
        enrolment = enabled;
        await rerender();
      },
    ),
  );
}

function twoFactorOn(): HTMLElement {
  return section(
    'Authenticator app',
    h('p', { id: 'two-factor' }, 'Two-factor sign-in is on.'),
    form(
      'totp-disable-form',
      'disable two-factor',
      [{ name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password' }],
      async ({ password }) => {
        await must(auth.twoFactor.disable({ password }));
        await refresh();
      },
    ),
  );
}

async function passkeys(): Promise<HTMLElement> {
  const mine = (await must(auth.passkey.listUserPasskeys())) ?? [];
  return section(
    'Passkeys',
    table(
      'passkeys',
      ['Name', 'Added', ''],
      mine.map((passkey) => [
        passkey.name ?? 'Passkey',
        when(new Date(passkey.createdAt).toISOString()),
        button(
          'remove passkey',
          async () => {
            await must(auth.passkey.deletePasskey({ id: passkey.id }));
            await rerender();
          },
          { textContent: 'Remove' },
        ),
      ]),
    ),
    form('passkey-form', 'add passkey', [{ name: 'name', label: 'Name', value: 'This device' }], async ({ name }) => {
      // The browser asks the authenticator, which must verify the user (PIN, biometrics).
      await must(auth.passkey.addPasskey({ name }));
      await rerender();
    }),
  );
}

async function policy(): Promise<HTMLElement> {
  let requireMfa: boolean;
  try {
    ({ requireMfa } = await must(api.GET('/api/organization/security')));
  } catch (error) {
    if (!(error instanceof ApiFailure && error.code === 'MFA_REQUIRED')) throw error;
    return section(
      'Organization policy',
      h('p', { id: 'policy' }, 'This organization requires MFA: add a second factor above, then sign in with it.'),
    );
  }
  return section(
    'Organization policy',
    h('p', { id: 'policy' }, requireMfa ? 'MFA required in this organization' : 'MFA optional in this organization'),
    can('organizations:write') &&
      button(
        requireMfa ? 'allow single-factor' : 'require MFA',
        async () => {
          // Only a multi-factor session may turn it on (403 MFA_REQUIRED otherwise): nobody locks themselves out.
          await must(api.PATCH('/api/organization/security', { body: { requireMfa: !requireMfa } }));
          await rerender();
        },
        { id: 'require-mfa', textContent: requireMfa ? 'Stop requiring MFA' : 'Require MFA' },
      ),
  );
}
