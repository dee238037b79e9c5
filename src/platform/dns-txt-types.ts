/** What every TXT resolver (Node's, the Worker's) answers and throws; free of any runtime's modules. */

/** The TXT records at `name`, each record's character-strings joined (RFC 1035 §3.3.14, RFC 7208 §3.3). */
export type TxtResolver = (name: string) => Promise<string[]>;

/** A lookup that failed for a reason other than "no such record" or a timeout: it proved nothing either way. */
export class DnsLookupError extends Error {
  constructor(
    readonly code: string,
    readonly host: string,
  ) {
    super(`TXT lookup of ${host} failed: ${code}`);
    this.name = 'DnsLookupError';
  }
}
