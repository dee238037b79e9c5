/**
 * TXT lookups for proving a domain's ownership, on Node's resolver
 * (node:dns/promises, c-ares). A name without the record, a name that does
 * not exist and a server that does not answer in time all give `[]`: the
 * domain is simply not proven yet. Any other failure (refused, SERVFAIL, a
 * malformed answer) throws a DnsLookupError, since the lookup said nothing
 * about the domain.
 */
import { Resolver } from 'node:dns/promises';
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
 * A TxtResolver on its own c-ares channel: `servers` (`ip:port` / `[v6]:port`,
 * as config.dns.servers holds them) when given, else the system's resolvers.
 */
export function createNodeTxtResolver(
  servers: readonly string[] | null,
  options: NodeTxtResolverOptions = {},
): TxtResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 2000, tries: options.tries ?? 2 });
  if (servers && servers.length > 0) resolver.setServers([...servers]);
  return async (name) => {
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
