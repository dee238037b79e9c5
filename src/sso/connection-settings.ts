/**
 * A connection's settings as a request gives them, turned into what is kept
 * (docs/sso.md "Connections"): an OIDC issuer with the endpoints its
 * discovery document names, the client secret sealed under AUTH_SECRET, a
 * SAML IdP from its metadata or field by field. A setting the service cannot
 * use throws SsoConfigError naming the request's field.
 */
import type { ConnectionChanges } from '../db/queries/sso-connections.js';
import type { SsoRoleMapping } from '../db/sso-tables.js';
import { createSecretBox, type SecretBox } from '../shared/secret-box.js';
import { SsoConfigError } from './errors.js';
import type { SsoFetchPolicy } from './fetch.js';
import { discoverOidc } from './oidc.js';
import { checkCertificate, parseIdpMetadata } from './saml.js';

/** The request's fields (camelCase), each optional: a creation gives its type's, a change any. */
export interface ConnectionSettings {
  name?: string;
  enabled?: boolean;
  defaultRoleId?: string | null;
  roleMappings?: SsoRoleMapping[];
  mfaAtIdp?: boolean;
  allowIdpInitiated?: boolean;
  issuer?: string;
  clientId?: string;
  clientSecret?: string;
  scopes?: string[];
  metadataXml?: string;
  entryPoint?: string;
  idpEntityId?: string;
  idpCertificate?: string;
}

/** The fields only one type takes. */
const TYPE_FIELDS = {
  oidc: ['issuer', 'clientId', 'clientSecret', 'scopes'],
  saml: ['metadataXml', 'entryPoint', 'idpEntityId', 'idpCertificate', 'allowIdpInitiated'],
} as const satisfies Record<string, readonly (keyof ConnectionSettings)[]>;
const SAML_BY_HAND = ['entryPoint', 'idpEntityId', 'idpCertificate'] as const;

export interface SettingsDeps {
  /** How discovery reaches an issuer (address rules; pinned connections on Node). */
  policy: SsoFetchPolicy;
  /** Client secrets at rest. */
  secrets: SecretBox;
}

/**
 * The columns `settings` set on a connection of `type` (only those given).
 * The other type's fields are refused, as is metadataXml beside the fields it
 * would give. A new issuer is discovered again.
 */
export async function storedSettings(
  type: 'oidc' | 'saml',
  settings: ConnectionSettings,
  { policy, secrets }: SettingsDeps,
): Promise<ConnectionChanges> {
  const foreign = TYPE_FIELDS[type === 'oidc' ? 'saml' : 'oidc'].find((field) => settings[field] !== undefined);
  if (foreign)
    throw new SsoConfigError(foreign, `not a setting of ${type === 'oidc' ? 'an OIDC' : 'a SAML'} connection`);
  // A field given is kept as it is, in its column (the zod schema checked its type).
  const given = (field: keyof ConnectionSettings, column: keyof ConnectionChanges): ConnectionChanges =>
    settings[field] !== undefined ? { [column]: settings[field] } : {};
  const shared: ConnectionChanges = {
    ...given('name', 'name'),
    ...given('enabled', 'enabled'),
    ...given('defaultRoleId', 'default_role_id'),
    ...given('roleMappings', 'role_mappings'),
    ...given('mfaAtIdp', 'mfa_at_idp'),
  };
  if (type === 'oidc') {
    const { issuer, clientSecret } = settings;
    return {
      ...shared,
      ...(issuer !== undefined ? { oidc_issuer: issuer, oidc_metadata: await discoverOidc(issuer, policy) } : {}),
      ...given('clientId', 'oidc_client_id'),
      ...(clientSecret !== undefined ? { oidc_client_secret: await secrets.seal(clientSecret) } : {}),
      ...given('scopes', 'oidc_scopes'),
    };
  }
  const saml: ConnectionChanges = { ...shared, ...given('allowIdpInitiated', 'allow_idp_initiated') };
  if (settings.metadataXml !== undefined) {
    const byHand = SAML_BY_HAND.find((field) => settings[field] !== undefined);
    if (byHand) throw new SsoConfigError(byHand, 'give metadataXml or this, not both');
    const idp = parseIdpMetadata(settings.metadataXml);
    return {
      ...saml,
      saml_idp_entity_id: idp.entityId,
      saml_entry_point: idp.entryPoint,
      saml_certificates: idp.certificates,
    };
  }
  const { entryPoint, idpCertificate } = settings;
  return {
    ...saml,
    ...(entryPoint !== undefined ? { saml_entry_point: signInUrl(entryPoint, policy.httpsOnly) } : {}),
    ...given('idpEntityId', 'saml_idp_entity_id'),
    ...(idpCertificate !== undefined ? { saml_certificates: [checkCertificate(idpCertificate)] } : {}),
  };
}

/** The IdP's sign-in URL: the browser goes there, not the service (no address rule), over https in production. */
function signInUrl(raw: string, httpsOnly: boolean): string {
  const url = URL.canParse(raw) ? new URL(raw) : null;
  if (!url || !(url.protocol === 'https:' || (url.protocol === 'http:' && !httpsOnly)))
    throw new SsoConfigError('entryPoint', httpsOnly ? 'must be an https:// URL' : 'must be an http(s):// URL');
  return url.href;
}

/**
 * What the IdP is told about a connection (docs/sso.md "Connections"),
 * under AUTH_URL: the OIDC redirect URI; the SAML ACS, and the metadata URL,
 * which is also the service provider's entity id.
 */
export function spUrls(authUrl: string) {
  const base = authUrl.replace(/\/+$/, '');
  return (id: string) => {
    const metadataUrl = `${base}/api/sso/connections/${id}/saml-metadata`;
    const acsUrl = `${base}/api/auth/sso/saml2/callback/${id}`;
    return { redirectUri: `${base}/api/auth/sso/callback/${id}`, entityId: metadataUrl, acsUrl, metadataUrl };
  };
}

/** Client secrets at rest: sealed under AUTH_SECRET with their own key (the label never changes: stored secrets depend on it). */
export function ssoSecretBox(authSecret: string): SecretBox {
  return createSecretBox(authSecret, 'gatehouse sso client secrets v1');
}
