/**
 * A SAML 2.0 identity provider for tests: samlify's IdentityProvider with its
 * own self-signed RSA key pair (@peculiar/x509 over WebCrypto), answering our
 * AuthnRequests with signed responses, and the forgeries a service provider
 * must refuse, built from the same genuine responses.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inflateRawSync } from 'node:zlib';
import * as x509 from '@peculiar/x509';
import { DOMParser, XMLSerializer } from '@xmldom/xmldom';
import * as samlify from 'samlify';

x509.cryptoProvider.set(crypto);

export interface SigningKey {
  /** PKCS#8 PEM (what samlify and xml-crypto sign with). */
  privateKeyPem: string;
  /** Base64 DER body, as the service stores it. */
  certificate: string;
  certificatePem: string;
}

function pem(label: string, der: ArrayBuffer): string {
  const body = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trimEnd();
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
}

/**
 * A fresh RSA 2048 key and a self-signed certificate for it, valid from
 * yesterday for a year, with the extensions IdP certificates carry.
 * `emptyExtensions` writes an empty extensions list instead (what
 * @peculiar/x509 does when given none): invalid DER that OpenSSL reads and
 * BoringSSL (Workers) refuses.
 */
export async function createSigningKey(
  commonName = 'Test IdP',
  algorithm: 'RSA' | 'EC' = 'RSA',
  { emptyExtensions = false } = {},
): Promise<SigningKey> {
  const params =
    algorithm === 'RSA'
      ? {
          name: 'RSASSA-PKCS1-v1_5',
          hash: 'SHA-256',
          publicExponent: new Uint8Array([1, 0, 1]),
          modulusLength: 2048,
        }
      : { name: 'ECDSA', namedCurve: 'P-256' };
  const keys = (await crypto.subtle.generateKey(params, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex'),
    name: `CN=${commonName}`,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 365 * 86_400_000),
    signingAlgorithm: algorithm === 'RSA' ? params : { name: 'ECDSA', hash: 'SHA-256' },
    keys,
    extensions: emptyExtensions
      ? []
      : [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        ],
  });
  const pkcs8 = await crypto.subtle.exportKey('pkcs8', keys.privateKey);
  return {
    privateKeyPem: pem('PRIVATE KEY', pkcs8),
    certificate: Buffer.from(cert.rawData).toString('base64'),
    certificatePem: cert.toString('pem'),
  };
}

const NS = {
  protocol: 'urn:oasis:names:tc:SAML:2.0:protocol',
  assertion: 'urn:oasis:names:tc:SAML:2.0:assertion',
  dsig: 'http://www.w3.org/2000/09/xmldsig#',
};
const BINDING_REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const BINDING_POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';
export const NAMEID = {
  email: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
  persistent: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
  unspecified: 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
};
export const SIGNATURE_ALGORITHMS = {
  'rsa-sha256': 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
  'rsa-sha512': 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512',
  'rsa-sha1': 'http://www.w3.org/2000/09/xmldsig#rsa-sha1',
} as const;

/**
 * The forgeries, each made from a genuine signed response (the signature
 * wrapping variants known as XSW, and their kin):
 * - `xsw-extensions`: the signed assertion moved into the Response's
 *   Extensions, a forged unsigned assertion (other NameID, other ID) in its place;
 * - `xsw-object`: a forged assertion in its place carrying a copy of the
 *   signature whose ds:Object holds the signed original;
 * - `xsw-two-assertions`: a forged unsigned assertion before the signed one;
 * - `xsw-response`: a forged unsigned Response wrapping the signed one in its Extensions;
 * - `misplaced-signature`: the assertion's (valid) signature moved up to the Response;
 * - `comment-injection`: a comment inside the NameID (c14n leaves comments out of the digest);
 * - `encrypted`: an EncryptedAssertion instead of the Assertion.
 */
export type SamlAttack =
  | 'xsw-extensions'
  | 'xsw-object'
  | 'xsw-two-assertions'
  | 'xsw-response'
  | 'misplaced-signature'
  | 'comment-injection'
  | 'encrypted';

