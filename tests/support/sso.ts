/**
 * What the single sign-on suites share (tests/sso, docs/sso.md): a domain
 * claimed and proved through the routes with its TXT record on the loopback
 * DNS server, the session and the rows a sign-in leaves behind.
 */
import type { TestApp } from './app.js';
import type { TestDnsServer } from './dns-server.js';
import { type CookieJar, call, expectStatus } from './http.js';
import type { TestOrganization } from './orgs.js';

export interface SessionAnswer {
  user: { id: string; email: string; emailVerified?: boolean };
  session: { id: string; activeOrganizationId: string | null; mfa: boolean; stepUpUntil: string };
}

/** `name` claimed by the organization's Owner; with `verified` (default) its TXT record published and checked. */
export async function claimDomain(
  t: TestApp,
  dns: TestDnsServer,
  organization: TestOrganization,
  name: string,
  verified = true,
): Promise<void> {
  const jar = organization.owner.jar;
  const claimed = await expectStatus<{ id: string; txtName: string; txtValue: string }>(
    await call(t, '/api/sso/domains', { body: { domain: name }, jar }),
    201,
  );
  if (!verified) return;
  dns.records.set(claimed.txtName, [claimed.txtValue]);
  await expectStatus(await call(t, `/api/sso/domains/${claimed.id}/verify`, { method: 'POST', jar }), 200);
}

/** GET /api/session with the jar: the enriched session, or null signed out. */
export async function sessionOf(t: TestApp, jar: CookieJar): Promise<SessionAnswer | null> {
  return expectStatus<SessionAnswer | null>(await call(t, '/api/session', { jar }), 200);
}

/** The account an address names, as stored. */
export function userRow(t: TestApp, email: string) {
  return t.database.withOwner((owner) =>
    owner.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst(),
  );
}

/** The `?error=` of a failed sign-in's redirect. */
export const errorOf = (location: string): string | null =>
  new URL(location, 'http://relative.invalid').searchParams.get('error');
