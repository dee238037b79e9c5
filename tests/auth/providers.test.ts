/**
 * docs/api.md "Sign-in": each OAuth provider only when both its variables are
 * set, otherwise silently skipped; `GET /api/auth/providers`; callbacks at
 * /api/auth/callback/{provider}; `/api/auth/admin/*` is not served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';
import { call } from '../support/http.js';

const AUTH_URL = 'https://auth.example.test';

async function providers(t: TestApp) {
  const res = await call(t, '/api/auth/providers');
  expect(res.status).toBe(200);
  return res.json();
}

async function socialSignIn(t: TestApp, provider: string, extra: Record<string, unknown> = {}) {
  return call(t, '/api/auth/sign-in/social', { body: { provider, ...extra } });
}

describe('OAuth providers', () => {
  // One database for the four configurations: the apps differ only in env.
  let database: TestDatabase;
  let plain: TestApp;
  let google: TestApp;
  let githubHalf: TestApp;
  let github: TestApp;

  beforeAll(async () => {
    database = await openTestDatabase();
    [plain, google, githubHalf, github] = await Promise.all([
      createTestApp({ database }),
      createTestApp({ database, env: { GOOGLE_CLIENT_ID: 'google-id', GOOGLE_CLIENT_SECRET: 'google-secret' } }),
      createTestApp({ database, env: { GITHUB_CLIENT_ID: 'github-id-only' } }),
      createTestApp({
        database,
        env: { GITHUB_CLIENT_ID: 'github-id', GITHUB_CLIENT_SECRET: 'github-secret', AUTH_URL },
      }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([plain, google, githubHalf, github].map((t) => t?.close()));
    await database?.close();
  });

  it('GET /api/auth/providers is public and answers { google: false, github: false } by default', async () => {
    const res = await call(plain, '/api/auth/providers');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ google: false, github: false });
  });

  it('GOOGLE_CLIENT_ID + GOOGLE_CLIENT_SECRET enable google', async () => {
    expect(await providers(google)).toEqual({ google: true, github: false });
    const res = await socialSignIn(google, 'google');
    expect(res.status).toBe(200);
    const { url } = (await res.json()) as { url: string };
    const target = new URL(url);
    expect(target.hostname).toBe('accounts.google.com');
    expect(target.searchParams.get('client_id')).toBe('google-id');
    expect(target.searchParams.get('redirect_uri')).toBe(`${google.config.auth.url}/api/auth/callback/google`);
  });

  it('only one of GITHUB_CLIENT_ID / GITHUB_CLIENT_SECRET: github stays off, silently, and its sign-in is refused with a 4xx', async () => {
    expect(await providers(githubHalf)).toEqual({ google: false, github: false });
    const res = await socialSignIn(githubHalf, 'github');
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(await res.json()).toMatchObject({ code: 'PROVIDER_NOT_FOUND' });
  });

  it('with both GITHUB_* set, social sign-in answers with the authorize URL at github whose redirect_uri is <AUTH_URL>/api/auth/callback/github', async () => {
    expect(await providers(github)).toEqual({ google: false, github: true });
    const res = await socialSignIn(github, 'github');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { url: string; redirect: boolean };
    expect(body.redirect).toBe(true);
    const target = new URL(body.url);
    expect(target.origin).toBe('https://github.com');
    expect(target.pathname).toBe('/login/oauth/authorize');
    expect(target.searchParams.get('client_id')).toBe('github-id');
    expect(target.searchParams.get('redirect_uri')).toBe(`${AUTH_URL}/api/auth/callback/github`);
    expect(target.searchParams.get('state')).toBeTruthy();
    // The state is bound to the browser by a cookie (Secure: AUTH_URL is https).
    const state = res.headers.getSetCookie().find((cookie) => cookie.startsWith('__Secure-gatehouse.state='));
    expect(state).toMatch(/HttpOnly/i);
    expect(state).toMatch(/Secure/);
  });

  it('refuses a callbackURL outside the trusted origins', async () => {
    const res = await socialSignIn(github, 'github', { callbackURL: 'https://evil.example/after' });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ code: 'INVALID_CALLBACK_URL' });
    const ok = await socialSignIn(github, 'github', { callbackURL: `${github.config.auth.appUrl}/after` });
    expect(ok.status).toBe(200);
  });

  it('with github off, social sign-in for github is refused with a 4xx, not a 500', async () => {
    for (const t of [plain, google]) {
      const res = await socialSignIn(t, 'github');
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 'PROVIDER_NOT_FOUND' });
    }
    const unknown = await socialSignIn(plain, 'myspace');
    expect(unknown.status).toBeGreaterThanOrEqual(400);
    expect(unknown.status).toBeLessThan(500);
  });

  it('the github callback is served (a forged one is sent to the error page, not a 404 or a 500)', async () => {
    const res = await call(github, '/api/auth/callback/github?code=forged&state=forged');
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toMatch(/error=/);
  });

  it('/api/auth/admin/* (the library admin plugin) answers 404 in the contract shape', async () => {
    for (const path of [
      '/api/auth/admin/list-users',
      '/api/auth/admin/set-role',
      '/api/auth/admin/ban-user',
      '/api/auth/admin/impersonate-user',
      '/api/auth/admin/create-user',
    ]) {
      for (const method of ['GET', 'POST']) {
        const res = await call(plain, path, method === 'POST' ? { body: {} } : {});
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(await res.json(), `${method} ${path}`).toEqual({ code: 'NOT_FOUND', message: expect.any(String) });
      }
    }
  });
});
