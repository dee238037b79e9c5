import type { ColumnType, Generated } from 'kysely';

/** The single sign-on tables of `Database` (src/db/database.ts; migrations/0011). */

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

/** `[{ claim, value, roleId }]`: the first mapping whose claim matches sets the role (docs/sso.md). */
export interface SsoRoleMapping {
  claim: string;
  value: string;
  roleId: string;
}

/** The endpoints discovered from an OIDC issuer when it was set (docs/sso.md). */
export interface OidcMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
}

export interface SsoConnectionsTable {
  id: Generated<string>;
  tenant_id: string;
  type: 'oidc' | 'saml';
  name: string;
  enabled: Generated<boolean>;
  /** NULL: the organization's Member role. */
  default_role_id: string | null;
  role_mappings: ColumnType<SsoRoleMapping[], string | undefined, string>;
  mfa_at_idp: Generated<boolean>;
  allow_idp_initiated: Generated<boolean>;
  oidc_issuer: string | null;
  oidc_client_id: string | null;
  /** Sealed under AUTH_SECRET (src/webhooks/secrets.ts), never the secret. */
  oidc_client_secret: string | null;
  oidc_scopes: string[] | null;
  oidc_metadata: ColumnType<OidcMetadata | null, string | null, string | null>;
  saml_idp_entity_id: string | null;
  saml_entry_point: string | null;
  /** The IdP's signing certificates (PEM bodies, base64). */
  saml_certificates: string[] | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SsoDomainsTable {
  id: Generated<string>;
  tenant_id: string;
  /** Lower case, no trailing dot. */
  domain: string;
  /** The TXT record's value that proves the domain. */
  txt_value: string;
  verified_at: NullableTimestamp;
  created_at: Timestamp;
}

export interface SsoSamlReplaysTable {
  tenant_id: string;
  connection_id: string;
  assertion_id: string;
  expires_at: Timestamp;
}

export interface SsoBypassesTable {
  tenant_id: string;
  session_id: string;
  created_at: Timestamp;
}
