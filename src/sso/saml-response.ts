/**
 * A SAML response posted to our ACS (docs/sso.md "Sign-in"), accepted only
 * when it is one Response carrying one plain Assertion, signed (the response,
 * the assertion or both) with the connection's certificates, for us, now, in
 * answer to our request. Our checks come first, on our own parse, so every
 * refusal says why; then samlify parses it again, a second lock with its own
 * signature, issuer and validity checks. The values returned are read from
 * the bytes a verified signature covers, never from elsewhere in the
 * document (signature wrapping).
 */
import { SsoFlowError } from './errors.js';
import { type AssertionContent, readAssertion } from './saml-assertion.js';
import { idpEntity, type SamlSp, spEntity } from './saml-entities.js';
import { verifyEnvelopedSignature } from './saml-signature.js';
import { childElements, invalidResponse, NS, parseStrictXml, textOf } from './saml-xml.js';

/** A response with a few dozen attributes is under 20 KB; Entra's with many groups stays well under this. */
const MAX_RESPONSE = 524_288;
const SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';

export interface ValidateSamlResponseInput {
  /** The SAMLResponse form field as posted (base64). */
  samlResponse: string;
  sp: SamlSp;
  idp: { entityId: string; certificates: string[] };
  /** The ID of the AuthnRequest this sign-in sent; null = IdP-initiated, when the connection allows it. */
  expectedRequestId: string | null;
  now: Date;
  clockSkewSeconds?: number;
}

export interface SamlAssertion {
  nameId: string;
  nameIdFormat: string | null;
  email: string;
  attributes: Record<string, string[]>;
  /** For the replay table, kept until `notOnOrAfter`. */
  assertionId: string;
  notOnOrAfter: Date;
}

function decode(samlResponse: unknown): string {
  if (typeof samlResponse !== 'string' || samlResponse.length === 0) throw invalidResponse('no SAMLResponse');
  if (samlResponse.length > MAX_RESPONSE) throw invalidResponse('larger than 512 KiB');
  const base64 = samlResponse.replace(/[\r\n\t ]/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0)
    throw invalidResponse('SAMLResponse is not base64');
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)));
  } catch {
    throw invalidResponse('SAMLResponse is not UTF-8');
  }
}

/**
 * Comments and processing instructions are outside what c14n signs: none is
 * accepted inside the Response (before it, xmldom shows the XML declaration
 * as one; nothing there is read).
 */
function refuseHiddenNodes(node: Node): void {
  for (let child = node.firstChild; child; child = child.nextSibling) {
    if (child.nodeType === 7 || child.nodeType === 8)
      throw invalidResponse('comments and processing instructions are refused');
    refuseHiddenNodes(child);
  }
}

/** Every ID in the document once: an element found by ID is then the only one. */
function refuseDuplicateIds(doc: Document): void {
  const seen = new Set<string>();
  for (const element of Array.from(doc.getElementsByTagName('*'))) {
    for (const name of ['ID', 'Id', 'id']) {
      const value = element.getAttribute(name);
      if (value === null || value === '') continue;
      if (seen.has(value)) throw invalidResponse('two elements share an ID');
      seen.add(value);
    }
  }
}

/** The one Response with the one Assertion, signatures only where they belong. */
function structure(doc: Document): { response: Element; assertion: Element } {
  const response = doc.documentElement!;
  if (response.namespaceURI !== NS.protocol || response.localName !== 'Response')
    throw invalidResponse('not a SAML Response');
  if (response.getAttribute('Version') !== '2.0') throw invalidResponse('not SAML 2.0');
  if (doc.getElementsByTagNameNS('*', 'EncryptedAssertion').length > 0) {
    throw invalidResponse('encrypted assertions are not supported; turn assertion encryption off at the IdP');
  }
  // Any namespace: samlify's own reading selects by local name.
  if (doc.getElementsByTagNameNS('*', 'Response').length !== 1) throw invalidResponse('expected exactly one Response');
  const assertions = Array.from(doc.getElementsByTagNameNS('*', 'Assertion'));
  if (assertions.length !== 1) throw invalidResponse('expected exactly one Assertion');
  const assertion = assertions[0]!;
  if (assertion.parentNode !== response || assertion.namespaceURI !== NS.assertion) {
    throw invalidResponse('the Assertion is not a child of the Response');
  }
  for (const signature of Array.from(doc.getElementsByTagNameNS('*', 'Signature'))) {
    const parent = signature.parentNode;
    if (signature.namespaceURI !== NS.dsig || (parent !== response && parent !== assertion)) {
      throw invalidResponse('a signature outside the Response or Assertion');
    }
  }
  return { response, assertion };
}

function checkStatus(response: Element): void {
  const status = childElements(response, NS.protocol, 'Status')[0];
  const code = status && childElements(status, NS.protocol, 'StatusCode')[0];
  const top = code?.getAttribute('Value') ?? '';
  if (top === SUCCESS) return;
  const second = (code && childElements(code, NS.protocol, 'StatusCode')[0]?.getAttribute('Value')) ?? '';
  const message = status && textOf(childElements(status, NS.protocol, 'StatusMessage')[0]);
  // The IdP's words, unsigned: printable ASCII only, bounded, before they reach a log.
  const detail = [top || 'no status', second, message?.slice(0, 200)]
    .filter(Boolean)
    .join(', ')
    .replace(/[^\x20-\x7e]/g, '?');
  throw new SsoFlowError('idp_error', `The identity provider answered with an error: ${detail}`);
}

