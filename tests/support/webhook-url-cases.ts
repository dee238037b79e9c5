/**
 * README "Webhooks" URLs, as one table both runtimes walk: the policy's unit
 * test on Node (tests/webhooks/url-policy.test.ts) and POST /api/webhooks on
 * the Worker in workerd (tests/e2e/worker-limits.test.ts). Production
 * settings: https:// only, port 443, private URLs not allowed; no host name
 * is resolved (the Worker resolves none; docs/webhooks.md "Workers").
 * `reason` is the policy's verdict for a refused URL.
 */
export interface WebhookUrlCase {
  url: string;
  refused: boolean;
  why: string;
  reason?: string;
}

const PRIVATE = 'must not point at a private address';
const PORT = 'port must be one of 443';

const refused = (url: string, why: string, reason = PRIVATE): WebhookUrlCase => ({ url, refused: true, why, reason });
const accepted = (url: string, why: string): WebhookUrlCase => ({ url, refused: false, why });

export const WEBHOOK_URL_CASES: readonly WebhookUrlCase[] = [
  // IPv4: the IANA special-purpose ranges that are not globally reachable.
  refused('https://0.0.0.0/', '"this network" 0/8'),
  refused('https://10.0.0.1/', 'private 10/8'),
  refused('https://100.64.0.1/', 'shared address space 100.64/10'),
  refused('https://127.0.0.1/', 'loopback 127/8'),
  refused('https://169.254.169.254/latest/meta-data/', 'link-local 169.254/16 (cloud metadata)'),
  refused('https://172.16.0.1/', 'private 172.16/12'),
  refused('https://192.0.0.8/', 'IETF protocol assignments 192.0.0/24'),
  refused('https://192.168.1.1/', 'private 192.168/16'),
  refused('https://198.18.0.1/', 'benchmarking 198.18/15'),
  refused('https://192.88.99.1/', 'deprecated 6to4 relay anycast'),
  refused('https://224.0.0.1/', 'multicast'),
  refused('https://240.0.0.1/', 'reserved 240/4'),
  refused('https://255.255.255.255/', 'limited broadcast'),
  // Other spellings of 127.0.0.1 the URL parser accepts.
  refused('https://2130706433/', '127.0.0.1 in decimal'),
  refused('https://0x7f.0.0.1/', '127.0.0.1 with a hex part'),
  refused('https://0177.0.0.1/', '127.0.0.1 with an octal part'),
  refused('https://127.1/', '127.0.0.1 shortened'),
  // Documentation ranges, both families.
  refused('https://192.0.2.10/', 'documentation TEST-NET-1'),
  refused('https://198.51.100.7/', 'documentation TEST-NET-2'),
  refused('https://203.0.113.7/', 'documentation TEST-NET-3'),
  refused('https://[2001:db8::1]/', 'documentation 2001:db8::/32'),
  refused('https://[3fff::1]/', 'documentation 3fff::/20 (RFC 9637)'),
  // IPv6 outside global unicast, or non-global inside it.
  refused('https://[::]/', 'unspecified'),
  refused('https://[::1]/', 'loopback'),
  refused('https://[fc00::1]/', 'unique-local fc00::/7'),
  refused('https://[fd12:3456::1]/', 'unique-local fd00::/8'),
  refused('https://[fe80::1]/', 'link-local'),
  refused('https://[fec0::1]/', 'site-local'),
  refused('https://[ff02::1]/', 'multicast'),
  refused('https://[2001::1]/', 'Teredo'),
  refused('https://[2001:10::1]/', 'ORCHID'),
  refused('https://[100::1]/', 'discard-only'),
  refused('https://[5f00::1]/', 'SRv6 SIDs'),
  refused('https://[4000::1]/', 'not allocated (outside 2000::/3)'),
  refused('https://[::7f00:1]/', 'IPv4-compatible (deprecated)'),
  // IPv4 embedded in IPv6: the IPv4 inside decides, or the form is refused outright.
  refused('https://[::ffff:127.0.0.1]/', 'IPv4-mapped loopback'),
  refused('https://[::ffff:a9fe:a9fe]/', 'IPv4-mapped link-local, hex spelling'),
  refused('https://[::ffff:10.0.0.1]/', 'IPv4-mapped private'),
  refused('https://[2002:7f00:1::1]/', '6to4 of 127.0.0.1'),
  refused('https://[2002:c0a8:0101::]/', '6to4 of 192.168.1.1'),
  refused('https://[2002:a9fe:a9fe::1]/', '6to4 of 169.254.169.254'),
  refused('https://[64:ff9b::127.0.0.1]/', 'NAT64 (64:ff9b::/96) of 127.0.0.1'),
  refused('https://[64:ff9b::169.254.169.254]/', 'NAT64 of 169.254.169.254'),
  refused('https://[64:ff9b:1::a00:1]/', 'local-use NAT64 64:ff9b:1::/48'),
  refused('https://[64:ff9b:1::808:808]/', 'local-use NAT64, whatever it embeds'),
  refused('https://[::ffff:0:127.0.0.1]/', 'IPv4-translated ::ffff:0:0:0/96'),
  refused('https://[::ffff:0:808:808]/', 'IPv4-translated, whatever it embeds'),
  // Names that are never public.
  refused('https://localhost/', 'localhost'),
  refused('https://LOCALHOST./', 'localhost, upper case with the root dot'),
  refused('https://hooks.localhost/', 'a name under .localhost'),
  refused('https://intranet/', 'a single-label name'),
  refused('https://metadata./', 'a single-label name with the root dot'),
  // Ports other than 443, the scheme, credentials.
  refused('https://hooks.example.com:8443/in', 'port 8443', PORT),
  refused('https://hooks.example.com:80/in', 'port 80 over https', PORT),
  refused('https://1.1.1.1:22/', 'a public address on port 22', PORT),
  refused('http://hooks.example.com/in', 'http:// in production', 'must be an https:// URL'),
  refused('https://user:pass@hooks.example.com/in', 'credentials in the URL', 'must not carry credentials'),
  // Accepted: public names and addresses on 443 (fewer than WEBHOOK_MAX_ENDPOINTS, 20).
  accepted('https://hooks.example.com/in', 'a public name'),
  accepted('https://hooks.example.com:443/in', 'a public name, port 443 named'),
  accepted('https://Hooks.Example.COM./in', 'a public name, mixed case, root dot'),
  accepted('https://8.8.8.8/hook', 'a public IPv4 address'),
  accepted('https://192.0.3.1/', 'just past TEST-NET-1'),
  accepted('https://100.128.0.1/', 'just past 100.64/10'),
  accepted('https://172.32.0.1/', 'just past 172.16/12'),
  accepted('https://198.20.0.1/', 'just past 198.18/15'),
  accepted('https://[2606:4700::1111]/', 'a public IPv6 address'),
  accepted('https://[3ffe::1]/', 'global unicast outside 3fff::/20'),
  accepted('https://[::ffff:8.8.8.8]/', 'IPv4-mapped public address'),
  accepted('https://[2002:808:808::1]/', '6to4 of 8.8.8.8'),
  accepted('https://[64:ff9b::808:808]/', 'NAT64 of 8.8.8.8'),
];
