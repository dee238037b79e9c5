/**
 * API.md "Webhooks" URLs: `https://` only in production (`http://` too
 * elsewhere); no address in a loopback, unspecified (0.0.0.0/8), private,
 * shared (100.64.0.0/10), link-local or unique-local range, however it is
 * spelled (the URL parser normalises decimal, octal and hex IPv4 and
 * IPv6 forms; IPv4-mapped and NAT64 IPv6 are read as the IPv4 inside), unless
 * private URLs are allowed. A host name is resolved (Node) and every address
 * it resolves to must pass; the deliverer checks again before each attempt.
 */
export interface UrlPolicy {
  httpsOnly: boolean;
  allowPrivate: boolean;
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

/** Not public: RFC 6890 special-purpose ranges a webhook must not reach. */
const V4_BLOCKED: Range[] = [
  v4('0.0.0.0', 8), // unspecified / "this network"
  v4('10.0.0.0', 8), // private
  v4('100.64.0.0', 10), // shared (carrier-grade NAT)
  v4('127.0.0.0', 8), // loopback
  v4('169.254.0.0', 16), // link-local (cloud metadata)
  v4('172.16.0.0', 12), // private
  v4('192.0.0.0', 24), // IETF protocol assignments
  v4('192.168.0.0', 16), // private
  v4('198.18.0.0', 15), // benchmarking
  v4('224.0.0.0', 4), // multicast
  v4('240.0.0.0', 4), // reserved, broadcast
];

function ipv4ToBigInt(address: string): bigint {
  return address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function ipv6ToBigInt(address: string): bigint {
  let text = address.toLowerCase();
  // A trailing dotted IPv4 (::ffff:1.2.3.4) as two hextets.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = ipv4ToBigInt(dotted[1]!);
    text = text.replace(dotted[1]!, `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`);
  }
  const [head = '', tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const missing = tail === undefined ? 0 : 8 - left.length - right.length;
  const parts = [...left, ...Array(missing).fill('0'), ...right];
  return parts.reduce((acc, part) => (acc << 16n) | BigInt(Number.parseInt(part || '0', 16)), 0n);
}

const inRange = (value: bigint, width: number, [base, bits]: Range) =>
  value >> BigInt(width - bits) === base >> BigInt(width - bits);

/** Whether an IP address (either family) is outside the public internet. */
export function isPrivateAddress(address: string): boolean {
  const family = ipFamily(address);
  if (family === 4) return V4_BLOCKED.some((range) => inRange(ipv4ToBigInt(address), 32, range));
  if (family !== 6) return true;
  const value = ipv6ToBigInt(address);
  const top = (bits: number) => value >> BigInt(128 - bits);
  // IPv4-mapped (::ffff:0:0/96), IPv4-compatible (::/96) and NAT64 (64:ff9b::/96): the IPv4 inside decides.
  if (top(96) === 0xffffn || top(96) === 0n || top(96) === 0x64ff9b0000000000000000n) {
    if (value <= 1n) return true; // :: and ::1
    const embedded = value & 0xffffffffn;
    return isPrivateAddress([24n, 16n, 8n, 0n].map((shift) => String((embedded >> shift) & 0xffn)).join('.'));
  }
  return (
    top(7) === 0x7en || // fc00::/7 unique-local
    top(10) === 0x3fan || // fe80::/10 link-local
    top(10) === 0x3fbn || // fec0::/10 site-local (deprecated)
    top(8) === 0xffn || // multicast
    top(32) === 0x20010db8n // documentation
  );
}

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
  if (ipFamily(host))
    return isPrivateAddress(host) ? { ok: false, reason: 'must not point at a private address' } : { ok: true, url };
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost') || !name.includes('.'))
    return { ok: false, reason: 'must not point at a private address' };
  if (!policy.resolve) return { ok: true, url };
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
  webhooks: { httpsOnly: boolean; allowPrivateUrls: boolean },
  resolve?: UrlPolicy['resolve'],
): UrlPolicy {
  return { httpsOnly: webhooks.httpsOnly, allowPrivate: webhooks.allowPrivateUrls, resolve };
}