export interface RespondOptions {
  /** The URL our authnRequestUrl() answered: the request's ID, ACS URL and issuer come from it. */
  authnRequestUrl?: string;
  /** Without authnRequestUrl: the request answered; null or absent = IdP-initiated (no InResponseTo). */
  requestId?: string | null;
  acsUrl?: string;
  spEntityId?: string;
  email: string;
  /** Default: the email. */
  nameId?: string;
  nameIdFormat?: string;
  attributes?: Record<string, string | string[]>;
  /** What is signed; default the assertion. */
  sign?: 'assertion' | 'response' | 'both' | 'none';
  signatureAlgorithm?: keyof typeof SIGNATURE_ALGORITHMS;
  /** Sign with this key and certificate instead of the IdP's own. */
  signingKey?: SigningKey;
  attack?: SamlAttack;
  /** The email the forged assertion of an attack claims. */
  forgedEmail?: string;
  // Overrides of what a well-behaved IdP sends (null = leave the attribute out).
  issuer?: string;
  audience?: string;
  destination?: string | null;
  recipient?: string;
  inResponseTo?: string | null;
  notBefore?: Date;
  notOnOrAfter?: Date;
  subjectNotOnOrAfter?: Date;
  issueInstant?: Date;
  status?: string;
  /**
   * `entra`: Microsoft Entra ID's shape: no `saml:` prefix (a default
   * namespace on the Response's Issuer and on the Assertion) and times with
   * seven fractional digits.
   */
  style?: 'samlify' | 'entra';
}

export interface TestSamlIdp {
  entityId: string;
  ssoUrl: string;
  metadataXml: string;
  /** Base64 DER body. */
  certificate: string;
  key: SigningKey;
  /** A base64 SAMLResponse, as the IdP's page would post it. */
  respond(options: RespondOptions): Promise<string>;
}

const xmlEscape = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const attr = (name: string, value: string | null | undefined) =>
  value === null || value === undefined ? '' : ` ${name}="${xmlEscape(value)}"`;
const newId = () => `_${crypto.randomUUID()}`;

/** ID, ACS URL and issuer of the AuthnRequest in a HTTP-Redirect URL. */
export function readAuthnRequest(url: string): { id: string; acsUrl: string | null; issuer: string | null } {
  const encoded = new URL(url).searchParams.get('SAMLRequest');
  if (!encoded) throw new Error('no SAMLRequest in the URL');
  const xml = inflateRawSync(Buffer.from(encoded, 'base64')).toString('utf8');
  const request = new DOMParser().parseFromString(xml, 'text/xml').documentElement!;
  return {
    id: request.getAttribute('ID')!,
    acsUrl: request.getAttribute('AssertionConsumerServiceURL'),
    issuer: request.getElementsByTagNameNS(NS.assertion, 'Issuer')[0]?.textContent ?? null,
  };
}

function attributeStatement(attributes: Record<string, string | string[]>): string {
  const entries = Object.entries(attributes);
  if (entries.length === 0) return '';
  const body = entries
    .map(([name, values]) => {
      const list = (Array.isArray(values) ? values : [values])
        .map((v) => `<saml:AttributeValue xsi:type="xs:string">${xmlEscape(v)}</saml:AttributeValue>`)
        .join('');
      return `<saml:Attribute Name="${xmlEscape(name)}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:unspecified">${list}</saml:Attribute>`;
    })
    .join('');
  return `<saml:AttributeStatement>${body}</saml:AttributeStatement>`;
}

interface Filled {
  id: string;
  assertionId: string;
  issuer: string;
  spEntityId: string;
  acsUrl: string;
}

/** The unsigned response XML, in samlify's default template's shape (prefixes, order), with our values. */
function responseXml(options: RespondOptions, filled: Filled, inResponseTo: string | null): string {
  const now = options.issueInstant ?? new Date();
  const fiveMinutes = new Date(now.getTime() + 5 * 60_000);
  const entra = options.style === 'entra';
  const iso = (date: Date) => (entra ? date.toISOString().replace(/Z$/, '0000Z') : date.toISOString());
  const status = options.status ?? 'urn:oasis:names:tc:SAML:2.0:status:Success';
  const issuer = `<saml:Issuer>${xmlEscape(filled.issuer)}</saml:Issuer>`;
  const destination = options.destination === undefined ? filled.acsUrl : options.destination;
  const xml = `<samlp:Response xmlns:samlp="${NS.protocol}" xmlns:saml="${NS.assertion}" ID="${filled.id}" Version="2.0" IssueInstant="${iso(now)}"${attr('Destination', destination)}${attr('InResponseTo', inResponseTo)}>${issuer}<samlp:Status><samlp:StatusCode Value="${xmlEscape(status)}"/></samlp:Status><saml:Assertion xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xs="http://www.w3.org/2001/XMLSchema" ID="${filled.assertionId}" Version="2.0" IssueInstant="${iso(now)}">${issuer}<saml:Subject><saml:NameID Format="${xmlEscape(options.nameIdFormat ?? NAMEID.email)}">${xmlEscape(options.nameId ?? options.email)}</saml:NameID><saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="${iso(options.subjectNotOnOrAfter ?? options.notOnOrAfter ?? fiveMinutes)}" Recipient="${xmlEscape(options.recipient ?? filled.acsUrl)}"${attr('InResponseTo', inResponseTo)}/></saml:SubjectConfirmation></saml:Subject><saml:Conditions NotBefore="${iso(options.notBefore ?? now)}" NotOnOrAfter="${iso(options.notOnOrAfter ?? fiveMinutes)}"><saml:AudienceRestriction><saml:Audience>${xmlEscape(options.audience ?? filled.spEntityId)}</saml:Audience></saml:AudienceRestriction></saml:Conditions><saml:AuthnStatement AuthnInstant="${iso(now)}" SessionIndex="${filled.assertionId}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>${attributeStatement(options.attributes ?? {})}</saml:Assertion></samlp:Response>`;
  if (!entra) return xml;
  return xml
    .replace(` xmlns:saml="${NS.assertion}"`, '')
    .replace('<saml:Issuer>', `<saml:Issuer xmlns="${NS.assertion}">`)
    .replace('<saml:Assertion ', `<saml:Assertion xmlns="${NS.assertion}" `)
    .replace(/<(\/?)saml:/g, '<$1');
}

