/**
 * TXT lookups for proving a domain's ownership, on Node's resolver
 * (node:dns/promises, c-ares). A name without the record, a name that does
 * not exist and a server that does not answer in time all give `[]`: the
 * domain is simply not proven yet. Any other failure (refused, SERVFAIL, a
 * malformed answer) throws a DnsLookupError, since the lookup said nothing
 * about the domain.
 */
import { lookup, Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import { DnsLookupError, type TxtResolver } from './dns-txt-types.js';

export { DnsLookupError, type TxtResolver } from './dns-txt-types.js';

/** c-ares codes that mean "the domain does not prove anything": no record, no name, no answer in time. */
const UNPROVEN = new Set(['ENODATA', 'ENOTFOUND', 'ETIMEOUT']);

export interface NodeTxtResolverOptions {
  /** Per-try timeout in milliseconds (c-ares doubles it on the next try). */
  timeoutMs?: number;
  tries?: number;
}

/**
 * A TxtResolver on its own c-ares channel: `servers` (`ip:port`,
 * `[v6]:port` or `host:port`, as config.dns.servers holds them) when given,
 * else the system's resolvers. c-ares takes addresses only: a host name is
 * looked up (the system's way, as a socket would) when the first TXT lookup
 * needs it.
 */
export function createNodeTxtResolver(
  servers: readonly string[] | null,
  options: NodeTxtResolverOptions = {},
): TxtResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 2000, tries: options.tries ?? 2 });
  let ready: Promise<void> | null = null;
  const configure = async () => {
    if (servers && servers.length > 0) resolver.setServers((await Promise.all(servers.map(addressesOf))).flat());
  };
  return async (name) => {
    ready ??= configure().catch((error: unknown) => {
      ready = null;
      throw error;
    });
    await ready;
    try {
      const records = await resolver.resolveTxt(name);
      return records.map((chunks) => chunks.join(''));
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'string' && UNPROVEN.has(code)) return [];
      throw new DnsLookupError(typeof code === 'string' ? code : 'EUNKNOWN', name);
    }
  };
}

/** `host:port` as the `ip:port` / `[v6]:port` entries c-ares takes; an address stays as it is. */
async function addressesOf(server: string): Promise<string[]> {
  const at = server.lastIndexOf(':');
  const host = server.slice(0, at);
  const port = server.slice(at + 1);
  if (host.startsWith('[') || isIP(host)) return [server];
  try {
    const found = await lookup(host, { all: true });
    return found.map(({ address, family }) => (family === 6 ? `[${address}]:${port}` : `${address}:${port}`));
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new DnsLookupError(typeof code === 'string' ? code : 'EUNKNOWN', host);
  }
}
