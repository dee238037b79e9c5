/**
 * samlify's entities for one connection, built per call from the
 * connection's row (nothing cached: a connection's certificates change
 * without a restart).
 *
 * samlify refuses to parse anything until a schema validator is registered,
 * and that registration is module-wide. The validators it suggests check
 * against the SAML XSDs with native code or a JVM, which Workers cannot run.
 * Ours checks well-formedness (strict parsing, no DTD); the guarantees a
 * schema would add for the elements we read are the structural checks in
 * saml-response.ts, made on the same DOM whose values the service uses.
 */
import * as samlify from 'samlify';
import { parseStrictXml } from './saml-xml.js';

export const BINDING = {
  redirect: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect',
  post: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST',
} as const;

const UNUSED = 'https://unused.invalid/';

export const NAMEID_EMAIL = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';

samlify.setSchemaValidator({
  validate: async (xml: string) => {
    parseStrictXml(xml, (reason) => new Error(reason));
    return 'well-formed';
  },
});

export interface SamlSp {
  entityId: string;
  acsUrl: string;
}

export interface SamlIdp {
  entityId: string;
  /** The IdP's HTTP-Redirect SingleSignOnService URL (only needed to start a sign-in). */
  entryPoint?: string;
  /** Base64 DER bodies (checkCertificate). */
  certificates: string[];
}

export function spEntity(sp: SamlSp) {
  return samlify.ServiceProvider({
    entityID: sp.entityId,
    authnRequestsSigned: false,
    wantAssertionsSigned: true,
    nameIDFormat: [NAMEID_EMAIL],
    assertionConsumerService: [{ Binding: BINDING.post, Location: sp.acsUrl }],
    // samlify's own clock checks (it reads Date.now()); ours use the injected clock with the same skew.
    clockDrifts: [-60_000, 60_000],
  });
}

export function idpEntity(idp: SamlIdp) {
  return samlify.IdentityProvider({
    entityID: idp.entityId,
    wantAuthnRequestsSigned: false,
    signingCert: idp.certificates,
    // samlify's IdP metadata needs a sign-in service even where none is used (validating a response), and
    // warns on the console at each construction without a logout service, which we never use: a reserved
    // name (RFC 2606) that nothing ever fetches stands in for what is not there.
    singleSignOnService: [{ Binding: BINDING.redirect, Location: idp.entryPoint ?? UNUSED }],
    singleLogoutService: [{ Binding: BINDING.redirect, Location: UNUSED }],
  });
}