const only = (parent: Document | Element, ns: string, local: string) => parent.getElementsByTagNameNS(ns, local)[0]!;
const directChild = (parent: Element, ns: string, local: string) =>
  Array.from(parent.childNodes).find(
    (n): n is Element => n.nodeType === 1 && (n as Element).namespaceURI === ns && (n as Element).localName === local,
  );

/** A copy of `assertion` claiming `email`, unsigned, under a new ID. */
function forge(assertion: Element, email: string): Element {
  const forged = assertion.cloneNode(true) as Element;
  forged.setAttribute('ID', newId());
  const signature = directChild(forged, NS.dsig, 'Signature');
  if (signature) forged.removeChild(signature);
  only(forged, NS.assertion, 'NameID').textContent = email;
  return forged;
}

/** Applies `attack` to a genuine signed response. */
function attackResponse(xml: string, attack: SamlAttack, forgedEmail: string): string {
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  const response = doc.documentElement!;
  const assertion = directChild(response, NS.assertion, 'Assertion')!;
  const extensions = () => {
    const element = doc.createElementNS(NS.protocol, 'samlp:Extensions');
    // Extensions follow Issuer and Signature.
    const status = directChild(response, NS.protocol, 'Status')!;
    response.insertBefore(element, status);
    return element;
  };
  switch (attack) {
    case 'xsw-extensions': {
      const forged = forge(assertion, forgedEmail);
      response.replaceChild(forged, assertion);
      extensions().appendChild(assertion);
      break;
    }
    case 'xsw-object': {
      const forged = forge(assertion, forgedEmail);
      const signature = directChild(assertion, NS.dsig, 'Signature');
      if (!signature) throw new Error('xsw-object needs a signed assertion');
      const copy = signature.cloneNode(true) as Element;
      const object = doc.createElementNS(NS.dsig, 'ds:Object');
      copy.appendChild(object);
      forged.insertBefore(copy, only(forged, NS.assertion, 'Subject'));
      response.replaceChild(forged, assertion);
      object.appendChild(assertion);
      break;
    }
    case 'xsw-two-assertions':
      response.insertBefore(forge(assertion, forgedEmail), assertion);
      break;
    case 'xsw-response': {
      const outer = response.cloneNode(false) as Element;
      outer.setAttribute('ID', newId());
      for (const name of ['Issuer', 'Status']) {
        const ns = name === 'Issuer' ? NS.assertion : NS.protocol;
        outer.appendChild(directChild(response, ns, name)!.cloneNode(true));
      }
      outer.appendChild(forge(assertion, forgedEmail));
      const wrapper = doc.createElementNS(NS.protocol, 'samlp:Extensions');
      outer.insertBefore(wrapper, directChild(outer, NS.protocol, 'Status')!);
      doc.replaceChild(outer, response);
      wrapper.appendChild(response);
      break;
    }
    case 'misplaced-signature': {
      const signature = directChild(assertion, NS.dsig, 'Signature');
      if (!signature) throw new Error('misplaced-signature needs a signed assertion');
      assertion.removeChild(signature);
      response.insertBefore(signature, directChild(response, NS.protocol, 'Status')!);
      break;
    }
    case 'comment-injection': {
      const nameId = only(assertion, NS.assertion, 'NameID');
      const text = nameId.textContent ?? '';
      const cut = text.indexOf('@') + 1 + forgedEmail.split('@')[1]!.length;
      nameId.textContent = text.slice(0, cut);
      nameId.appendChild(doc.createComment(''));
      nameId.appendChild(doc.createTextNode(text.slice(cut)));
      break;
    }
    case 'encrypted': {
      const encrypted = doc.createElementNS(NS.assertion, 'saml:EncryptedAssertion');
      encrypted.appendChild(doc.createElementNS('http://www.w3.org/2001/04/xmlenc#', 'xenc:EncryptedData'));
      response.replaceChild(encrypted, assertion);
      break;
    }
  }
  return new XMLSerializer().serializeToString(doc);
}

