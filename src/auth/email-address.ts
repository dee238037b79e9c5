/**
 * The one form an email address is compared and stored in (docs/security.md
 * "Account linking"): surrounding white space trimmed, ASCII letters
 * lower-cased, every other character as it is. Two addresses match only when
 * their canonical forms are equal, so `\u212Aate@example.com` (KELVIN SIGN) is
 * never `kate@example.com`, as it would be under full Unicode case folding.
 */
export function canonicalEmail(address: string): string {
  return address.trim().replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/**
 * Whether full Unicode lower-casing (String#toLowerCase, which the auth
 * library applies to every address it stores or looks up) leaves the
 * canonical form as it is. An address for which it does not (an upper-case
 * letter outside ASCII) would be folded by the library onto another
 * address, so the service refuses it wherever it enters.
 */
export function keepsItsCase(address: string): boolean {
  const canonical = canonicalEmail(address);
  return canonical.toLowerCase() === canonical;
}
