import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeTxtResolver, type TxtResolver } from '../../src/platform/dns-txt.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { startDnsServer, startSilentDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { call, expectError, expectStatus, UUID_V4 } from '../support/http.js';
import {
  ALL_PERMISSIONS,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  newMember,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/sso.md "Domains", over HTTP with a real DNS server on loopback (dns2,
 * answering the service's own c-ares resolver): claim (canonical form,
 * public mail providers refused, a domain another organization verified is
 * 409 DOMAIN_TAKEN, the same claim again answers the same record), verify
 * (the TXT record at txtName must hold txtValue; a failed lookup says so),
 * list, delete; audited as sso.domain_*; organizations:read to read,
 * organizations:write and a fresh session to change, never an API key.
 */
interface Domain {
  id: string;
  domain: string;
  status: 'pending' | 'verified';
  txtName: string;
  txtValue: string;
  verifiedAt: string | null;
  createdAt: string;
}

describe('SSO domains', () => {
  let t: TestApp;
  let dns: TestDnsServer;
  /** The resolver the app asks: the loopback server's, unless a test swaps in another real one. */
  let resolver: TxtResolver;
  let org: TestOrganization;
  let other: TestOrganization;
  let viewer: TestMember;
  let key: string;

  const unique = (label: string) => `${label}-${crypto.randomUUID().slice(0, 8)}.test`;
  const claim = (domain: string, o: TestOrganization = org) =>
    call(t, '/api/sso/domains', { body: { domain }, jar: o.owner.jar });
  const verify = (id: string, o: TestOrganization = org) =>
    call(t, `/api/sso/domains/${id}/verify`, { method: 'POST', jar: o.owner.jar });
  const publish = (d: Domain, ...values: string[]) => dns.records.set(d.txtName, values.length ? values : [d.txtValue]);
  /** Ages every session of the user past STEP_UP_MAX_AGE. */
  const makeStale = (userId: string) =>
    t.database.withOwner((owner) =>
      owner
        .updateTable('sessions')
        .set({ step_up_at: new Date(t.clock().getTime() - (t.config.stepUp.maxAgeSeconds + 1) * 1000) })
        .where('user_id', '=', userId)
        .execute(),
    );

  beforeAll(async () => {
    dns = await startDnsServer();
    resolver = createNodeTxtResolver([dns.address], { timeoutMs: 500, tries: 1 });
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' }, resolveTxt: (name) => resolver(name) });
    org = await createOrganization(t, await signedInUser(t));
    other = await createOrganization(t, await signedInUser(t));
    viewer = await newMember(t, org, 'viewer');
    const created = await call(t, '/api/api-keys', {
      body: { name: 'every permission', scopes: ALL_PERMISSIONS },
      jar: org.owner.jar,
    });
    key = (await expectStatus<{ key: string }>(created, 201)).key;
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('claims a domain in its canonical form: 201 pending with the TXT record to publish, audited once', async () => {
    const name = unique('Claim');
    const created = await expectStatus<Domain>(await claim(`  ${name.toUpperCase()}. `), 201);
    expect(created).toEqual({
      id: expect.stringMatching(UUID_V4),
      domain: name.toLowerCase(),
      status: 'pending',
      txtName: `_gatehouse-challenge.${name.toLowerCase()}`,
      txtValue: expect.stringMatching(/^gatehouse-domain-verification=[A-Za-z0-9_-]{32}$/),
      verifiedAt: null,
      createdAt: expect.any(String),
    });
    // The same claim again: the same record (a published value stays valid), no second entry.
    expect(await expectStatus<Domain>(await claim(name), 201)).toEqual(created);
    const entries = (await auditRows(t, org.id, 'sso.domain_added')).filter((e) => e.metadata.domainId === created.id);
    expect(entries.map((e) => e.metadata)).toEqual([{ domainId: created.id, domain: created.domain }]);
    expect(entries[0]!.actor_id).toBe(org.owner.id);
    // An internationalized name is kept in punycode.
    const idn = await expectStatus<Domain>(await claim(`bücher-${crypto.randomUUID().slice(0, 6)}.test`), 201);
    expect(idn.domain).toMatch(/^xn--/);
  });

  it("refuses public mail providers' domains and what is not a domain, naming `domain` (400)", async () => {
    for (const domain of ['gmail.com', 'GMAIL.COM', 'eu.gmail.com', 'outlook.com', 'proton.me']) {
      const error = await expectError(await claim(domain), 400, 'VALIDATION_ERROR');
      expect(error.details, domain).toEqual([{ path: 'domain', message: expect.stringMatching(/public mail/) }]);
    }
    for (const domain of ['localhost', 'user@example.com', '10.0.0.1', '*.example.com', 'https://example.com/', '']) {
      const error = await expectError(await claim(domain), 400, 'VALIDATION_ERROR');
      expect(
        error.details?.map((d) => d.path),
        domain,
      ).toEqual(['domain']);
    }
    await expectError(
      await call(t, '/api/sso/domains', { body: { domain: unique('x'), tenantId: other.id }, jar: org.owner.jar }),
      400,
      'VALIDATION_ERROR',
    );
  });

  it('verifies when a TXT record at txtName holds txtValue; 409 DOMAIN_NOT_VERIFIED until then', async () => {
    const d = await expectStatus<Domain>(await claim(unique('verify')), 201);
    const missing = await expectError(await verify(d.id), 409, 'DOMAIN_NOT_VERIFIED');
    expect(missing.message).toContain(`No TXT record at ${d.txtName}`);
    expect(dns.questions).toContain(`${d.txtName} 16`);
    // Other records, a near miss, the value of another claim: not a proof.
    publish(d, 'v=spf1 -all', `${d.txtValue}x`, d.txtValue.slice(0, -1));
    await expectError(await verify(d.id), 409, 'DOMAIN_NOT_VERIFIED');
    expect(
      (await expectStatus<Domain[]>(await call(t, '/api/sso/domains', { jar: org.owner.jar }), 200)).find(
        (x) => x.id === d.id,
      )?.status,
    ).toBe('pending');

    // The value split into character-strings (as long TXT records are) counts, beside other records.
    dns.records.set(d.txtName, ['v=spf1 -all', [d.txtValue.slice(0, 20), d.txtValue.slice(20)]]);
    const verified = await expectStatus<Domain>(await verify(d.id), 200);
    expect(verified).toMatchObject({ id: d.id, domain: d.domain, status: 'verified' });
    expect(verified.verifiedAt).toBe(t.clock().toISOString());
    // Again: the same answer, no second lookup needed, no second audit entry.
    dns.records.delete(d.txtName);
    expect(await expectStatus<Domain>(await verify(d.id), 200)).toEqual(verified);
    const entries = (await auditRows(t, org.id, 'sso.domain_verified')).filter((e) => e.metadata.domainId === d.id);
    expect(entries.map((e) => e.metadata)).toEqual([{ domainId: d.id, domain: d.domain }]);
  });

  it('a lookup that fails (the DNS server refuses the connection) is 409 DOMAIN_NOT_VERIFIED saying so', async () => {
    const d = await expectStatus<Domain>(await claim(unique('lookup')), 201);
    publish(d);
    const closed = await startSilentDnsServer();
    await closed.close();
    const working = resolver;
    resolver = createNodeTxtResolver([closed.address], { timeoutMs: 200, tries: 1 });
    try {
      const error = await expectError(await verify(d.id), 409, 'DOMAIN_NOT_VERIFIED');
      expect(error.message).toMatch(
        new RegExp(`DNS lookup of ${d.txtName.replace(/\./g, '\\.')} failed \\(ECONNREFUSED\\)`),
      );
    } finally {
      resolver = working;
    }
    expect((await expectStatus<Domain>(await verify(d.id), 200)).status).toBe('verified');
  });

  it('a domain another organization verified is 409 DOMAIN_TAKEN, to claim and to verify', async () => {
    const name = unique('taken');
    const mine = await expectStatus<Domain>(await claim(name), 201);
    // The other organization claimed it first, pending (claims alone take nothing).
    const theirs = await expectStatus<Domain>(await claim(name, other), 201);
    expect(theirs.id).not.toBe(mine.id);
    expect(theirs.txtValue).not.toBe(mine.txtValue);
    publish(mine, mine.txtValue, theirs.txtValue);
    await expectStatus(await verify(mine.id), 200);
    const error = await expectError(await verify(theirs.id, other), 409, 'DOMAIN_TAKEN');
    expect(error.message).not.toContain(org.id);
    await expectError(await claim(name.toUpperCase(), other), 409, 'DOMAIN_TAKEN');
    // Still theirs to delete; gone from mine, it is free again.
    await expectStatus(await call(t, `/api/sso/domains/${mine.id}`, { method: 'DELETE', jar: org.owner.jar }), 200);
    expect((await expectStatus<Domain>(await verify(theirs.id, other), 200)).status).toBe('verified');
  });

  it('two organizations verifying one domain at once: one 200, one 409 DOMAIN_TAKEN', async () => {
    const name = unique('race');
    const a = await expectStatus<Domain>(await claim(name), 201);
    const b = await expectStatus<Domain>(await claim(name, other), 201);
    publish(a, a.txtValue, b.txtValue);
    const answers = await Promise.all([verify(a.id), verify(b.id, other)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    const refused = answers.find((r) => r.status === 409)!;
    expect(((await refused.json()) as { code: string }).code).toBe('DOMAIN_TAKEN');
    // Read as the schema owner in each organization (row-level security binds the owner on PostgreSQL).
    const verifiedIn = (tenantId: string) =>
      asOwnerInTenant(t, tenantId, (trx) =>
        trx
          .selectFrom('sso_domains')
          .select('id')
          .where('tenant_id', '=', tenantId)
          .where('domain', '=', name)
          .where('verified_at', 'is not', null)
          .execute(),
      );
    const owners = [...(await verifiedIn(org.id)), ...(await verifiedIn(other.id))];
    expect(owners).toHaveLength(1);
  });

  it("lists the organization's domains only; another organization's id is 404 everywhere", async () => {
    const d = await expectStatus<Domain>(await claim(unique('list')), 201);
    const listed = await expectStatus<Domain[]>(await call(t, '/api/sso/domains', { jar: org.owner.jar }), 200);
    expect(listed.find((x) => x.id === d.id)).toEqual(d);
    expect(listed.map((x) => x.createdAt)).toEqual([...listed.map((x) => x.createdAt)].sort());
    const theirs = await expectStatus<Domain[]>(await call(t, '/api/sso/domains', { jar: other.owner.jar }), 200);
    expect(theirs.map((x) => x.id)).not.toContain(d.id);
    publish(d);
    await expectError(await verify(d.id, other), 404, 'NOT_FOUND');
    await expectError(
      await call(t, `/api/sso/domains/${d.id}`, { method: 'DELETE', jar: other.owner.jar }),
      404,
      'NOT_FOUND',
    );
    await expectError(await verify(crypto.randomUUID()), 404, 'NOT_FOUND');
    expect((await expectStatus<Domain>(await verify(d.id), 200)).status).toBe('verified');
  });

  it('deletes a claim: { id, deleted: true }, audited, gone from the list', async () => {
    const d = await expectStatus<Domain>(await claim(unique('delete')), 201);
    const deleted = await call(t, `/api/sso/domains/${d.id}`, { method: 'DELETE', jar: org.owner.jar });
    expect(await expectStatus(deleted, 200)).toEqual({ id: d.id, deleted: true });
    const listed = await expectStatus<Domain[]>(await call(t, '/api/sso/domains', { jar: org.owner.jar }), 200);
    expect(listed.map((x) => x.id)).not.toContain(d.id);
    const [entry] = (await auditRows(t, org.id, 'sso.domain_deleted')).filter((e) => e.metadata.domainId === d.id);
    expect(entry?.metadata).toEqual({ domainId: d.id, domain: d.domain, wasVerified: false });
    await expectError(
      await call(t, `/api/sso/domains/${d.id}`, { method: 'DELETE', jar: org.owner.jar }),
      404,
      'NOT_FOUND',
    );
  });

  it('a Viewer reads but changes nothing; an API key does neither; a stale session must step up', async () => {
    const d = await expectStatus<Domain>(await claim(unique('access')), 201);
    await expectStatus(await call(t, '/api/sso/domains', { jar: viewer.jar }), 200);
    await expectError(
      await call(t, '/api/sso/domains', { body: { domain: unique('viewer') }, jar: viewer.jar }),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    await expectError(
      await call(t, `/api/sso/domains/${d.id}/verify`, { method: 'POST', jar: viewer.jar }),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    const keyed = { authorization: `Bearer ${key}` };
    await expectError(await call(t, '/api/sso/domains', { headers: keyed }), 403, 'FORBIDDEN');
    await expectError(
      await call(t, '/api/sso/domains', { body: { domain: unique('key') }, headers: keyed }),
      403,
      'FORBIDDEN',
    );
    await expectError(
      await call(t, `/api/sso/domains/${d.id}`, { method: 'DELETE', headers: keyed }),
      403,
      'FORBIDDEN',
    );

    const stale = await signedInUser(t);
    const staleOrg = await createOrganization(t, stale);
    const mine = await expectStatus<Domain>(await claim(unique('stale'), staleOrg), 201);
    publish(mine);
    await makeStale(stale.id);
    await expectStatus(await call(t, '/api/sso/domains', { jar: stale.jar }), 200);
    await expectError(await claim(unique('stale'), staleOrg), 403, 'STEP_UP_REQUIRED');
    await expectError(await verify(mine.id, staleOrg), 403, 'STEP_UP_REQUIRED');
    await expectError(
      await call(t, `/api/sso/domains/${mine.id}`, { method: 'DELETE', jar: stale.jar }),
      403,
      'STEP_UP_REQUIRED',
    );
    const listed = await expectStatus<Domain[]>(await call(t, '/api/sso/domains', { jar: stale.jar }), 200);
    expect(listed).toEqual([mine]);
  });
});