function idpMetadataXml(entityId: string, ssoUrl: string, certificate: string): string {
  return samlify
    .IdentityProvider({
      entityID: entityId,
      signingCert: certificate,
      wantAuthnRequestsSigned: false,
      nameIDFormat: [NAMEID.email],
      singleSignOnService: [
        { Binding: BINDING_REDIRECT, Location: ssoUrl },
        { Binding: BINDING_POST, Location: ssoUrl },
      ],
      singleLogoutService: [{ Binding: BINDING_REDIRECT, Location: `${ssoUrl}/logout` }],
    })
    .getMetadata();
}

/** A SAML IdP with its own key; `ssoUrl` is where AuthnRequests go (served by startSamlIdpServer). */
export async function createSamlIdp({
  entityId = `https://idp.test/${crypto.randomUUID()}`,
  ssoUrl = 'https://idp.test/sso',
}: {
  entityId?: string;
  ssoUrl?: string;
} = {}): Promise<TestSamlIdp> {
  const key = await createSigningKey(`IdP ${entityId}`);
  const respond = async (options: RespondOptions): Promise<string> => {
    const request = options.authnRequestUrl ? readAuthnRequest(options.authnRequestUrl) : null;
    const acsUrl = options.acsUrl ?? request?.acsUrl;
    const spEntityId = options.spEntityId ?? request?.issuer;
    if (!acsUrl || !spEntityId) throw new Error('respond() needs the ACS URL and SP entity id (or authnRequestUrl)');
    const requestId = request?.id ?? options.requestId ?? null;
    const inResponseTo = options.inResponseTo === undefined ? requestId : options.inResponseTo;
    const filled = { id: newId(), assertionId: newId(), issuer: options.issuer ?? entityId, spEntityId, acsUrl };
    const unsigned = responseXml(options, filled, inResponseTo);
    const sign = options.sign ?? 'assertion';
    let xml = unsigned;
    if (sign !== 'none') {
      const signer = options.signingKey ?? key;
      const idp = samlify.IdentityProvider({
        entityID: entityId,
        privateKey: signer.privateKeyPem,
        signingCert: signer.certificate,
        requestSignatureAlgorithm: SIGNATURE_ALGORITHMS[options.signatureAlgorithm ?? 'rsa-sha256'],
        singleSignOnService: [{ Binding: BINDING_REDIRECT, Location: ssoUrl }],
        singleLogoutService: [{ Binding: BINDING_REDIRECT, Location: `${ssoUrl}/logout` }],
      });
      // samlify signs what the SP's metadata asks for: the assertion when it wants signed assertions, the
      // message when it wants signed messages or not signed assertions.
      const sp = samlify.ServiceProvider({
        entityID: spEntityId,
        assertionConsumerService: [{ Binding: BINDING_POST, Location: acsUrl }],
        wantAssertionsSigned: sign !== 'response',
        wantMessageSigned: sign !== 'assertion',
      });
      const { context } = await idp.createLoginResponse(
        sp,
        { extract: {} },
        'post',
        { email: options.email },
        {
          customTagReplacement: () => ({ id: filled.id, context: unsigned }),
        },
      );
      xml = Buffer.from(context, 'base64').toString('utf8');
    }
    if (options.attack) xml = attackResponse(xml, options.attack, options.forgedEmail ?? 'ceo@victim.example');
    return Buffer.from(xml, 'utf8').toString('base64');
  };
  return {
    entityId,
    ssoUrl,
    metadataXml: idpMetadataXml(entityId, ssoUrl, key.certificate),
    certificate: key.certificate,
    key,
    respond,
  };
}

export interface SamlIdpServer extends TestSamlIdp {
  /** http://127.0.0.1:<port> */
  origin: string;
  /** What every sign-in through the login form adds to the response (attributes, NameID, attacks...). */
  loginOptions: Partial<RespondOptions>;
  /** The AuthnRequest IDs the login form was shown for, in order. */
  requests: string[];
  /** An IdP-initiated sign-in: GET it to be posted to `acsUrl` as `email` (no InResponseTo). */
  idpInitiatedUrl(options: { acsUrl: string; spEntityId: string; email: string; relayState?: string }): string;
  close(): Promise<void>;
}

