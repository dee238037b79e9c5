import { DOMParser } from '@xmldom/xmldom';
import { beforeAll, describe, expect, it } from 'vitest';
import { SignedXml } from 'xml-crypto';
import { SsoConfigError, type SsoErrorCode, SsoFlowError } from '../../src/sso/errors.js';
import {
  authnRequestUrl,
  checkCertificate,
  parseIdpMetadata,
  type SamlSp,
  spMetadata,
  validateSamlResponse,
} from '../../src/sso/saml.js';
import {
  createSamlIdp,
  createSigningKey,
  type RespondOptions,
  readAuthnRequest,
  type SigningKey,
  startSamlIdpServer,
  type TestSamlIdp,
} from '../support/saml-idp.js';

let key: SigningKey;
let otherKey: SigningKey;
beforeAll(async () => {
  [key, otherKey] = await Promise.all([createSigningKey('Okta'), createSigningKey('Entra')]);
});

/** Okta's shape: md: prefix, one signing key, both bindings, NameIDFormats. */
function oktaMetadata(cert: string, extra = ''): string {
  return `<?xml version="1.0" encoding="UTF-8"?><md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="http://www.okta.com/exk1abc"><md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol"><md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>${cert}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor><md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified</md:NameIDFormat><md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat><md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://acme.okta.com/app/acme_gatehouse_1/exk1abc/sso/saml"/><md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://acme.okta.com/app/acme_gatehouse_1/exk1abc/sso/saml"/></md:IDPSSODescriptor>${extra}</md:EntityDescriptor>`;
}

/**
 * Entra's shape: default namespace, a metadata signature, WS-Federation
 * RoleDescriptors with their own keys before the IDPSSODescriptor, two
 * signing certificates during a rollover, KeyDescriptor without `use` in
 * the SAML descriptor.
 */
function entraMetadata(certs: string[]): string {
  const keys = certs
    .map(
      (c) =>
        `<KeyDescriptor use="signing"><KeyInfo xmlns="http://www.w3.org/2000/09/xmldsig#"><X509Data><X509Certificate>${c}</X509Certificate></X509Data></KeyInfo></KeyDescriptor>`,
    )
    .join('');
  return `<?xml version="1.0" encoding="utf-8"?><EntityDescriptor ID="_6f1b" entityID="https://sts.windows.net/0f6c2b5e-tenant/" xmlns="urn:oasis:names:tc:SAML:2.0:metadata"><Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo><CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/><Reference URI="#_6f1b"><DigestValue>AAAA</DigestValue></Reference></SignedInfo><SignatureValue>AAAA</SignatureValue></Signature><RoleDescriptor xsi:type="fed:SecurityTokenServiceType" protocolSupportEnumeration="http://docs.oasis-open.org/wsfed/federation/200706" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:fed="http://docs.oasis-open.org/wsfed/federation/200706">${keys}</RoleDescriptor><IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">${keys.replaceAll(' use="signing"', '')}<SingleLogoutService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://login.microsoftonline.com/0f6c2b5e-tenant/saml2"/><SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://login.microsoftonline.com/0f6c2b5e-tenant/saml2"/><SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://login.microsoftonline.com/0f6c2b5e-tenant/saml2"/></IDPSSODescriptor></EntityDescriptor>`;
}

/** Whether some signature in the response verifies with `certificatePem`, on its own (no structural check). */
function liveSignature(samlResponse: string, certificatePem: string): boolean {
  const xml = Buffer.from(samlResponse, 'base64').toString('utf8');
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  return Array.from(doc.getElementsByTagNameNS('http://www.w3.org/2000/09/xmldsig#', 'Signature')).some((element) => {
    const sig = new SignedXml({ publicCert: certificatePem });
    try {
      sig.loadSignature(element);
      return sig.checkSignature(xml);
    } catch {
      return false;
    }
  });
}

