import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNodeTxtResolver, DnsLookupError, type TxtResolver } from '../../src/platform/dns-txt.js';
import { startDnsServer, startSilentDnsServer, type TestDnsServer } from '../support/dns-server.js';

/**
 * The Node resolver against a DNS server on loopback (tests/support/dns-server.ts):
 * what a domain-ownership check sees for each answer a real zone can give.
 */
describe('createNodeTxtResolver', () => {
  let dns: TestDnsServer;
  let resolve: TxtResolver;

  beforeAll(async () => {
    dns = await startDnsServer({
      '_gatehouse-challenge.acme.test': ['v=spf1 -all', 'gatehouse-domain-verification=abc'],
      '_gatehouse-challenge.long.test': [['gatehouse-domain-verification=', 'first-half', 'second-half']],
      '_gatehouse-challenge.nothing.test': [],
    });
    resolve = createNodeTxtResolver([dns.address], { timeoutMs: 500, tries: 1 });
  });
  afterAll(() => dns.close());

  it('answers every TXT record at the name, asking the configured server', async () => {
    expect((await resolve('_gatehouse-challenge.acme.test')).sort()).toEqual([
      'gatehouse-domain-verification=abc',
      'v=spf1 -all',
    ]);
    expect(dns.questions).toContain('_gatehouse-challenge.acme.test 16');
  });

  it("joins a record's character-strings into one value", async () => {
    expect(await resolve('_gatehouse-challenge.long.test')).toEqual([
      'gatehouse-domain-verification=first-halfsecond-half',
    ]);
  });

  it('a name without TXT records (NOERROR, no answers) gives []', async () => {
    expect(await resolve('_gatehouse-challenge.nothing.test')).toEqual([]);
  });

  it('a name that does not exist (NXDOMAIN) gives []', async () => {
    expect(await resolve('_gatehouse-challenge.unknown.test')).toEqual([]);
  });

  it('sees a record added after it was created (each call asks again)', async () => {
    expect(await resolve('_gatehouse-challenge.later.test')).toEqual([]);
    dns.records.set('_gatehouse-challenge.later.test', ['gatehouse-domain-verification=later']);
    expect(await resolve('_gatehouse-challenge.later.test')).toEqual(['gatehouse-domain-verification=later']);
  });

  it('a server that never answers gives [] once the tries run out', async () => {
    const silent = await startSilentDnsServer();
    try {
      const started = Date.now();
      expect(await createNodeTxtResolver([silent.address], { timeoutMs: 200, tries: 2 })('acme.test')).toEqual([]);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await silent.close();
    }
  });

  it('a server refusing the connection (nothing listening) throws DnsLookupError: the lookup proved nothing', async () => {
    const closed = await startSilentDnsServer();
    await closed.close();
    const lookup = createNodeTxtResolver([closed.address], { timeoutMs: 200, tries: 1 })('acme.test');
    await expect(lookup).rejects.toBeInstanceOf(DnsLookupError);
    await expect(lookup).rejects.toMatchObject({ code: 'ECONNREFUSED', host: 'acme.test' });
  });

  it('a server named by host name (`localhost:<port>`) is looked up, then asked', async () => {
    const port = dns.address.slice(dns.address.lastIndexOf(':') + 1);
    const byName = createNodeTxtResolver([`localhost:${port}`], { timeoutMs: 500, tries: 1 });
    expect((await byName('_gatehouse-challenge.acme.test')).sort()).toEqual([
      'gatehouse-domain-verification=abc',
      'v=spf1 -all',
    ]);
  });

  it('a server host name that does not resolve throws DnsLookupError naming it', async () => {
    const lookup = createNodeTxtResolver(['no-such-dns-server.invalid:53'], { timeoutMs: 200, tries: 1 })('acme.test');
    await expect(lookup).rejects.toMatchObject({ host: 'no-such-dns-server.invalid' });
  });

  it('without servers it uses the system resolver (a malformed name is refused, not sent)', async () => {
    const system = createNodeTxtResolver(null);
    await expect(system('bad..name')).rejects.toBeInstanceOf(DnsLookupError);
  });
});
