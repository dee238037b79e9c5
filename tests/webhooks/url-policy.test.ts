import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, isPrivateAddress } from '../../src/webhooks/url-policy.js';

/**
 * API.md "Webhooks" URLs: https:// only in production, no private targets in
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
      'fc00::1',
      'fdff:ffff::1',
      'fe80::abcd',
    ])
      expect(isPrivateAddress(address), address).toBe(true);
    for (const address of ['1.1.1.1', '100.128.0.1', '172.32.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])
      expect(isPrivateAddress(address), address).toBe(false);
  });
});