const html = (title: string, body: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${xmlEscape(title)}</title></head><body>${body}</body></html>`;
const hidden = (name: string, value: string | null) =>
  value === null ? '' : `<input type="hidden" name="${name}" value="${xmlEscape(value)}">`;

/** The HTTP-POST binding: a page that posts the response to the ACS by itself. */
function autoPost(acsUrl: string, samlResponse: string, relayState: string | null): string {
  return html(
    'Signing in',
    `<form method="post" action="${xmlEscape(acsUrl)}">${hidden('SAMLResponse', samlResponse)}${hidden('RelayState', relayState)}<noscript><button type="submit">Continue</button></noscript></form><script>document.forms[0].submit()</script>`,
  );
}

async function formBody(request: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/**
 * createSamlIdp() behind a login page on loopback, for browser tests:
 * `GET /sso?SAMLRequest=…&RelayState=…` shows a form with an email field;
 * posting it answers a page that posts the SAMLResponse and RelayState to
 * the AuthnRequest's ACS URL. `GET /metadata` serves the metadata;
 * `GET /idp-initiated?acs&sp&email[&RelayState]` posts an unsolicited response.
 */
export async function startSamlIdpServer({ entityId }: { entityId?: string } = {}): Promise<SamlIdpServer> {
  let idp: TestSamlIdp | undefined;
  const state = { loginOptions: {} as Partial<RespondOptions>, requests: [] as string[] };
  const send = (response: ServerResponse, status: number, type: string, body: string) => {
    response.writeHead(status, { 'content-type': `${type}; charset=utf-8`, 'cache-control': 'no-store' });
    response.end(body);
  };
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    if (!idp) return send(response, 503, 'text/plain', 'starting');
    if (request.method === 'GET' && url.pathname === '/metadata') {
      return send(response, 200, 'application/samlmetadata+xml', idp.metadataXml);
    }
    if (request.method === 'GET' && url.pathname === '/sso') {
      const { id } = readAuthnRequest(url.href);
      state.requests.push(id);
      const form = `<h1>Test IdP</h1><form method="post" action="/sso">${hidden('SAMLRequest', url.searchParams.get('SAMLRequest'))}${hidden('RelayState', url.searchParams.get('RelayState'))}<label>Email <input type="email" name="email" required autofocus></label><button type="submit">Sign in</button></form>`;
      return send(response, 200, 'text/html', html('Test IdP sign-in', form));
    }
    if (request.method === 'POST' && url.pathname === '/sso') {
      const form = await formBody(request);
      const requestUrl = `${idp.ssoUrl}?${new URLSearchParams({ SAMLRequest: form.get('SAMLRequest') ?? '' })}`;
      const { acsUrl } = readAuthnRequest(requestUrl);
      const email = form.get('email') ?? '';
      const samlResponse = await idp.respond({ email, ...state.loginOptions, authnRequestUrl: requestUrl });
      return send(
        response,
        200,
        'text/html',
        autoPost(state.loginOptions.acsUrl ?? acsUrl!, samlResponse, form.get('RelayState')),
      );
    }
    if (request.method === 'GET' && url.pathname === '/idp-initiated') {
      const acsUrl = url.searchParams.get('acs') ?? '';
      const spEntityId = url.searchParams.get('sp') ?? '';
      const email = url.searchParams.get('email') ?? '';
      const samlResponse = await idp.respond({ email, ...state.loginOptions, acsUrl, spEntityId, requestId: null });
      return send(response, 200, 'text/html', autoPost(acsUrl, samlResponse, url.searchParams.get('RelayState')));
    }
    send(response, 404, 'text/plain', 'not found');
  };
  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => send(response, 500, 'text/plain', String(error)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  idp = await createSamlIdp({ ...(entityId ? { entityId } : {}), ssoUrl: `${origin}/sso` });
  const created = idp;
  return {
    ...created,
    origin,
    get loginOptions() {
      return state.loginOptions;
    },
    set loginOptions(value) {
      state.loginOptions = value;
    },
    requests: state.requests,
    idpInitiatedUrl: ({ acsUrl, spEntityId, email, relayState }) =>
      `${origin}/idp-initiated?${new URLSearchParams({ acs: acsUrl, sp: spEntityId, email, ...(relayState ? { RelayState: relayState } : {}) })}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
