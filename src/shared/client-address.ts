/**
 * The client address from X-Forwarded-For behind `hops` trusted proxies, each
 * of which appends the address it saw: the entry `hops` from the right (one
 * hop by default, the right-most; docs/security.md "Client addresses"). Entries further left are whatever the
 * client sent. 0 hops, or no header: null (the caller uses the socket).
 *
 * A header shorter than `hops` gives its left-most entry: every entry was
 * then appended by a proxy (a client-sent entry would have made it longer),
 * so the left-most is the address the outermost proxy that handled the
 * request saw. A client able to skip a proxy could as well send a longer
 * header, so falling back to the socket (one proxy address shared by every
 * such client, one budget for all of them) would buy no safety.
 */
export function clientIpFromForwardedFor(header: string | undefined, hops = 1): string | null {
  if (!header || hops <= 0) return null;
  const entries = header
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0) return null;
  return entries[Math.max(0, entries.length - hops)]!;
}

const DOTTED_QUAD = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const HEXTET = /^[0-9a-f]{1,4}$/i;
const MAX_IPV6 = (1n << 128n) - 1n;

/** A dotted-quad IPv4 address (four decimal parts, 0-255, no leading zeros) as a 32-bit number; null for anything else. */
export function parseIpv4(text: string): number | null {
  if (!DOTTED_QUAD.test(text)) return null;
  return text.split('.').reduce((value, part) => value * 256 + Number(part), 0);
}

/**
 * An IPv6 address in any RFC 4291 §2.2 text form (hex digits of either case,
 * leading zeros, one `::`, a trailing dotted IPv4) as a 128-bit number; a
 * zone (`%eth0`) is dropped. Null for anything else. Pure TypeScript: the
 * Worker bundles it (no node:net there).
 */
export function parseIpv6(text: string): bigint | null {
  let rest = text.replace(/%[^%]*$/, '');
  let tail: bigint | null = null;
  const dotted = /:((?:\d{1,3}\.){3}\d{1,3})$/.exec(rest);
  if (dotted) {
    const v4 = parseIpv4(dotted[1]!);
    if (v4 === null) return null;
    tail = BigInt(v4);
    rest = rest.slice(0, rest.length - dotted[1]!.length);
    // "::1.2.3.4" leaves "::"; "a::1.2.3.4" leaves "a::"; "a:b:...:1.2.3.4" leaves a trailing ":" to drop.
    if (!rest.endsWith('::')) rest = rest.slice(0, -1);
  }
  const width = tail === null ? 8 : 6;
  const halves = rest.split('::');
  if (halves.length > 2) return null;
  const split = (half: string) => (half === '' ? [] : half.split(':'));
  const head = split(halves[0]!);
  const back = halves.length === 2 ? split(halves[1]!) : [];
  const groups = [...head, ...back];
  if (!groups.every((group) => HEXTET.test(group))) return null;
  if (halves.length === 2 ? groups.length >= width : groups.length !== width) return null;
  const hextets = [...head, ...Array<string>(width - groups.length).fill('0'), ...back];
  let value = hextets.reduce((acc, group) => (acc << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
  if (tail !== null) value = (value << 32n) | tail;
  return value;
}

/** RFC 5952 text: lower case, no leading zeros, the longest run of two or more zero groups (the first of equals) as `::`. */
export function formatIpv6(value: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = { start: -1, length: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i += 1;
      continue;
    }
    let end = i;
    while (end < 8 && groups[end] === 0) end += 1;
    if (end - i > best.length) best = { start: i, length: end - i };
    i = end;
  }
  const hex = (list: number[]) => list.map((group) => group.toString(16)).join(':');
  if (best.length < 2) return hex(groups);
  return `${hex(groups.slice(0, best.start))}::${hex(groups.slice(best.start + best.length))}`;
}

/** `[v6]:port` or `[v6]` -> v6; `a.b.c.d:port` -> a.b.c.d (forms some proxies write in X-Forwarded-For). */
function withoutPort(address: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  if (bracketed) return bracketed[1]!;
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(address);
  return v4 ? v4[1]! : address;
}

/**
 * Who the address-keyed rate-limit tiers count a client as (docs/api.md
 * "Rate limiting", docs/security.md "Client addresses"). An IPv4 address is itself;
 * an IPv4-mapped (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2) or IPv4-compatible
 * (`::a.b.c.d`) IPv6 address, however spelled, is the IPv4 address inside it;
 * any other IPv6 address is its first `ipv6Prefix` bits, written canonically
 * with the length (`2001:db8:1:2::/64`): one subscriber gets at least a /64
 * (RFC 6177), so a client changing the low bits buys no fresh budget.
 * Anything else (no address at all: `unknown`) is keyed as given.
 */
export function rateLimitIdentity(address: string, ipv6Prefix = 64): string {
  const text = withoutPort(address.trim());
  const v4 = parseIpv4(text);
  if (v4 !== null) return text;
  const v6 = parseIpv6(text);
  if (v6 === null) return address;
  // ::ffff:0:0/96, and ::/96 past 0.0.0.0/8 (so that :: and ::1 stay IPv6).
  if (v6 >> 32n === 0xffffn || (v6 >> 32n === 0n && v6 >= 1n << 24n)) {
    const n = Number(v6 & 0xffffffffn);
    return [24, 16, 8, 0].map((shift) => (n >>> shift) & 0xff).join('.');
  }
  const bits = Math.min(128, Math.max(0, Math.trunc(ipv6Prefix)));
  const mask = bits === 0 ? 0n : (MAX_IPV6 >> BigInt(128 - bits)) << BigInt(128 - bits);
  return `${formatIpv6(v6 & mask)}/${bits}`;
}
