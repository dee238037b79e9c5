import { z } from 'zod';

/**
 * One DNS server as `ip:port`, `[v6]:port` or `host:port` (port 53 when not
 * given; a host name is looked up when the resolver is first used); null
 * when it is none of these.
 */
function dnsServer(entry: string): string | null {
  const match =
    /^(?:\[([^\]]+)\]|([\d.]+)|([a-z\d](?:[a-z\d-]{0,61}[a-z\d])?(?:\.[a-z\d](?:[a-z\d-]{0,61}[a-z\d])?)*))(?::(\d{1,5}))?$/i.exec(
      entry,
    );
  const bareV6 = !match && z.ipv6().safeParse(entry).success;
  const port = Number(match?.[4] ?? 53);
  if (port < 1 || port > 65535) return null;
  if (match?.[3] && !/^[\d.]+$/.test(match[3])) return `${match[3].toLowerCase()}:${port}`;
  const ip = bareV6 ? entry : (match?.[1] ?? match?.[2]);
  const v6 = bareV6 || match?.[1] !== undefined;
  if (!ip || !(v6 ? z.ipv6() : z.ipv4()).safeParse(ip).success) return null;
  return v6 ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** DNS_SERVERS: comma-separated entries, each normalised by `dnsServer`; a bad one is named by its position, never its value. */
export const dnsServers = z.string().transform((value, ctx) => {
  const entries = value.split(',').map((entry) => entry.trim());
  const bad = entries.flatMap((entry, i) => (dnsServer(entry) ? [] : [i + 1]));
  if (bad.length)
    ctx.addIssue({ code: 'custom', message: `entry ${bad.join(', ')}: not host[:port], ip[:port] or [v6]:port` });
  return entries.map((entry) => dnsServer(entry) ?? entry);
});
