import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, isPrivateAddress } from '../../src/webhooks/url-policy.js';
import { WEBHOOK_URL_CASES } from '../support/webhook-url-cases.js';

/**
 * README "Webhooks" URLs: https:// only in production, no private targets in
 * any spelling, and (Node) no host name that resolves to one. The routes'
 * tests refuse the literal spellings over HTTP; these are the policy's other
 * branches.
 */
describe('webhook URL policy', () => {
  it('takes only https:// when https is required (production), http:// too otherwise', async () => {
    const production = { httpsOnly: true, allowPrivate: false };
    expect(await checkWebhookUrl('https://hooks.example.com/in', production)).toMatchObject({ ok: true });
    expect(await checkWebhookUrl('http://hooks.example.com/in', production)).toEqual({
      ok: false,
      reason: 'must be an https:// URL',
    });
    expect(
      await checkWebhookUrl('http://hooks.example.com/in', { httpsOnly: false, allowPrivate: false }),
    ).toMatchObject({ ok: true });
    // Allowing private addresses never allows http:// in production.
    expect(await checkWebhookUrl('http://127.0.0.1/', { httpsOnly: true, allowPrivate: true })).toMatchObject({
      ok: false,
    });
  });

  it('refuses a host name that resolves to a private address, or does not resolve', async () => {
    const resolving = (answers: Record<string, string[]>) => ({
      httpsOnly: true,
      allowPrivate: false,
      resolve: async (host: string) => {
        const found = answers[host];
        if (!found) throw new Error('ENOTFOUND');
        return found;
      },
    });
    const policy = resolving({
      'public.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
      'rebind.example.com': ['93.184.215.14', '10.0.0.5'],
      'mapped.example.com': ['::ffff:192.168.0.1'],
    });
    expect(await checkWebhookUrl('https://public.example.com/', policy)).toMatchObject({ ok: true });
    expect(await checkWebhookUrl('https://rebind.example.com/', policy)).toEqual({
      ok: false,
      reason: 'must not point at a private address',
    });
    expect(await checkWebhookUrl('https://mapped.example.com/', policy)).toMatchObject({ ok: false });
    expect(await checkWebhookUrl('https://missing.example.com/', policy)).toEqual({
      ok: false,
      reason: 'host name does not resolve',
    });
  });

  it('refuses every special-purpose range that is not globally reachable (IANA registries), in both families', () => {
    for (const address of [
      '192.0.0.8', // IETF protocol assignments
      '192.0.2.10', // documentation TEST-NET-1
      '198.51.100.7', // TEST-NET-2
      '203.0.113.7', // TEST-NET-3
      '198.19.255.1', // benchmarking
      '192.88.99.1', // 6to4 relay anycast
      '224.0.0.1', // multicast
      '255.255.255.255', // broadcast
      '2001:db8::1', // documentation
      '3fff::1', // documentation (RFC 9637)
      '2001::1', // Teredo
      '2001:2::1', // benchmarking
      '2001:10::1', // ORCHID
      '100::1', // discard-only
      '5f00::1', // SRv6 SIDs
      'fec0::1', // site-local
      'ff02::1', // multicast
      '::7f00:1', // IPv4-compatible (deprecated)
      '4000::1', // not allocated (outside 2000::/3)
    ])
      expect(isPrivateAddress(address), address).toBe(true);
    for (const address of ['8.8.8.8', '192.0.3.1', '198.20.0.1', '2a00:1450:4001::200e', '3ffe::1'])
      expect(isPrivateAddress(address), address).toBe(false);
  });

  it('reads the IPv4 address inside 6to4 and NAT64 forms, and refuses IPv4-translated and local-use NAT64 outright', () => {
    // 6to4 (2002::/16): bits 16-48 are an IPv4 address.
    expect(isPrivateAddress('2002:7f00:1::1'), '6to4 of 127.0.0.1').toBe(true);
    expect(isPrivateAddress('2002:c0a8:101::'), '6to4 of 192.168.1.1').toBe(true);
    expect(isPrivateAddress('2002:a9fe:a9fe::1'), '6to4 of 169.254.169.254').toBe(true);
    expect(isPrivateAddress('2002:0a00:0001:1234::5'), '6to4 of 10.0.0.1').toBe(true);
    expect(isPrivateAddress('2002:808:808::1'), '6to4 of 8.8.8.8').toBe(false);
    // The well-known NAT64 prefix (64:ff9b::/96): the last 32 bits.
    expect(isPrivateAddress('64:ff9b::a9fe:a9fe'), 'NAT64 of 169.254.169.254').toBe(true);
    expect(isPrivateAddress('64:ff9b::808:808'), 'NAT64 of 8.8.8.8').toBe(false);
    // Local-use NAT64 (64:ff9b:1::/48) is not globally reachable, whatever it embeds.
    expect(isPrivateAddress('64:ff9b:1::7f00:1')).toBe(true);
    expect(isPrivateAddress('64:ff9b:1::808:808')).toBe(true);
    // IPv4-translated (::ffff:0:0:0/96, RFC 2765).
    expect(isPrivateAddress('::ffff:0:7f00:1')).toBe(true);
    expect(isPrivateAddress('::ffff:0:808:808')).toBe(true);
    // IPv4-mapped: the IPv4 inside decides, in either spelling.
    expect(isPrivateAddress('::ffff:7f00:1')).toBe(true);
    expect(isPrivateAddress('::ffff:808:808')).toBe(false);
  });

  it('walks the shared URL table (tests/support/webhook-url-cases.ts) as production does, and as http:// elsewhere', async () => {
    // The Worker's policy: https:// only, port 443, no name resolved.
    const production = { httpsOnly: true, allowPrivate: false, allowedPorts: [443] };
    const elsewhere = { httpsOnly: false, allowPrivate: false };
    for (const { url, refused, why, reason } of WEBHOOK_URL_CASES) {
      const verdict = await checkWebhookUrl(url, production);
      if (refused) expect(verdict, `${url} (${why})`).toEqual({ ok: false, reason });
      else expect(verdict, `${url} (${why})`).toMatchObject({ ok: true });
      // The same address rules over http:// where http:// is allowed.
      if (url.startsWith('https://') && (!refused || reason === 'must not point at a private address')) {
        const plain = `http://${url.slice('https://'.length)}`;
        expect(await checkWebhookUrl(plain, elsewhere), `${plain} (${why})`).toEqual(
          refused ? { ok: false, reason } : expect.objectContaining({ ok: true }),
        );
      }
    }
  });

  it('takes only the allowed ports (the scheme default counts), unless private URLs are allowed', async () => {
    const production = { httpsOnly: true, allowPrivate: false, allowedPorts: [443] };
    expect(await checkWebhookUrl('https://hooks.example.com/in', production)).toMatchObject({ ok: true });
    expect(await checkWebhookUrl('https://hooks.example.com:443/in', production)).toMatchObject({ ok: true });
    for (const url of ['https://hooks.example.com:8443/in', 'https://hooks.example.com:80/in', 'https://1.1.1.1:22/'])
      expect(await checkWebhookUrl(url, production), url).toEqual({ ok: false, reason: 'port must be one of 443' });
    const elsewhere = { httpsOnly: false, allowPrivate: false, allowedPorts: [443, 80] };
    expect(await checkWebhookUrl('http://hooks.example.com/in', elsewhere)).toMatchObject({ ok: true });
    expect(await checkWebhookUrl('https://hooks.example.com:80/in', elsewhere)).toMatchObject({ ok: true });
    expect(await checkWebhookUrl('http://hooks.example.com:8080/in', elsewhere)).toEqual({
      ok: false,
      reason: 'port must be one of 443, 80',
    });
    // A list of its own replaces the default: 443 is no longer in it.
    const listed = { httpsOnly: true, allowPrivate: false, allowedPorts: [8443] };
    expect(await checkWebhookUrl('https://hooks.example.com:8443/in', listed)).toMatchObject({ ok: true });
    expect(await checkWebhookUrl('https://hooks.example.com/in', listed)).toMatchObject({ ok: false });
    // Local receivers (private URLs allowed, development) listen where they like.
    expect(
      await checkWebhookUrl('http://127.0.0.1:3001/hook', {
        httpsOnly: false,
        allowPrivate: true,
        allowedPorts: [443],
      }),
    ).toMatchObject({ ok: true });
  });

  it('reads every range of the contract, in both families', () => {
    for (const address of [
      '0.1.2.3',
      '10.255.0.1',
      '100.127.255.254',
      '127.0.0.2',
      '169.254.0.1',
      '172.31.255.255',
      '192.168.100.1',
      '::',
      '::1',
      '::ffff:10.0.0.1',
      '64:ff9b::7f00:1',
      '2002:a00:1::1',
      'fc00::1',
      'fdff:ffff::1',
      'fe80::abcd',
    ])
      expect(isPrivateAddress(address), address).toBe(true);
    for (const address of ['1.1.1.1', '100.128.0.1', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])
      expect(isPrivateAddress(address), address).toBe(false);
  });
});
