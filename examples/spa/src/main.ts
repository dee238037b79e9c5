// The example's shell: a header with the session, a hash router over the
// screens, one status line. Open http://localhost:3000 after `npm start` and
// `npm run example` (README "Quick start").
import { api, must } from './clients.js';
import { account, ssoReturn } from './screens/account.js';
import { apiKeys } from './screens/api-keys.js';
import { auditLog } from './screens/audit-log.js';
import { members } from './screens/members.js';
import { organizations } from './screens/organizations.js';
import { roles } from './screens/roles.js';
import { security } from './screens/security.js';
import { sso } from './screens/sso.js';
import { webhooks } from './screens/webhooks.js';
import { refresh, setRenderer } from './session.js';
import { confirmIdentity } from './step-up.js';
import { $, action, h, type Screen, setStepUpPrompt } from './ui.js';

const SCREENS: Record<string, { title: string; render: Screen }> = {
  account: { title: 'Account', render: account },
  organizations: { title: 'Organizations', render: organizations },
  roles: { title: 'Roles', render: roles },
  members: { title: 'Members', render: members },
  'api-keys': { title: 'API keys', render: apiKeys },
  'audit-log': { title: 'Audit log', render: auditLog },
  webhooks: { title: 'Webhooks', render: webhooks },
  security: { title: 'Security', render: security },
  sso: { title: 'Single sign-on', render: sso },
};

const route = () => {
  const name = location.hash.replace(/^#\/?/, '');
  return name in SCREENS ? name : 'account';
};

async function show(): Promise<void> {
  const name = route();
  for (const link of document.querySelectorAll<HTMLAnchorElement>('nav a')) {
    link.classList.toggle('current', link.hash === `#/${name}`);
  }
  const root = h('div', { id: `screen-${name}` });
  $('screen').replaceChildren(root);
  await SCREENS[name]!.render(root);
}

$('nav').replaceChildren(
  ...Object.entries(SCREENS).map(([name, screen]) =>
    h(
      'a',
      {
        href: `#/${name}`,
        id: `nav-${name}`,
        // The current screen's link reads it again (no hashchange fires for it).
        onclick: (event) => {
          if (route() !== name || location.hash !== `#/${name}`) return;
          event.preventDefault();
          void action(`show ${name}`, show);
        },
      },
      screen.title,
    ),
  ),
);
$('sign-out').addEventListener(
  'click',
  () =>
    void action('sign out', async () => {
      await must(api.POST('/api/auth/sign-out'));
      await refresh();
    }),
);
window.addEventListener('hashchange', () => void action(`show ${route()}`, show));
setRenderer(show);
// 403 STEP_UP_REQUIRED: ask for the account's factors again, then retry the action once.
setStepUpPrompt(confirmIdentity);

// The verification link lands here (the sign-up's callbackURL): better-auth adds ?error=… when it failed.
// A single sign-on returns to `/?sso=1` (no hash: the Account screen), which says how it went.
const params = new URLSearchParams(location.search);
if (ssoReturn(params)) {
  // Shown by the Account screen: the notice, or the second-factor form.
} else if (params.get('error')) $('notice').textContent = `Verification failed: ${params.get('error')}`;
else if (params.get('verified')) $('notice').textContent = 'Email verified';
void action('load', refresh);
