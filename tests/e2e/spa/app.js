// A deliberately plain single-page client of the Gatehouse API, as a frontend
// on APP_URL would write it: every call is a cross-origin fetch with
// `credentials: 'include'` (the session lives in the API's HttpOnly cookie,
// which this script can neither read nor needs to).
'use strict';

const api = window.GATEHOUSE_API;
const $ = (id) => document.getElementById(id);

function log(line) {
  const item = document.createElement('li');
  item.textContent = line;
  $('log').append(item);
}

async function request(method, path, body) {
  const response = await fetch(api + path, {
    method,
    credentials: 'include',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  log(`${method} ${path} -> ${response.status}`);
  if (!response.ok) {
    const code = data && typeof data === 'object' ? data.code || '' : '';
    const message = data && typeof data === 'object' ? data.message || '' : String(data);
    throw new Error(`${response.status} ${code} ${message}`.replace(/\s+/g, ' ').trim());
  }
  return data;
}

/** Runs one user action; the page says how it went (the test reads #status and #error). */
async function action(name, fn) {
  $('status').textContent = `${name}…`;
  $('error').textContent = '';
  try {
    await fn();
    $('status').textContent = `${name}: ok`;
  } catch (error) {
    // A CORS refusal surfaces here as a TypeError ("Failed to fetch"): the page learns nothing else.
    $('status').textContent = `${name}: failed`;
    $('error').textContent = `${name}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
    log(`${name} failed: ${error}`);
  }
}

const formData = (form) => Object.fromEntries(new FormData(form).entries());
const list = (value) =>
  String(value || '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

async function refreshSession() {
  const session = await request('GET', '/api/session');
  $('who').textContent = session ? `Signed in as ${session.user.email}` : 'Signed out';
  $('permissions').textContent = session ? `(${session.permissions.length} permissions)` : '';
  $('mfa').textContent = session ? (session.session.mfa ? 'multi-factor' : 'single-factor') : '';
  return session;
}

async function listRoles() {
  const roles = await request('GET', '/api/roles');
  $('roles').replaceChildren(
    ...roles.map((role) => {
      const item = document.createElement('li');
      item.textContent = `${role.name} (${role.slug})`;
      return item;
    }),
  );
}

function on(formId, name, fn) {
  $(formId).addEventListener('submit', (event) => {
    event.preventDefault();
    void action(name, () => fn(formData(event.currentTarget)));
  });
}

on('signup-form', 'sign up', async ({ name, email, password }) => {
  // The verification link in the mail brings the user back here.
  await request('POST', '/api/auth/sign-up/email', {
    name,
    email,
    password,
    callbackURL: `${location.origin}/?verified=1`,
  });
  $('signup-result').textContent = `Check ${email} for the verification link`;
});

on('signin-form', 'sign in', async ({ email, password }) => {
  await request('POST', '/api/auth/sign-in/email', { email, password });
  await refreshSession();
});

on('org-form', 'create organization', async ({ name, slug }) => {
  const org = await request('POST', '/api/auth/organization/create', { name, slug });
  await request('POST', '/api/auth/organization/set-active', { organizationId: org.id });
  $('org').textContent = `Organization: ${org.name} (${org.slug})`;
  await refreshSession();
});

$('list-roles').addEventListener('click', () => void action('list roles', listRoles));

on('role-form', 'create role', async ({ name, description, permissions }) => {
  const role = await request('POST', '/api/roles', {
    name,
    description: description || '',
    permissions: list(permissions),
  });
  $('role-created').textContent = `Created role ${role.name} (${role.slug}) with ${role.permissions.join(', ')}`;
  await listRoles();
});

on('key-form', 'create API key', async ({ name, scopes }) => {
  const created = await request('POST', '/api/api-keys', { name, scopes: list(scopes) });
  $('api-key').textContent = created.key;
  const keys = await request('GET', '/api/api-keys');
  $('api-keys').replaceChildren(
    ...keys.map((key) => {
      const item = document.createElement('li');
      item.textContent = `${key.name}: ${key.keyPrefix}…${key.lastFour} [${key.scopes.join(', ')}]`;
      return item;
    }),
  );
});

on('switch-form', 'switch organization', async ({ slug }) => {
  await request('POST', '/api/auth/organization/set-active', { organizationSlug: slug });
  await refreshSession();
});

// WebAuthn with the browser's own JSON helpers: the options the API answers
// are the standard JSON form, and so is what the credential serialises to.
$('add-passkey').addEventListener(
  'click',
  () =>
    void action('add passkey', async () => {
      const options = await request('GET', '/api/auth/passkey/generate-register-options');
      const credential = await navigator.credentials.create({
        publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options),
      });
      await request('POST', '/api/auth/passkey/verify-registration', {
        response: credential.toJSON(),
        name: 'Browser passkey',
      });
      const passkeys = await request('GET', '/api/auth/passkey/list-user-passkeys');
      $('passkeys').textContent = `Passkeys: ${passkeys.map((passkey) => passkey.name).join(', ')}`;
    }),
);

$('passkey-signin').addEventListener(
  'click',
  () =>
    void action('sign in with passkey', async () => {
      const options = await request('GET', '/api/auth/passkey/generate-authenticate-options');
      const credential = await navigator.credentials.get({
        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options),
      });
      await request('POST', '/api/auth/passkey/verify-authentication', { response: credential.toJSON() });
      await refreshSession();
    }),
);

$('require-mfa').addEventListener(
  'click',
  () =>
    void action('require MFA', async () => {
      const policy = await request('PATCH', '/api/organization/security', { requireMfa: true });
      $('policy').textContent = policy.requireMfa ? 'MFA required' : 'MFA optional';
    }),
);

$('sign-out').addEventListener(
  'click',
  () =>
    void action('sign out', async () => {
      await request('POST', '/api/auth/sign-out', {});
      await refreshSession();
    }),
);

const params = new URLSearchParams(location.search);
if (params.get('error')) $('verified').textContent = `Verification failed: ${params.get('error')}`;
else if (params.get('verified')) $('verified').textContent = 'Email verified';
void action('load', refreshSession);