/** The element the signed bytes hold, parsed alone. */
function signedElement(canonical: string, id: string, local: string): Element {
  const element = parseStrictXml(canonical, invalidResponse).documentElement!;
  if (element.localName !== local || element.getAttribute('ID') !== id)
    throw invalidResponse('the signed element moved');
  return element;
}

/**
 * InResponseTo binds the response to this sign-in's request. It counts only
 * where a signature covers it (the signed Response, or the signed
 * assertion's bearer confirmation): an unsolicited assertion must not become
 * an answer to our request by an attribute added to an unsigned Response.
 * Every value present, signed or not, must be the expected one.
 */
function checkInResponseTo(signed: (string | null)[], unsigned: string | null, expected: string | null): void {
  const present = (values: (string | null)[]) => values.filter((v): v is string => v !== null && v !== '');
  const all = present([...signed, unsigned]);
  if (expected === null) {
    if (all.length > 0) throw invalidResponse('an answer to a request this sign-in did not send');
    return;
  }
  if (all.some((value) => value !== expected)) throw invalidResponse('an answer to another request');
  if (present(signed).length === 0) {
    throw new SsoFlowError('idp_initiated_refused', 'SAML response refused: unsolicited (IdP-initiated) response');
  }
}

/** Validates a posted SAMLResponse; throws SsoFlowError ('invalid_response', 'idp_error', 'idp_initiated_refused'). */
export async function validateSamlResponse(input: ValidateSamlResponseInput): Promise<SamlAssertion> {
  const { sp, idp, now } = input;
  if (idp.certificates.length === 0) throw invalidResponse('the connection has no certificate');
  const xml = decode(input.samlResponse);
  const doc = parseStrictXml(xml, invalidResponse);
  const { response, assertion } = structure(doc);
  checkStatus(response);
  refuseHiddenNodes(response);
  refuseDuplicateIds(doc);

  const responseSignature = childElements(response, NS.dsig, 'Signature');
  const assertionSignature = childElements(assertion, NS.dsig, 'Signature');
  if (responseSignature.length > 1 || assertionSignature.length > 1) throw invalidResponse('more than one signature');
  if (responseSignature.length === 0 && assertionSignature.length === 0) throw invalidResponse('it is not signed');
  // Each signature present must verify; the values come from the innermost signed copy.
  let signedResponse: Element | undefined;
  let signedAssertion: Element | undefined;
  const verifiedWith = new Set<string>();
  if (responseSignature[0]) {
    const signed = verifyEnvelopedSignature(xml, response, responseSignature[0], idp.certificates);
    signedResponse = signedElement(signed.canonical, response.getAttribute('ID')!, 'Response');
    signedAssertion = childElements(signedResponse, NS.assertion, 'Assertion')[0];
    verifiedWith.add(signed.certificate);
  }
  if (assertionSignature[0]) {
    const signed = verifyEnvelopedSignature(xml, assertion, assertionSignature[0], idp.certificates);
    signedAssertion = signedElement(signed.canonical, assertion.getAttribute('ID')!, 'Assertion');
    verifiedWith.add(signed.certificate);
  }
  if (!signedAssertion) throw invalidResponse('the signed Response holds no Assertion');

  const skewMs = (input.clockSkewSeconds ?? 60) * 1000;
  const expect = { idpEntityId: idp.entityId, spEntityId: sp.entityId, acsUrl: sp.acsUrl, now, skewMs };
  const content: AssertionContent = readAssertion(signedAssertion, expect);
  const outer = signedResponse ?? response;
  const issuer = childElements(outer, NS.assertion, 'Issuer')[0];
  if (issuer && textOf(issuer) !== idp.entityId)
    throw invalidResponse("the Response's Issuer is not the IdP of this connection");
  const destination = outer.getAttribute('Destination');
  if (destination !== null && destination !== sp.acsUrl) throw invalidResponse('the Destination is not our ACS URL');
  checkInResponseTo(
    [signedResponse?.getAttribute('InResponseTo') ?? null, content.inResponseTo],
    response.getAttribute('InResponseTo'),
    input.expectedRequestId,
  );

  // samlify verifies a signature without KeyInfo with the first certificate only: give it the ones that verified.
  const second = idpEntity({ entityId: idp.entityId, certificates: [...verifiedWith] });
  try {
    await spEntity(sp).parseLoginResponse(second, 'post', { body: { SAMLResponse: input.samlResponse } });
  } catch (error) {
    // Where our checks pass and samlify's do not, the runtime is the suspect (its X.509 parser): say what it said.
    const said = error instanceof Error ? error.message : String(error);
    const code = /^[A-Z][A-Z0-9_]+/.exec(said)?.[0] ?? said.slice(0, 80).replace(/[^\x20-\x7e]/g, '?');
    throw invalidResponse(`samlify refused it (${code})`);
  }
  const { assertionId, nameId, nameIdFormat, email, attributes, notOnOrAfter } = content;
  return { nameId, nameIdFormat, email, attributes, assertionId, notOnOrAfter };
}
