/**
 * SAML metadata in both directions (docs/sso.md "Connections"): the identity
 * provider's, pasted by an administrator, read for its entity id, its
 * HTTP-Redirect sign-in URL and its signing certificates; and ours, served to
 * the IdP. The IdP's document is not trusted for anything else: its own
 * signature (Entra signs it) is not checked, since the administrator pasting
 * it is the trust, and only its single IDPSSODescriptor is read.
 */
import { SsoConfigError } from './errors.js';
import { checkCertificate } from './saml-certificate.js';
import { BINDING, type SamlSp, spEntity } from './saml-entities.js';
import { childElements, descendants, NS, parseStrictXml, textOf } from './saml-xml.js';

/** Entra's federation metadata is about 20 KB, Okta's 2 KB; an aggregate of many IdPs is refused anyway. */
const MAX_METADATA = 262_144;
const SAML2_PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';

export interface IdpMetadata {
  entityId: string;
  entryPoint: string;
  certificates: string[];
}

const fail = (reason: string) => new SsoConfigError('metadataXml', `Unusable IdP metadata: ${reason}`);

/** An absolute http(s) URL, or throws. */
function checkedUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw fail('the HTTP-Redirect SingleSignOnService Location is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw fail('the SingleSignOnService is not http(s)');
  return url.href;
}

/** Reads an IdP's metadata; throws SsoConfigError (`metadataXml`) when the service could not use it. */
export function parseIdpMetadata(xml: string): IdpMetadata {
  if (typeof xml !== 'string' || xml.length === 0) throw fail('empty');
  if (xml.length > MAX_METADATA) throw fail('larger than 256 KiB');
  const doc = parseStrictXml(xml, fail);
  const entities = descendants(doc, NS.metadata, 'EntityDescriptor');
  const root = doc.documentElement!;
  const rootIsEntity = root.namespaceURI === NS.metadata && root.localName === 'EntityDescriptor';
  const rootIsGroup = root.namespaceURI === NS.metadata && root.localName === 'EntitiesDescriptor';
  if (!rootIsEntity && !rootIsGroup) throw fail('the root is not an md:EntityDescriptor');
  if (entities.length !== 1) throw fail('expected exactly one EntityDescriptor');
  const entity = entities[0]!;
  const entityId = (entity.getAttribute('entityID') ?? '').trim();
  if (!entityId || entityId.length > 1024) throw fail('the EntityDescriptor has no entityID');

  const idps = childElements(entity, NS.metadata, 'IDPSSODescriptor').filter((idp) =>
    (idp.getAttribute('protocolSupportEnumeration') ?? '').split(/\s+/).includes(SAML2_PROTOCOL),
  );
  if (idps.length !== 1) throw fail('expected exactly one SAML 2.0 IDPSSODescriptor');
  const idp = idps[0]!;

  // We send the AuthnRequest with the HTTP-Redirect binding only.
  const redirect = childElements(idp, NS.metadata, 'SingleSignOnService').find(
    (service) => service.getAttribute('Binding') === BINDING.redirect,
  );
  if (!redirect) throw fail('no SingleSignOnService with the HTTP-Redirect binding');
  const entryPoint = checkedUrl((redirect.getAttribute('Location') ?? '').trim());

  const certificates = new Set<string>();
  for (const key of childElements(idp, NS.metadata, 'KeyDescriptor')) {
    const use = key.getAttribute('use');
    if (use && use !== 'signing') continue; // absent = both uses
    for (const cert of descendants(key, NS.dsig, 'X509Certificate')) {
      try {
        certificates.add(checkCertificate(textOf(cert)));
      } catch (error) {
        throw fail(error instanceof Error ? error.message : 'bad certificate');
      }
    }
  }
  if (certificates.size === 0) throw fail('no signing certificate (KeyDescriptor use="signing")');
  return { entityId, entryPoint, certificates: [...certificates] };
}

/**
 * Our metadata for one connection: unsigned AuthnRequests, signed
 * assertions wanted, the ACS on HTTP-POST, email NameIDs preferred.
 */
export function spMetadata(sp: SamlSp): string {
  return spEntity(sp).getMetadata();
}
