// "Confirm it's you": a sensitive action (an API key, a passkey, two-factor,
// the organization's MFA policy, the account's deletion…) needs a session that
// proved every factor of its account in the last few minutes (STEP_UP_MAX_AGE,
// 600 s by default). A magic-link sign-in of an account with a password never
// did, nor does a session signed in an hour ago: the API answers 403
// STEP_UP_REQUIRED. This prompt asks for the factors again (`POST
// /api/session/step-up`) and runs the refused action once more.
import { api, must } from './clients.js';
import { reload, session } from './session.js';
import { $, action, h } from './ui.js';

/** Opens the prompt for the action `name`; `retry` runs it again once the session is fresh. */
export function confirmIdentity(name: string, retry: () => Promise<void>): void {
  const twoFactor = session()?.user.twoFactorEnabled ?? false;
  const field = (
    fieldName: string,
    label: string,
    props: { type?: string; autocomplete?: AutoFill; required?: boolean },
  ) =>
    h('label', {}, h('span', {}, label), h('input', { name: fieldName, type: 'text', autocomplete: 'off', ...props }));
  const prompt = h(
    'form',
    { id: 'step-up-form' },
    field('password', 'Password', { type: 'password', autocomplete: 'current-password', required: true }),
    ...(twoFactor
      ? [
          field('code', 'Code from your authenticator app', { autocomplete: 'one-time-code' }),
          field('backupCode', 'or a backup code', {}),
        ]
      : []),
    h('button', { type: 'submit' }, 'Confirm'),
    h('button', { type: 'button', id: 'step-up-cancel', onclick: () => cancel(name) }, 'Cancel'),
  );
  const submit = prompt.querySelector<HTMLButtonElement>('button[type=submit]')!;
  prompt.addEventListener('submit', (event) => {
    event.preventDefault();
    // One confirmation at a time: a double click must not run the action twice.
    if (submit.disabled) return;
    submit.disabled = true;
    const data = new FormData(prompt);
    const value = (key: string) => String(data.get(key) ?? '').trim() || undefined;
    void confirm(
      { password: String(data.get('password') ?? ''), code: value('code'), backupCode: value('backupCode') },
      retry,
    ).finally(() => {
      submit.disabled = false;
    });
  });
  const root = $('step-up');
  root.replaceChildren(
    h('h2', { id: 'step-up-title' }, "Confirm it's you"),
    h(
      'p',
      { id: 'step-up-reason' },
      `To ${name}, enter your password`,
      twoFactor ? ' and a code from your authenticator app (or one of your backup codes)' : '',
      '. Sensitive actions need a recent sign-in.',
    ),
    prompt,
    h(
      'p',
      { className: 'hint' },
      'No password on this account? Sign out and sign in again (magic link, passkey or provider): a new sign-in counts.',
    ),
  );
  root.hidden = false;
  prompt.querySelector<HTMLInputElement>('input[name=password]')?.focus();
}

function close(): void {
  const root = $('step-up');
  root.hidden = true;
  root.replaceChildren();
}

function cancel(name: string): void {
  close();
  $('status').textContent = `${name}: failed`;
  $('error').textContent = `${name}: not confirmed`;
}

async function confirm(
  body: { password: string; code?: string | undefined; backupCode?: string | undefined },
  retry: () => Promise<void>,
): Promise<void> {
  let confirmed = false;
  // A wrong factor answers 401 INVALID_CREDENTIALS (which one is not said): the prompt stays open.
  await action('step up', async () => {
    await must(api.POST('/api/session/step-up', { body }));
    confirmed = true;
    // The header again: a code proved here makes the session multi-factor.
    await reload();
  });
  if (!confirmed) return;
  close();
  // Once: a second refusal is reported as the action's failure.
  await retry();
}