/** The local names of the elements that hold a signature. */
function signedElements(samlResponse: string): string[] {
  const doc = new DOMParser().parseFromString(Buffer.from(samlResponse, 'base64').toString('utf8'), 'text/xml');
  return Array.from(doc.getElementsByTagNameNS('http://www.w3.org/2000/09/xmldsig#', 'Signature')).map(
    (signature) => (signature.parentNode as Element).localName,
  );
}

function refused(fn: () => unknown, field: string, message: RegExp): void {
  let error: unknown;
  try {
    fn();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(SsoConfigError);
  expect((error as SsoConfigError).field).toBe(field);
  expect((error as SsoConfigError).message).toMatch(message);
}

describe('checkCertificate', () => {
  it('takes base64 DER or PEM and answers the base64 DER body', () => {
    expect(checkCertificate(key.certificate)).toBe(key.certificate);
    expect(checkCertificate(key.certificatePem)).toBe(key.certificate);
    expect(checkCertificate(`\n  ${key.certificate.replace(/(.{64})/g, '$1\n  ')}\n`)).toBe(key.certificate);
  });

  it('refuses what is not one X.509 certificate with an RSA key', async () => {
    refused(() => checkCertificate(''), 'idpCertificate', /not base64/);
    refused(() => checkCertificate('not a certificate!'), 'idpCertificate', /not base64/);
    refused(() => checkCertificate(btoa('hello world, not DER')), 'idpCertificate', /X.509/);
    refused(() => checkCertificate(key.certificate.slice(0, 400)), 'idpCertificate', /X.509/);
    refused(() => checkCertificate(key.certificatePem + otherKey.certificatePem), 'idpCertificate', /exactly one/);
    // A private key is DER and base64 too, but not a certificate.
    refused(
      () => checkCertificate(key.privateKeyPem.replace(/-----[^-]+-----/g, '')),
      'idpCertificate',
      /bad|structure/,
    );
    const empty = await createSigningKey('Empty extensions', 'RSA', { emptyExtensions: true });
    refused(() => checkCertificate(empty.certificate), 'idpCertificate', /empty extensions/);
    const ec = await createSigningKey('EC IdP', 'EC');
    refused(() => checkCertificate(ec.certificate), 'idpCertificate', /not RSA/);
  });
});

describe('parseIdpMetadata', () => {
  it('reads Okta-style metadata: entity id, HTTP-Redirect entry point, signing certificate', () => {
    expect(parseIdpMetadata(oktaMetadata(key.certificate))).toEqual({
      entityId: 'http://www.okta.com/exk1abc',
      entryPoint: 'https://acme.okta.com/app/acme_gatehouse_1/exk1abc/sso/saml',
      certificates: [key.certificate],
    });
  });

  it('reads Entra-style metadata with two certificates during a rollover', () => {
    const wrapped = otherKey.certificate.replace(/(.{76})/g, '$1\n');
    expect(parseIdpMetadata(entraMetadata([key.certificate, wrapped]))).toEqual({
      entityId: 'https://sts.windows.net/0f6c2b5e-tenant/',
      entryPoint: 'https://login.microsoftonline.com/0f6c2b5e-tenant/saml2',
      certificates: [key.certificate, otherKey.certificate],
    });
  });

  it('refuses a DOCTYPE or entities (XXE), whatever they declare', () => {
    const xxe = `<?xml version="1.0"?><!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>${oktaMetadata(key.certificate).replace('<?xml version="1.0" encoding="UTF-8"?>', '').replace('exk1abc"', 'exk1abc&xxe;"')}`;
    refused(() => parseIdpMetadata(xxe), 'metadataXml', /document type declaration/);
    const bomb = `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>${oktaMetadata(key.certificate).replace('<?xml version="1.0" encoding="UTF-8"?>', '')}`;
    refused(() => parseIdpMetadata(bomb), 'metadataXml', /document type declaration/);
  });

  it('refuses what it cannot use', () => {
    const okta = oktaMetadata(key.certificate);
    refused(() => parseIdpMetadata(''), 'metadataXml', /empty/);
    refused(() => parseIdpMetadata('<md:EntityDescriptor'), 'metadataXml', /well-formed/);
    refused(() => parseIdpMetadata('<a><b></a>'), 'metadataXml', /well-formed/);
    refused(() => parseIdpMetadata('<html><body>login</body></html>'), 'metadataXml', /root/);
    const two = `<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">${okta.replace(/<\?xml[^>]*>/, '')}${okta.replace(/<\?xml[^>]*>/, '').replace('exk1abc"', 'exk2"')}</md:EntitiesDescriptor>`;
    refused(() => parseIdpMetadata(two), 'metadataXml', /exactly one EntityDescriptor/);
    const one = `<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">${okta.replace(/<\?xml[^>]*>/, '')}</md:EntitiesDescriptor>`;
    expect(parseIdpMetadata(one).entityId).toBe('http://www.okta.com/exk1abc');
    const noRedirect = okta.replace(/<md:SingleSignOnService Binding="[^"]*HTTP-Redirect"[^>]*\/>/, '');
    refused(() => parseIdpMetadata(noRedirect), 'metadataXml', /HTTP-Redirect/);
    const noCert = okta.replace(/<md:KeyDescriptor[\s\S]*<\/md:KeyDescriptor>/, '');
    refused(() => parseIdpMetadata(noCert), 'metadataXml', /no signing certificate/);
    const encryptionOnly = okta.replace('use="signing"', 'use="encryption"');
    refused(() => parseIdpMetadata(encryptionOnly), 'metadataXml', /no signing certificate/);
    refused(() => parseIdpMetadata(oktaMetadata('AAAA')), 'metadataXml', /X.509/);
    const noEntityId = okta.replace(' entityID="http://www.okta.com/exk1abc"', '');
    refused(() => parseIdpMetadata(noEntityId), 'metadataXml', /entityID/);
    const javascript = okta.replaceAll('https://acme.okta.com/app', 'javascript:alert(1)//');
    refused(() => parseIdpMetadata(javascript), 'metadataXml', /http/);
    const spOnly = okta.replaceAll('md:IDPSSODescriptor', 'md:SPSSODescriptor');
    refused(() => parseIdpMetadata(spOnly), 'metadataXml', /IDPSSODescriptor/);
    refused(() => parseIdpMetadata(`${okta}<!-- ${'x'.repeat(262_144)} -->`), 'metadataXml', /256 KiB/);
  });
});

describe('spMetadata', () => {
  it('describes our SP: unsigned requests, signed assertions wanted, ACS on HTTP-POST, email NameID', () => {
    const xml = spMetadata({
      entityId: 'https://auth.example.com/api/sso/connections/c1/saml-metadata',
      acsUrl: 'https://auth.example.com/api/auth/sso/saml2/callback/c1',
    });
    expect(xml).toContain('entityID="https://auth.example.com/api/sso/connections/c1/saml-metadata"');
    expect(xml).toContain('AuthnRequestsSigned="false"');
    expect(xml).toContain('WantAssertionsSigned="true"');
    expect(xml).toMatch(
      /<AssertionConsumerService[^>]*Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https:\/\/auth.example.com\/api\/auth\/sso\/saml2\/callback\/c1"/,
    );
    expect(xml).toContain('<NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</NameIDFormat>');
    expect(xml).not.toContain('KeyDescriptor');
  });
});

const sp: SamlSp = {
  entityId: 'https://auth.example.com/api/sso/connections/c1/saml-metadata',
  acsUrl: 'https://auth.example.com/api/auth/sso/saml2/callback/c1',
};

describe('authnRequestUrl', () => {
  it("sends an unsigned AuthnRequest to the IdP's HTTP-Redirect URL, RelayState = the state", async () => {
    const idp = await createSamlIdp({ ssoUrl: 'https://idp.example/sso/saml?tenant=acme' });
    const { url, requestId } = authnRequestUrl({
      sp,
      idp: { entityId: idp.entityId, entryPoint: idp.ssoUrl, certificates: [idp.certificate] },
      relayState: 'state-123',
    });
    const parsed = new URL(url);
    expect(`${parsed.origin}${parsed.pathname}`).toBe('https://idp.example/sso/saml');
    expect(parsed.searchParams.get('tenant')).toBe('acme');
    expect(parsed.searchParams.get('RelayState')).toBe('state-123');
    expect(parsed.searchParams.has('Signature')).toBe(false);
    expect(requestId).toMatch(/^_[0-9a-f-]{36}$/);
    expect(readAuthnRequest(url)).toEqual({ id: requestId, acsUrl: sp.acsUrl, issuer: sp.entityId });
  });
});

describe('validateSamlResponse', () => {
  let idp: TestSamlIdp;
  let requestId: string;
  let requestUrl: string;
  beforeAll(async () => {
    idp = await createSamlIdp({ entityId: 'https://idp.example/metadata', ssoUrl: 'https://idp.example/sso' });
    ({ url: requestUrl, requestId } = authnRequestUrl({
      sp,
      idp: { entityId: idp.entityId, entryPoint: idp.ssoUrl, certificates: [idp.certificate] },
      relayState: 'state',
    }));
  });

  const validate = (samlResponse: string, overrides: Partial<Parameters<typeof validateSamlResponse>[0]> = {}) =>
    validateSamlResponse({
      samlResponse,
      sp,
      idp: { entityId: idp.entityId, certificates: [idp.certificate] },
      expectedRequestId: requestId,
      now: new Date(),
      clockSkewSeconds: 60,
      ...overrides,
    });
  const respond = (options: Partial<RespondOptions> = {}) =>
    idp.respond({ authnRequestUrl: requestUrl, email: 'ada@acme.example', ...options });

  async function refusedWith(promise: Promise<unknown>, code: SsoErrorCode, message: RegExp): Promise<void> {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error, 'refused').toBeInstanceOf(SsoFlowError);
    expect((error as SsoFlowError).code).toBe(code);
    expect((error as SsoFlowError).message).toMatch(message);
  }

  describe('accepts', () => {
    it('a signed assertion', async () => {
      const before = Date.now();
      const signed = await respond({ sign: 'assertion' });
      expect(signedElements(signed)).toEqual(['Assertion']);
      const result = await validate(signed);
      expect(result).toMatchObject({ nameId: 'ada@acme.example', email: 'ada@acme.example', attributes: {} });
      expect(result.assertionId).toMatch(/^_/);
      // Five minutes from the IdP plus the skew: how long the caller remembers the id.
      expect(result.notOnOrAfter.getTime()).toBeGreaterThanOrEqual(before + 6 * 60_000 - 1000);
      expect(result.notOnOrAfter.getTime()).toBeLessThanOrEqual(Date.now() + 6 * 60_000);
    });

    it('a signed response, and a response with both signed', async () => {
      const response = await respond({ sign: 'response' });
      expect(signedElements(response)).toEqual(['Response']);
      expect((await validate(response)).email).toBe('ada@acme.example');
      const both = await respond({ sign: 'both' });
      expect(signedElements(both).sort()).toEqual(['Assertion', 'Response']);
      expect((await validate(both)).email).toBe('ada@acme.example');
    });

    it('with an XML declaration, as most IdPs send it', async () => {
      const xml = Buffer.from(await respond({ sign: 'both' }), 'base64').toString('utf8');
      const declared = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>\n${xml}`).toString('base64');
      expect((await validate(declared)).email).toBe('ada@acme.example');
    });

    it('RSA-SHA512', async () => {
      expect((await validate(await respond({ signatureAlgorithm: 'rsa-sha512' }))).email).toBe('ada@acme.example');
    });

    it('the second of two certificates (a rollover)', async () => {
      const other = await createSigningKey('old');
      const result = await validate(await respond(), {
        idp: { entityId: idp.entityId, certificates: [other.certificate, idp.certificate] },
      });
      expect(result.email).toBe('ada@acme.example');
    });

    it('Entra ID style: persistent NameID, email and groups in claim-URI attributes, names kept as sent', async () => {
      const attributes = {
        'http://schemas.microsoft.com/identity/claims/objectidentifier': 'a1b2c3d4-0000-4000-8000-000000000001',
        'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress': 'Grace.Hopper@Acme.example',
        'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name': 'Grace Hopper',
        'http://schemas.microsoft.com/ws/2008/06/identity/claims/groups': [
          '5c1a1f6e-1111-4000-8000-00000000000a',
          '5c1a1f6e-2222-4000-8000-00000000000b',
        ],
      };
      const response = await respond({
        style: 'entra',
        email: 'unused@acme.example',
        nameId: 'q3Xh0Zb8l2mG9yUu1Vq4pL7k',
        nameIdFormat: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
        attributes,
      });
      const xml = Buffer.from(response, 'base64').toString('utf8');
      expect(xml).not.toContain('saml:');
      expect(xml).toMatch(/<Assertion xmlns="urn:oasis:names:tc:SAML:2.0:assertion"[^>]* IssueInstant="[^"]+\.\d{7}Z"/);
      const result = await validate(response);
      expect(result).toMatchObject({
        nameId: 'q3Xh0Zb8l2mG9yUu1Vq4pL7k',
        nameIdFormat: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
        email: 'Grace.Hopper@Acme.example',
      });
      expect(result.attributes).toEqual(
        Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, Array.isArray(v) ? v : [v]])),
      );
    });

    it('Okta/Google style: unspecified NameID that is not an address, then `email` or `mail`', async () => {
      const base = { nameId: '00u1abcd', nameIdFormat: 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified' };
      const a = await validate(await respond({ ...base, attributes: { email: 'a@acme.example' } }));
      expect(a.email).toBe('a@acme.example');
      const b = await validate(await respond({ ...base, attributes: { mail: 'b@acme.example', groups: ['x', 'y'] } }));
      expect(b).toMatchObject({ email: 'b@acme.example', attributes: { groups: ['x', 'y'] } });
      await refusedWith(validate(await respond(base)), 'invalid_response', /no email address/);
    });

    it('an IdP-initiated response (no InResponseTo) when no request is expected', async () => {
      const response = await idp.respond({ acsUrl: sp.acsUrl, spEntityId: sp.entityId, email: 'ada@acme.example' });
      expect((await validate(response, { expectedRequestId: null })).email).toBe('ada@acme.example');
    });

    it('within the clock skew', async () => {
      const response = await respond();
      expect((await validate(response, { now: new Date(Date.now() - 55_000) })).email).toBe('ada@acme.example');
      expect((await validate(response, { now: new Date(Date.now() + 5 * 60_000 + 55_000) })).email).toBeTruthy();
    });
  });

  describe('refuses', () => {
    it('an unsigned response', async () => {
      await refusedWith(validate(await respond({ sign: 'none' })), 'invalid_response', /not signed/);
    });

    it('a response signed by another key, even one it carries in KeyInfo', async () => {
      const attacker = await createSigningKey('attacker');
      for (const sign of ['assertion', 'response'] as const) {
        const forged = await respond({ sign, signingKey: attacker });
        await refusedWith(validate(forged), 'invalid_response', /does not verify with the connection's certificates/);
      }
    });

    it('a tampered signed response (NameID changed after signing)', async () => {
      for (const sign of ['assertion', 'response'] as const) {
        const xml = Buffer.from(await respond({ sign }), 'base64').toString('utf8');
        const tampered = xml.replace('>ada@acme.example<', '>ceo@acme.example<');
        expect(tampered).not.toBe(xml);
        await refusedWith(validate(Buffer.from(tampered).toString('base64')), 'invalid_response', /does not verify/);
      }
    });

    /**
     * Each forgery but the ds:Object one still carries a signature that
     * verifies with the IdP's key (checked here with xml-crypto alone): what
     * refuses it is the structure, not broken crypto. (xml-crypto itself
     * refuses two Signature elements with the same value.)
     */
    it.each([
      ['xsw-extensions', 'assertion', true, /exactly one Assertion/],
      ['xsw-object', 'assertion', false, /exactly one Assertion/],
      ['xsw-two-assertions', 'assertion', true, /exactly one Assertion/],
      ['xsw-response', 'response', true, /exactly one Response/],
      ['misplaced-signature', 'assertion', true, /Reference is not the ID of the element it is in/],
      ['comment-injection', 'assertion', true, /comments/],
      ['encrypted', 'assertion', false, /encrypted assertions are not supported/],
    ] as const)('signature wrapping and kin: %s (%s signed)', async (attack, sign, live, message) => {
      const forged = await respond({
        sign,
        attack,
        email: 'ada@acme.example.evil.example',
        forgedEmail: 'ceo@acme.example',
      });
      expect(liveSignature(forged, idp.key.certificatePem)).toBe(live);
      await refusedWith(validate(forged), 'invalid_response', message);
    });

    it('SHA-1, saying why', async () => {
      await refusedWith(
        validate(await respond({ signatureAlgorithm: 'rsa-sha1' })),
        'invalid_response',
        /rsa-sha1 uses SHA-1, which is collision-broken/,
      );
    });

    it('another audience, destination, recipient or issuer', async () => {
      const cases: [Partial<RespondOptions>, RegExp][] = [
        [{ audience: 'https://other-sp.example/metadata' }, /another audience/],
        [{ destination: 'https://other-sp.example/acs' }, /Destination is not our ACS URL/],
        [{ recipient: 'https://other-sp.example/acs' }, /Recipient is not our ACS URL/],
        [{ issuer: 'https://other-idp.example/metadata' }, /Issuer is not the IdP/],
      ];
      for (const [options, message] of cases) {
        for (const sign of ['assertion', 'response'] as const) {
          await refusedWith(validate(await respond({ ...options, sign })), 'invalid_response', message);
        }
      }
    });

    it('an expired or not yet valid assertion (60 s skew)', async () => {
      const now = Date.now();
      const expired = await respond({ issueInstant: new Date(now - 10 * 60_000) });
      await refusedWith(validate(expired), 'invalid_response', /expired/);
      const confirmationExpired = await respond({ subjectNotOnOrAfter: new Date(now - 61_000) });
      await refusedWith(validate(confirmationExpired), 'invalid_response', /subject confirmation has expired/);
      const early = await respond();
      await refusedWith(validate(early, { now: new Date(now - 120_000) }), 'invalid_response', /not valid yet/);
      await refusedWith(validate(early, { now: new Date(now + 6 * 60_000 + 5000) }), 'invalid_response', /expired/);
    });

    it('an answer to another request, or to none when one was sent', async () => {
      const foreign = await respond({ inResponseTo: '_someone-elses-request' });
      await refusedWith(validate(foreign), 'invalid_response', /another request/);
      const unsolicited = await idp.respond({ acsUrl: sp.acsUrl, spEntityId: sp.entityId, email: 'ada@acme.example' });
      await refusedWith(validate(unsolicited), 'idp_initiated_refused', /unsolicited/);
      // An unsolicited signed assertion, our request id added to its unsigned Response: still unsolicited.
      const bound = Buffer.from(unsolicited, 'base64')
        .toString('utf8')
        .replace('<samlp:Response ', `<samlp:Response InResponseTo="${requestId}" `);
      expect(liveSignature(Buffer.from(bound).toString('base64'), idp.key.certificatePem)).toBe(true);
      await refusedWith(validate(Buffer.from(bound).toString('base64')), 'idp_initiated_refused', /unsolicited/);
      // IdP-initiated allowed: an InResponseTo is then an answer to a request this sign-in did not send.
      await refusedWith(validate(await respond(), { expectedRequestId: null }), 'invalid_response', /did not send/);
    });

    it("what samlify's second lock refuses: its clock is the real one", async () => {
      // Expired by the real clock, valid by the injected one: only samlify (Date.now()) can refuse it.
      const issued = new Date(Date.now() - 20 * 60_000);
      const old = await respond({ issueInstant: issued });
      await refusedWith(
        validate(old, { now: new Date(issued.getTime() + 60_000) }),
        'invalid_response',
        /samlify refused it \(ERR_SUBJECT_UNCONFIRMED\)/,
      );
    });

    it("an IdP's error status as idp_error", async () => {
      const denied = await respond({ status: 'urn:oasis:names:tc:SAML:2.0:status:Responder' });
      await refusedWith(validate(denied), 'idp_error', /status:Responder/);
    });

    it('what is not a SAML response', async () => {
      await refusedWith(validate(''), 'invalid_response', /no SAMLResponse/);
      await refusedWith(validate('%%%'), 'invalid_response', /not base64/);
      await refusedWith(validate(btoa('<html>hello</html>')), 'invalid_response', /not a SAML Response/);
      await refusedWith(validate(btoa('<samlp:Response')), 'invalid_response', /well-formed/);
      const xml = Buffer.from(await respond(), 'base64').toString('utf8');
      const doctype = `<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>${xml}`;
      await refusedWith(validate(Buffer.from(doctype).toString('base64')), 'invalid_response', /document type/);
      await refusedWith(
        validate(await respond(), { idp: { entityId: idp.entityId, certificates: [] } }),
        'invalid_response',
        /no certificate/,
      );
    });
  });
});

describe('the test IdP over HTTP (for browser tests)', () => {
  const field = (page: string, name: string) =>
    new RegExp(`name="${name}" value="([^"]*)"`).exec(page)?.[1]?.replaceAll('&amp;', '&').replaceAll('&quot;', '"');

  it('shows a login form for our AuthnRequest and posts the signed response back to the ACS', async () => {
    const server = await startSamlIdpServer();
    try {
      const metadata = await (await fetch(`${server.origin}/metadata`)).text();
      const idp = parseIdpMetadata(metadata);
      expect(idp).toEqual({
        entityId: server.entityId,
        entryPoint: `${server.origin}/sso`,
        certificates: [server.certificate],
      });
      const { url, requestId } = authnRequestUrl({ sp, idp, relayState: 'state-42' });

      const login = await (await fetch(url)).text();
      expect(login).toMatch(/<input type="email" name="email"/);
      expect(server.requests).toEqual([requestId]);

      server.loginOptions = { attributes: { groups: ['engineering'] } };
      const form = new URLSearchParams({
        SAMLRequest: field(login, 'SAMLRequest')!,
        RelayState: field(login, 'RelayState')!,
        email: 'lin@acme.example',
      });
      const posted = await (await fetch(`${server.origin}/sso`, { method: 'POST', body: form })).text();
      expect(posted).toContain(`action="${sp.acsUrl}"`);
      expect(posted).toContain('document.forms[0].submit()');
      expect(field(posted, 'RelayState')).toBe('state-42');
      const result = await validateSamlResponse({
        samlResponse: field(posted, 'SAMLResponse')!,
        sp,
        idp,
        expectedRequestId: requestId,
        now: new Date(),
      });
      expect(result).toMatchObject({ email: 'lin@acme.example', attributes: { groups: ['engineering'] } });

      const unsolicited = await (
        await fetch(server.idpInitiatedUrl({ acsUrl: sp.acsUrl, spEntityId: sp.entityId, email: 'lin@acme.example' }))
      ).text();
      expect(field(unsolicited, 'RelayState')).toBeUndefined();
      const initiated = { samlResponse: field(unsolicited, 'SAMLResponse')!, sp, idp, now: new Date() };
      expect((await validateSamlResponse({ ...initiated, expectedRequestId: null })).email).toBe('lin@acme.example');
    } finally {
      await server.close();
    }
  });
});
