/**
 * The client address from X-Forwarded-For behind `hops` trusted proxies, each
 * of which appends the address it saw: the entry `hops` from the right (spec
 * §8 rule 2: one hop, the right-most). Entries further left are whatever the
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
