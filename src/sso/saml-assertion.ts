/**
 * What a verified assertion says, read from the bytes its signature covers:
 * the subject, its bearer confirmation, the conditions, the attributes and
 * the email address the service signs the person in with (docs/sso.md
 * "Sign-in"). Every check here is against the service's own expectations:
 * the IdP's entity id, our entity id (audience) and ACS URL (recipient), and
 * the caller's clock.
 */
import { childElements, invalidResponse, NS, textOf } from './saml-xml.js';

const BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
/** Where Okta, Google (mail/email) and Entra ID (the WS-Federation claim URI) put the address when NameID is not it. */
export const EMAIL_ATTRIBUTES = ['email', 'mail', 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress'];
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export interface Expectations {
  idpEntityId: string;
  spEntityId: string;
  acsUrl: string;
  now: Date;
  skewMs: number;
}

export interface AssertionContent {
  assertionId: string;
  nameId: string;
  nameIdFormat: string | null;
  email: string;
  attributes: Record<string, string[]>;
  /** The bearer confirmation's InResponseTo, null when absent. */
  inResponseTo: string | null;
  /** After this instant the assertion can no longer pass these checks: how long to remember its id. */
  notOnOrAfter: Date;
}

function one(parent: Element, local: string, what: string): Element {
  const found = childElements(parent, NS.assertion, local);
  if (found.length !== 1) throw invalidResponse(`expected exactly one ${what}`);
  return found[0]!;
}

function instant(element: Element, attribute: string): number | null {
  const value = element.getAttribute(attribute);
  if (value === null || value === '') return null;
  const ms = Date.parse(value);
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(value) || Number.isNaN(ms)) {
    throw invalidResponse(`${element.localName}@${attribute} is not a date-time`);
  }
  return ms;
}

/** `now` within [notBefore - skew, notOnOrAfter + skew). */
function checkWindow(element: Element, expect: Expectations, what: string): number | null {
  const now = expect.now.getTime();
  const notBefore = instant(element, 'NotBefore');
  const notOnOrAfter = instant(element, 'NotOnOrAfter');
  if (notBefore !== null && now < notBefore - expect.skewMs) throw invalidResponse(`${what} is not valid yet`);
  if (notOnOrAfter !== null && now >= notOnOrAfter + expect.skewMs) throw invalidResponse(`${what} has expired`);
  return notOnOrAfter;
}

function readAttributes(assertion: Element): Record<string, string[]> {
  const attributes = new Map<string, string[]>();
  for (const statement of childElements(assertion, NS.assertion, 'AttributeStatement')) {
    for (const attribute of childElements(statement, NS.assertion, 'Attribute')) {
      const name = attribute.getAttribute('Name') ?? '';
      if (!name) continue;
      const values = childElements(attribute, NS.assertion, 'AttributeValue').map((value) => textOf(value));
      attributes.set(name, [...(attributes.get(name) ?? []), ...values]);
    }
  }
  return Object.fromEntries(attributes);
}

/** The bearer SubjectConfirmation meant for us, or throws; answers its data element. */
function bearerConfirmation(subject: Element, expect: Expectations): { data: Element; notOnOrAfter: number } {
  const reasons: string[] = [];
  for (const confirmation of childElements(subject, NS.assertion, 'SubjectConfirmation')) {
    if (confirmation.getAttribute('Method') !== BEARER) continue;
    const data = childElements(confirmation, NS.assertion, 'SubjectConfirmationData');
    if (data.length !== 1) {
      reasons.push('a bearer confirmation without exactly one SubjectConfirmationData');
      continue;
    }
    const element = data[0]!;
    if (element.getAttribute('Recipient') !== expect.acsUrl) {
      reasons.push('the Recipient is not our ACS URL');
      continue;
    }
    const notOnOrAfter = instant(element, 'NotOnOrAfter');
    if (notOnOrAfter === null) {
      reasons.push('the bearer confirmation has no NotOnOrAfter');
      continue;
    }
    try {
      checkWindow(element, expect, 'the subject confirmation');
    } catch (error) {
      reasons.push((error as Error).message.replace('SAML response refused: ', ''));
      continue;
    }
    return { data: element, notOnOrAfter };
  }
  throw invalidResponse(reasons[0] ?? 'no bearer SubjectConfirmation');
}

/** NameID when it is an address (whatever its Format says; an emailAddress NameID that is not one falls through). */
function pickEmail(nameId: string, attributes: Record<string, string[]>): string {
  if (EMAIL.test(nameId)) return nameId;
  for (const name of EMAIL_ATTRIBUTES) {
    const found = attributes[name]?.find((value) => EMAIL.test(value));
    if (found) return found;
  }
  throw invalidResponse('no email address (NameID in emailAddress format, or an email / mail attribute)');
}

/** Reads and checks the assertion (parsed from its signed bytes, or from the signed response's). */
export function readAssertion(assertion: Element, expect: Expectations): AssertionContent {
  const assertionId = assertion.getAttribute('ID') ?? '';
  if (!assertionId || assertion.getAttribute('Version') !== '2.0')
    throw invalidResponse('the Assertion has no ID or is not 2.0');
  if (textOf(one(assertion, 'Issuer', 'assertion Issuer')) !== expect.idpEntityId) {
    throw invalidResponse("the Assertion's Issuer is not the IdP of this connection");
  }
  const subject = one(assertion, 'Subject', 'Subject');
  const nameIdElement = one(subject, 'NameID', 'NameID');
  const nameId = textOf(nameIdElement);
  if (!nameId || nameId.length > 1024) throw invalidResponse('the NameID is empty or too long');
  const confirmation = bearerConfirmation(subject, expect);

  const conditions = one(assertion, 'Conditions', 'Conditions');
  const conditionsEnd = checkWindow(conditions, expect, 'the assertion');
  const restrictions = childElements(conditions, NS.assertion, 'AudienceRestriction');
  if (restrictions.length === 0) throw invalidResponse('the assertion has no AudienceRestriction');
  for (const restriction of restrictions) {
    const audiences = childElements(restriction, NS.assertion, 'Audience').map((a) => textOf(a));
    if (!audiences.includes(expect.spEntityId)) throw invalidResponse('the assertion is meant for another audience');
  }
  for (const statement of childElements(assertion, NS.assertion, 'AuthnStatement')) {
    const sessionEnd = instant(statement, 'SessionNotOnOrAfter');
    if (sessionEnd !== null && expect.now.getTime() >= sessionEnd + expect.skewMs) {
      throw invalidResponse('the IdP session has ended');
    }
  }

  const attributes = readAttributes(assertion);
  const format = nameIdElement.getAttribute('Format');
  const ends = [confirmation.notOnOrAfter, conditionsEnd ?? Number.POSITIVE_INFINITY];
  return {
    assertionId,
    nameId,
    nameIdFormat: format,
    email: pickEmail(nameId, attributes),
    attributes,
    inResponseTo: confirmation.data.getAttribute('InResponseTo') || null,
    notOnOrAfter: new Date(Math.min(...ends) + expect.skewMs),
  };
}
