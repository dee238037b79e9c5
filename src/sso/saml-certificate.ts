/**
 * An identity provider's signing certificate as the service keeps it: the
 * base64 of its DER bytes, no PEM armour, no whitespace (docs/sso.md
 * "Connections"). The check reads the DER structure of an X.509 certificate
 * (RFC 5280 section 4.1) far enough to know it is one with an RSA public key;
 * it needs nothing from the runtime (Workers has no X509 parser to rely on),
 * and the signature verifier refuses at sign-in anything the key cannot
 * verify anyway.
 */
import { SsoConfigError } from './errors.js';

/** Larger than any certificate an IdP publishes (about 1.5 KB for RSA 2048), small enough to refuse junk early. */
const MAX_BASE64 = 16_384;
/** rsaEncryption, 1.2.840.113549.1.1.1 (RFC 8017 appendix A.1), as DER OID content octets. */
const RSA_ENCRYPTION = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

interface Tlv {
  tag: number;
  /** Where its tag byte is. */
  at: number;
  start: number;
  end: number;
}

const fail = (reason: string) => new SsoConfigError('idpCertificate', `Not a usable X.509 certificate: ${reason}`);

/** One DER tag-length-value at `at`, within `limit`; definite lengths only (DER has no other). */
function readTlv(bytes: Uint8Array, at: number, limit: number): Tlv {
  if (at + 2 > limit) throw fail('truncated');
  const tag = bytes[at]!;
  let length = bytes[at + 1]!;
  let start = at + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 3 || start + count > limit) throw fail('bad length');
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[start + i]!;
    start += count;
  }
  if (start + length > limit) throw fail('truncated');
  return { tag, at, start, end: start + length };
}

/** The values inside a constructed value, in order. */
function children(bytes: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.start; at < parent.end; ) {
    const tlv = readTlv(bytes, at, parent.end);
    out.push(tlv);
    at = tlv.end;
  }
  return out;
}

function expectTags(items: Tlv[], tags: number[], what: string): void {
  if (items.length < tags.length || tags.some((tag, i) => items[i]!.tag !== tag)) throw fail(`bad ${what}`);
}

/** Checks the structure; answers the SubjectPublicKeyInfo's bytes. */
function parseCertificate(bytes: Uint8Array): Uint8Array {
  const certificate = readTlv(bytes, 0, bytes.length);
  if (certificate.tag !== 0x30 || certificate.end !== bytes.length) throw fail('not a DER sequence');
  const parts = children(bytes, certificate);
  // tbsCertificate, signatureAlgorithm, signatureValue (BIT STRING).
  if (parts.length !== 3) throw fail('bad structure');
  expectTags(parts, [0x30, 0x30, 0x03], 'structure');
  let tbs = children(bytes, parts[0]!);
  if (tbs[0]?.tag === 0xa0) tbs = tbs.slice(1); // explicit version [0]
  // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo.
  expectTags(tbs, [0x02, 0x30, 0x30, 0x30, 0x30, 0x30], 'certificate body');
  const spki = children(bytes, tbs[5]!);
  expectTags(spki, [0x30, 0x03], 'public key');
  const algorithm = children(bytes, spki[0]!)[0];
  const oid = algorithm?.tag === 0x06 ? bytes.subarray(algorithm.start, algorithm.end) : undefined;
  if (!oid || oid.length !== RSA_ENCRYPTION.length || RSA_ENCRYPTION.some((b, i) => oid[i] !== b)) {
    throw fail('the public key is not RSA (responses are verified with RSA signatures only)');
  }
  // Extensions [3]: a SEQUENCE of one or more. An empty one is invalid DER that Node's OpenSSL reads but
  // BoringSSL (Workers' X509Certificate, which samlify uses) refuses: refused here, at configuration.
  const extensions = tbs.slice(6).find((tlv) => tlv.tag === 0xa3);
  if (extensions && children(bytes, children(bytes, extensions)[0] ?? extensions).length === 0) {
    throw fail('an empty extensions list');
  }
  return bytes.subarray(tbs[5]!.at, tbs[5]!.end);
}

function decodeBase64(text: string): Uint8Array {
  if (text.length === 0 || text.length > MAX_BASE64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4) {
    throw fail('not base64');
  }
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function encodeBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/**
 * A PEM certificate (one `BEGIN CERTIFICATE` block) or the base64 of its DER
 * bytes, whitespace allowed, to the base64 DER body; throws SsoConfigError
 * (`idpCertificate`) for anything else.
 */
export function checkCertificate(input: string): string {
  let body = input.trim();
  if (body.includes('-----')) {
    const blocks = [...body.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)];
    if (blocks.length !== 1) throw fail('expected exactly one PEM CERTIFICATE block');
    body = blocks[0]![1]!;
  }
  const bytes = decodeBase64(body.replace(/\s+/g, ''));
  parseCertificate(bytes);
  return encodeBase64(bytes);
}

/**
 * The RSA public key of a stored certificate (base64 DER) as a PEM public
 * key, taken from the DER rather than through an X.509 API the runtime may
 * lack.
 */
export function publicKeyPem(certificate: string): string {
  const spki = encodeBase64(parseCertificate(decodeBase64(certificate)));
  return `-----BEGIN PUBLIC KEY-----\n${spki.replace(/(.{64})/g, '$1\n').trimEnd()}\n-----END PUBLIC KEY-----\n`;
}
