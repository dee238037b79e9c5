import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { type ServerType, serve } from '@hono/node-server';
import { createAuthClient } from 'better-auth/client';
import { magicLinkClient, organizationClient } from 'better-auth/client/plugins';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatehouseClient, type GatehouseError } from '../../src/client/index.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { APP_ORIGIN, CookieJar, linkIn, mailsTo, PASSWORD, pathOf } from '../support/http.js';
import { uniqueEmail } from '../support/users.js';

/**
 * The clients an SPA may use, against a live listener: the typed client
 * (`gatehouse/client`) for the service's routes and the auth library's
 * (`/api/auth/*`, in the same OpenAPI document), and better-auth's own client
 * beside it on one cookie session. Node's fetch keeps no cookies, so the
 * browser's part (cookie store, Origin header) is a jar wrapped around fetch.
 */
describe('typed client and better-auth client against a live service', () => {
  let t: TestApp;
  let server: ServerType;
  let baseUrl: string;
  const jar = new CookieJar();
  const browserFetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const headers = new Headers(request.headers);
    headers.set('origin', APP_ORIGIN);
    if (jar.header()) headers.set('cookie', jar.header());
    const response = await fetch(new Request(request, { headers, redirect: 'manual' }));
    jar.store(response);
    return response;
  };

  beforeAll(async () => {
    t = await createTestApp();
    server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await t?.close();
  });

  it('signs up, verifies, signs in and creates an organization with better-auth; then reads and writes roles typed', async () => {
    const auth = createAuthClient({
      baseURL: baseUrl,
      basePath: '/api/auth',
      plugins: [organizationClient(), magicLinkClient()],
      fetchOptions: { customFetchImpl: browserFetch },
    });
    const email = uniqueEmail('client');
    const signUp = await auth.signUp.email({ email, password: PASSWORD, name: 'Client User' });
    expect(signUp.error).toBeNull();
    const verify = await browserFetch(`${baseUrl}${pathOf(linkIn(mailsTo(t, email).at(-1)!.text))}`);
    expect([200, 302]).toContain(verify.status);
    const signIn = await auth.signIn.email({ email, password: PASSWORD });
    expect(signIn.error).toBeNull();
    expect(signIn.data?.user.email).toBe(email);
    const org = await auth.organization.create({
      name: 'Client Co',
      slug: `client-${crypto.randomUUID().slice(0, 8)}`,
    });
    expect(org.error).toBeNull();
    await auth.organization.setActive({ organizationId: org.data!.id });

    const api = createGatehouseClient({ baseUrl, fetch: browserFetch });
    const session = await api.GET('/api/session');
    expect(session.error).toBeUndefined();
    expect(session.data?.user.email).toBe(email);
    expect(session.data?.session.activeOrganizationId).toBe(org.data!.id);

    const roles = await api.GET('/api/roles');
    expect(roles.data?.map((role) => role.slug)).toEqual(['owner', 'admin', 'member', 'viewer']);

    const created = await api.POST('/api/roles', { body: { name: 'Support', permissions: ['members:read'] } });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ slug: 'support', permissions: ['members:read'] });

    // The error shape is typed: { code, message, details? }.
    const refused = await api.POST('/api/roles', { body: { name: 'Support', permissions: [] } });
    const error: GatehouseError | undefined = refused.error;
    expect(refused.response.status).toBe(409);
    expect(error?.code).toBe('SLUG_CONFLICT');

    const removed = await api.DELETE('/api/roles/{id}', { params: { path: { id: created.data!.id } } });
    expect(removed.response.status).toBe(200);
  });

  it("calls the auth library's routes typed too: sign-up, sign-in, organization create and set-active, get-session", async () => {
    const ownJar = new CookieJar();
    const ownFetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      const request = new Request(input, init);
      const headers = new Headers(request.headers);
      headers.set('origin', APP_ORIGIN);
      if (ownJar.header()) headers.set('cookie', ownJar.header());
      const response = await fetch(new Request(request, { headers, redirect: 'manual' }));
      ownJar.store(response);
      return response;
    };
    const api = createGatehouseClient({ baseUrl, fetch: ownFetch });
    const email = uniqueEmail('typed-auth');

    const signUp = await api.POST('/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: 'Typed' } });
    expect(signUp.error).toBeUndefined();
    expect(signUp.data?.user.email).toBe(email);
    expect(signUp.data).not.toHaveProperty('token');
    await ownFetch(`${baseUrl}${pathOf(linkIn(mailsTo(t, email).at(-1)!.text))}`);

    // A refusal of the library's comes typed in the contract's error shape.
    const wrong = await api.POST('/api/auth/sign-in/email', { body: { email, password: 'not the password at all' } });
    const refusal: GatehouseError | undefined = wrong.error;
    expect(wrong.response.status).toBe(401);
    expect(refusal?.code).toBe('INVALID_EMAIL_OR_PASSWORD');

    const signIn = await api.POST('/api/auth/sign-in/email', { body: { email, password: PASSWORD } });
    expect(signIn.error).toBeUndefined();
    expect(signIn.data?.user?.email).toBe(email);

    const slug = `typed-${crypto.randomUUID().slice(0, 8)}`;
    const org = await api.POST('/api/auth/organization/create', { body: { name: 'Typed Co', slug } });
    expect(org.error).toBeUndefined();
    expect(org.data?.slug).toBe(slug);
    const active = await api.POST('/api/auth/organization/set-active', { body: { organizationId: org.data!.id } });
    expect(active.error).toBeUndefined();

    const session = await api.GET('/api/auth/get-session');
    expect(session.data?.user.email).toBe(email);
    expect(session.data?.session.activeOrganizationId).toBe(org.data!.id);
    expect(session.data?.session).not.toHaveProperty('token');

    // A query parameter the row's schema refuses: 400 VALIDATION_ERROR naming it.
    const members = await api.GET('/api/auth/organization/list-members', { params: { query: { limit: 5 } } });
    expect(members.data?.members.map((member) => member.role)).toEqual(['owner']);
    const badLimit = await api.GET('/api/auth/organization/list-members', { params: { query: { limit: 101 } } });
    expect(badLimit.response.status).toBe(400);
    expect(badLimit.error?.code).toBe('VALIDATION_ERROR');

    const signedOut = await api.POST('/api/auth/sign-out');
    expect(signedOut.response.status).toBe(200);
    expect((await api.GET('/api/auth/get-session')).data).toBeNull();
  });

  it('is what the package exports as gatehouse/client (the compiled build), usable from plain Node', async () => {
    await promisify(execFile)(process.execPath, ['scripts/build.mjs'], { cwd: `${import.meta.dirname}/../..` });
    const script = `import { createGatehouseClient } from 'gatehouse/client';
const api = createGatehouseClient({ baseUrl: ${JSON.stringify(baseUrl)} });
const { data, response } = await api.GET('/api/health');
console.log(JSON.stringify({ status: response.status, data }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: `${import.meta.dirname}/../..`,
    });
    expect(JSON.parse(stdout)).toEqual({ status: 200, data: { status: 'ok' } });
  });
});
