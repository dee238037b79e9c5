import { beforeAll, describe, expect, it } from 'vitest';
import { SsoConfigError } from '../../src/sso/errors.js';
import { checkCertificate, parseIdpMetadata, spMetadata } from '../../src/sso/saml.js';
import { createSigningKey, type SigningKey } from '../support/saml-idp.js';

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
