// What a hostile page can try against the API with the visitor's cookies.
// Each probe writes what the page could learn: "blocked" when fetch rejected
// (CORS refused the response), "read <status> <body>" when it got a readable
// answer, "opaque <status>" for a no-cors request (sent, but unreadable).
'use strict';

const api = window.GATEHOUSE_API;
const $ = (id) => document.getElementById(id);

async function probe(id, fn) {
  try {
    const response = await fn();
    if (response.type === 'opaque') $(id).textContent = `opaque ${response.status}`;
    else $(id).textContent = `read ${response.status} ${await response.text()}`;
  } catch (error) {
    $(id).textContent = `blocked ${error instanceof Error ? error.name : String(error)}`;
  }
}

$('probe-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const { email, password } = Object.fromEntries(new FormData(event.currentTarget).entries());
  const body = JSON.stringify({ email, password });
  await probe('probe-session', () => fetch(`${api}/api/session`, { credentials: 'include' }));
  await probe('probe-signin', () =>
    fetch(`${api}/api/auth/sign-in/email`, {
      method: 'POST',
      credentials: 'include',
      headers: { 'content-type': 'application/json' },
      body,
    }),
  );
  // A form-encoded POST needs no preflight (what a hidden <form> would send):
  // it reaches the server, and only the server's own origin check (the auth
  // library's CSRF protection) can stop it.
  await probe('probe-simple', () =>
    fetch(`${api}/api/auth/sign-in/email`, {
      method: 'POST',
      mode: 'no-cors',
      credentials: 'include',
      body: new URLSearchParams({ email, password }),
    }),
  );
  $('done').textContent = 'done';
});
