/**
 * The bench's tenant (tests/perf/bench.ts on Node, tests/perf/bench-worker.ts
 * in workerd), made through the API with the shared live client: sign-up, the
 * mailed link, sign-in, an organization, a fresh cookie cache naming it, and
 * an API key (and, for the Worker's two-tenant check, a role only it has).
 */
import { expectStatus, type LiveClient, type Mail, signUpVerifySignIn } from '../support/live-client.js';

export const SESSION_COOKIE = 'gatehouse.session_token';

export interface BenchTenant {
  email: string;
  /** The session token and the cookie cache naming the active organization. */
  cookie: string;
  /** The session token alone: every request reads the session from the database. */
  tokenOnlyCookie: string;
  apiKey: string;
  /** A role slug only this tenant has (with `markerRole`), else ''. */
  marker: string;
}

export async function seedBenchTenant(
  client: LiveClient,
  mails: () => readonly Mail[],
  options: { markerRole?: boolean } = {},
): Promise<BenchTenant> {
  const user = await signUpVerifySignIn(client, mails, {
    email: `bench-${crypto.randomUUID().slice(0, 8)}@example.test`,
    label: 'Bench',
  });
  const { jar } = user;
  expectStatus(
    'organization',
    await client.request('/api/auth/organization/create', {
      body: { name: 'Bench', slug: `bench-${crypto.randomUUID().slice(0, 8)}` },
      jar,
    }),
    200,
  );
  // A fresh cookie cache that names the active organization (stored into the jar).
  await client.request('/api/auth/get-session', { jar });
  let marker = '';
  if (options.markerRole) {
    marker = `only-${crypto.randomUUID().slice(0, 8)}`;
    expectStatus(
      'role',
      await client.request('/api/roles', { body: { name: marker, permissions: ['roles:read'] }, jar }),
      201,
    );
  }
  const key = expectStatus(
    'api key',
    await client.request('/api/api-keys', { body: { name: 'bench', scopes: ['roles:read'] }, jar }),
    201,
  ) as { key: string };
  return {
    email: user.email,
    cookie: jar.header(),
    tokenOnlyCookie: `${SESSION_COOKIE}=${jar.get(SESSION_COOKIE) ?? ''}`,
    apiKey: key.key,
    marker,
  };
}
