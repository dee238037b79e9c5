/**
 * SAML 2.0 service provider for enterprise single sign-on (docs/sso.md), on
 * samlify. What the rest of the service calls; protocol only, no HTTP.
 */
export { EMAIL_ATTRIBUTES } from './saml-assertion.js';
export { checkCertificate } from './saml-certificate.js';
export type { SamlIdp, SamlSp } from './saml-entities.js';
export { type IdpMetadata, parseIdpMetadata, spMetadata } from './saml-metadata.js';
export { authnRequestUrl } from './saml-request.js';
export { type SamlAssertion, type ValidateSamlResponseInput, validateSamlResponse } from './saml-response.js';
