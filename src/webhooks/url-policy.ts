/**
 * Webhook URLs (README "Webhooks", docs/webhooks.md "URLs"): `https://` only
 * in production (`http://` too elsewhere); only the allowed ports; no
 * address outside the public internet: every special-purpose range of the
 * IANA IPv4 and IPv6 registries that is not globally reachable, however it is
 * spelled (the URL parser normalises decimal, octal and hex IPv4 and IPv6
 * forms), and the IPv4 inside an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4
 * (2002::/16) address must pass too. Private URLs allowed (development, local
 * receivers) lifts the address and port rules. A host name is resolved
 * (Node) and every address it resolves to must pass; the deliverer checks
 * again before each attempt, and on Node connects only to an address it
 * checked (pinned-fetch.ts).
 */
import { parseIpv4, parseIpv6 } from '../shared/client-address.js';

export interface UrlPolicy {
  httpsOnly: boolean;
  allowPrivate: boolean;
  /** The ports a URL may name (the scheme's default when it names none); absent = any. */
  allowedPorts?: readonly number[];
  /** Every address a host name resolves to; absent (Workers) = names are not resolved. */
  resolve?: (host: string) => Promise<string[]>;
}

export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

const OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`^${OCTET}(?:\\.${OCTET}){3}$`);
const IPV6 = /^[0-9a-f]*:[0-9a-f:.]*$/i;

/** 4, 6, or 0 for a host name: the forms the URL parser and DNS answers write (no node:net, so Workers run it too). */
function ipFamily(address: string): 0 | 4 | 6 {
  if (IPV4.test(address)) return 4;
  return IPV6.test(address) ? 6 : 0;
}

type Range = [bigint, number];
const v4 = (a: string, bits: number): Range => [ipv4ToBigInt(a), bits];

/**
 * Not globally reachable: the IANA IPv4 Special-Purpose Address Registry
 * (RFC 6890 and its updates) entries marked so, plus multicast and the
 * deprecated 6to4 relay anycast. 192.0.0.0/24 is refused whole (two of its
 * /32s are anycast services no webhook needs).
 */
const V4_BLOCKED: Range[] = [
  v4('0.0.0.0', 8), // "this network"
  v4('10.0.0.0', 8), // private
  v4('100.64.0.0', 10), // shared (carrier-grade NAT)
  v4('127.0.0.0', 8), // loopback
  v4('169.254.0.0', 16), // link-local (cloud metadata)
  v4('172.16.0.0', 12), // private
  v4('192.0.0.0', 24), // IETF protocol assignments
  v4('192.0.2.0', 24), // documentation (TEST-NET-1)
  v4('192.88.99.0', 24), // 6to4 relay anycast (deprecated, RFC 7526)
  v4('192.168.0.0', 16), // private
  v4('198.18.0.0', 15), // benchmarking
  v4('198.51.100.0', 24), // documentation (TEST-NET-2)
  v4('203.0.113.0', 24), // documentation (TEST-NET-3)
  v4('224.0.0.0', 4), // multicast
  v4('240.0.0.0', 4), // reserved, and 255.255.255.255 broadcast
];

function ipv4ToBigInt(address: string): bigint {
  return BigInt(parseIpv4(address) ?? 0);
}

const inRange = (value: bigint, width: number, [base, bits]: Range) =>
  value >> BigInt(width - bits) === base >> BigInt(width - bits);

const v6 = (address: string, bits: number): Range => [parseIpv6(address)!, bits];

/**
 * Inside global unicast (2000::/3), the IANA IPv6 Special-Purpose Address
 * Registry entries that are not globally reachable. 2001::/23 is refused
 * whole (Teredo, which hides an IPv4 address, included; its few anycast
 * entries are services no webhook needs).
 */
const V6_BLOCKED_UNICAST: Range[] = [
  v6('2001::', 23), // IETF protocol assignments: Teredo, benchmarking, ORCHID
  v6('2001:db8::', 32), // documentation
  v6('3fff::', 20), // documentation (RFC 9637)
];

/** The IPv4 address in the low 32 bits of `value`, dotted. */
const dotted = (value: bigint) => [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');

/** Whether an IP address (either family) is outside the public internet. */
export function isPrivateAddress(address: string): boolean {
  const family = ipFamily(address);
  if (family === 4) return V4_BLOCKED.some((range) => inRange(ipv4ToBigInt(address), 32, range));
  const value = family === 6 ? parseIpv6(address) : null;
  if (value === null) return true;
  const top = (bits: number) => value >> BigInt(128 - bits);
  // IPv4-mapped (::ffff:0:0/96) and the well-known NAT64 prefix (64:ff9b::/96, RFC 6052): the IPv4 inside decides.
  if (top(96) === 0xffffn || top(96) === 0x64ff9b0000000000000000n) return isPrivateAddress(dotted(value));
  // 6to4 (2002::/16, RFC 3056): the IPv4 address in bits 16-48 decides.
  if (top(16) === 0x2002n) return isPrivateAddress(dotted(top(48)));
  // Everything else outside global unicast (2000::/3): unspecified, loopback,
  // IPv4-compatible and IPv4-translated (::ffff:0:0:0/96), local-use NAT64
  // (64:ff9b:1::/48), discard (100::/64), SRv6 (5f00::/16), unique-local,
  // link-local, site-local, multicast, and what IANA has not allocated.
  if (top(3) !== 1n) return true;
  return V6_BLOCKED_UNICAST.some((range) => inRange(value, 128, range));
}

/** The port a URL reaches: the one it names, else its scheme's default. */
const portOf = (url: URL) => (url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80);

export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<UrlVerdict> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'must be an absolute URL' };
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !policy.httpsOnly))
    return { ok: false, reason: policy.httpsOnly ? 'must be an https:// URL' : 'must be an http(s):// URL' };
  if (url.username || url.password) return { ok: false, reason: 'must not carry credentials' };
  if (policy.allowPrivate) return { ok: true, url };
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = ipFamily(host) !== 0;
  const name = host.toLowerCase().replace(/\.$/, '');
  if (literal ? isPrivateAddress(host) : name === 'localhost' || name.endsWith('.localhost') || !name.includes('.'))
    return { ok: false, reason: 'must not point at a private address' };
  if (policy.allowedPorts && !policy.allowedPorts.includes(portOf(url)))
    return { ok: false, reason: `port must be one of ${policy.allowedPorts.join(', ')}` };
  if (literal || !policy.resolve) return { ok: true, url };
  let addresses: string[];
  try {
    addresses = await policy.resolve(name);
  } catch {
    return { ok: false, reason: 'host name does not resolve' };
  }
  if (addresses.length === 0) return { ok: false, reason: 'host name does not resolve' };
  if (addresses.some(isPrivateAddress)) return { ok: false, reason: 'must not point at a private address' };
  return { ok: true, url };
}

/** The policy the configuration sets; `resolve` where the runtime can resolve names (Node). */
export function urlPolicyFor(
  webhooks: { httpsOnly: boolean; allowPrivateUrls: boolean; allowedPorts: readonly number[] },
  resolve?: UrlPolicy['resolve'],
): UrlPolicy {
  return {
    httpsOnly: webhooks.httpsOnly,
    allowPrivate: webhooks.allowPrivateUrls,
    allowedPorts: webhooks.allowedPorts,
    resolve,
  };
}
