/**
 * One enveloped XML signature of a SAML response, verified with the
 * connection's certificates only (never a key the message carries in its
 * KeyInfo), and with every algorithm it names on an allowlist. The check is
 * ours, on xml-crypto, and does not rely on samlify's: samlify picks the
 * signatures by position and verifies, but does not tell which element a
 * valid signature covers, and the signature-wrapping attacks on SAML
 * (CVE-2017-11427 and its kin) are exactly the gap between the element that
 * was signed and the element whose values are read.
 *
 * Allowed: RSA PKCS#1 v1.5 with SHA-256 or SHA-512 (what Okta, Entra ID,
 * Google and AD FS sign with by default), SHA-256/512 digests, exclusive or
 * inclusive canonicalization without comments, the enveloped-signature
 * transform. SHA-1 (`rsa-sha1`, digest `sha1`) is refused: it is
 * collision-broken (RFC 6194), and an IdP still on it can be switched to
 * SHA-256 in its settings. ECDSA is refused too: neither xml-crypto nor
 * samlify verifies it, and no mainstream IdP signs SAML with it.
 */
import { SignedXml } from 'xml-crypto';
import { publicKeyPem } from './saml-certificate.js';
import { childElements, invalidResponse, NS } from './saml-xml.js';

const ALG = {
  rsaSha256: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
  rsaSha512: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512',
  sha256: 'http://www.w3.org/2001/04/xmlenc#sha256',
  sha512: 'http://www.w3.org/2001/04/xmlenc#sha512',
  excC14n: 'http://www.w3.org/2001/10/xml-exc-c14n#',
  c14n: 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315',
  enveloped: 'http://www.w3.org/2000/09/xmldsig#enveloped-signature',
} as const;

const SIGNATURE_METHODS = new Set<string>([ALG.rsaSha256, ALG.rsaSha512]);
const DIGEST_METHODS = new Set<string>([ALG.sha256, ALG.sha512]);
const CANONICALIZATIONS = new Set<string>([ALG.excC14n, ALG.c14n]);
const TRANSFORMS = new Set<string>([ALG.enveloped, ALG.excC14n, ALG.c14n]);

function only(parent: Element, local: string, what: string): Element {
  const found = childElements(parent, NS.dsig, local);
  if (found.length !== 1) throw invalidResponse(`the signature needs exactly one ${what}`);
  return found[0]!;
}

function algorithmOf(element: Element): string {
  return element.getAttribute('Algorithm') ?? '';
}

function refuseAlgorithm(kind: string, uri: string): never {
  if (/sha1$/i.test(uri))
    throw invalidResponse(`${kind} ${uri} uses SHA-1, which is collision-broken; sign with SHA-256`);
  if (/ecdsa/i.test(uri)) throw invalidResponse(`${kind} ${uri} (ECDSA) is not supported; sign with RSA-SHA256`);
  throw invalidResponse(`${kind} ${uri || '(none)'} is not allowed`);
}

/** The SignedInfo's shape: one Reference to `#<id of the signed element>`, allowed algorithms only. */
function checkSignedInfo(signature: Element, signedId: string): void {
  const signedInfo = only(signature, 'SignedInfo', 'SignedInfo');
  const c14n = algorithmOf(only(signedInfo, 'CanonicalizationMethod', 'CanonicalizationMethod'));
  if (!CANONICALIZATIONS.has(c14n)) refuseAlgorithm('canonicalization', c14n);
  const method = algorithmOf(only(signedInfo, 'SignatureMethod', 'SignatureMethod'));
  if (!SIGNATURE_METHODS.has(method)) refuseAlgorithm('signature algorithm', method);
  const reference = only(signedInfo, 'Reference', 'Reference');
  if (reference.getAttribute('URI') !== `#${signedId}`) {
    throw invalidResponse("the signature's Reference is not the ID of the element it is in");
  }
  const digest = algorithmOf(only(reference, 'DigestMethod', 'DigestMethod'));
  if (!DIGEST_METHODS.has(digest)) refuseAlgorithm('digest algorithm', digest);
  const transforms = childElements(reference, NS.dsig, 'Transforms');
  if (transforms.length > 1) throw invalidResponse('the signature needs at most one Transforms');
  const list = transforms[0] ? childElements(transforms[0], NS.dsig, 'Transform') : [];
  const seen = list.map(algorithmOf);
  if (!seen.includes(ALG.enveloped)) throw invalidResponse('the signature is not an enveloped signature');
  for (const transform of seen) if (!TRANSFORMS.has(transform)) refuseAlgorithm('transform', transform);
}

function verifier(certificate: string): SignedXml {
  const sig = new SignedXml({ publicCert: publicKeyPem(certificate) });
  // Only what checkSignedInfo allows, so xml-crypto cannot be steered to anything else either.
  sig.SignatureAlgorithms = {
    [ALG.rsaSha256]: sig.SignatureAlgorithms[ALG.rsaSha256]!,
    [ALG.rsaSha512]: sig.SignatureAlgorithms[ALG.rsaSha512]!,
  };
  sig.HashAlgorithms = { [ALG.sha256]: sig.HashAlgorithms[ALG.sha256]!, [ALG.sha512]: sig.HashAlgorithms[ALG.sha512]! };
  return sig;
}

/**
 * Verifies `signature`, a child of `signed`, over the document `xml` (the
 * exact text `signed` was parsed from) with one of `certificates`. Answers
 * the canonical XML of the signed element (the bytes the IdP signed, which
 * is what the caller reads its values from) and the certificate that
 * verified it. Throws SsoFlowError otherwise.
 */
export function verifyEnvelopedSignature(
  xml: string,
  signed: Element,
  signature: Element,
  certificates: string[],
): { canonical: string; certificate: string } {
  const id = signed.getAttribute('ID') ?? '';
  if (!id) throw invalidResponse(`the signed ${signed.localName} has no ID`);
  checkSignedInfo(signature, id);
  for (const certificate of certificates) {
    const sig = verifier(certificate);
    try {
      sig.loadSignature(signature);
      if (!sig.checkSignature(xml)) continue;
    } catch {
      continue;
    }
    const references = sig.getSignedReferences();
    if (references.length !== 1) throw invalidResponse('the signature must cover exactly one element');
    return { canonical: references[0]!, certificate };
  }
  throw invalidResponse(`the ${signed.localName} signature does not verify with the connection's certificates`);
}
