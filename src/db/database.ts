import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';
import type { PlatformRole } from '../shared/permissions.js';
import type {
  ScimGroupMembersTable,
  ScimGroupRolesTable,
  ScimGroupsTable,
  ScimTokensTable,
  ScimUsersTable,
} from './scim-tables.js';
import type { SsoBypassesTable, SsoConnectionsTable, SsoDomainsTable, SsoSamlReplaysTable } from './sso-tables.js';
import type { WebhookDeliveriesTable, WebhookEndpointsTable } from './webhook-tables.js';

export type { OidcMetadata, SsoRoleMapping } from './sso-tables.js';
export type { DeliveryStatus } from './webhook-tables.js';

/**
 * The one source of table types: queries, routes and tests read them from here.
 * Column names are snake_case as in the migrations; JSON is camelCase.
 */

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface UsersTable {
  id: Generated<string>;
  name: string;
  email: string;
  email_verified: Generated<boolean>;
  image: string | null;
  role: Generated<PlatformRole>;
  deleted_at: NullableTimestamp;
  two_factor_enabled: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SessionsTable {
  id: Generated<string>;
  user_id: string;
  token: string;
  expires_at: Timestamp;
  ip_address: string | null;
  user_agent: string | null;
  active_organization_id: string | null;
  /** Created by a passkey, or completed a second factor (migrations/0007). */
  mfa: Generated<boolean>;
  /** When the session last proved every factor of its account; null: never (migrations/0009). */
  step_up_at: NullableTimestamp;
  /** The SSO connection that created the session; deleting it deletes the session (migrations/0011). */
  sso_connection_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface AccountsTable {
  id: Generated<string>;
  user_id: string;
  account_id: string;
  provider_id: string;
  access_token: string | null;
  refresh_token: string | null;
  id_token: string | null;
  access_token_expires_at: NullableTimestamp;
  refresh_token_expires_at: NullableTimestamp;
  scope: string | null;
  password: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface VerificationsTable {
  id: Generated<string>;
  identifier: string;
  value: string;
  expires_at: Timestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface OrganizationsTable {
  id: Generated<string>;
  name: string;
  slug: string;
  logo: string | null;
  metadata: string | null;
  require_mfa: Generated<boolean>;
  /** docs/sso.md "Policy" (migrations/0011). */
  require_sso: Generated<boolean>;
  created_at: Timestamp;
}

export interface MembersTable {
  id: Generated<string>;
  organization_id: string;
  user_id: string;
  /** The organization plugin's own role string; `role_id` is the source of truth for permissions. */
  role: Generated<string>;
  role_id: string | null;
  created_at: Timestamp;
}

export interface InvitationsTable {
  id: Generated<string>;
  organization_id: string;
  email: string;
  role: string | null;
  status: Generated<string>;
  inviter_id: string;
  expires_at: Timestamp;
  created_at: Timestamp;
}

export interface PermissionsTable {
  id: Generated<string>;
  resource: string;
  action: string;
  description: string;
}

export interface RolesTable {
  id: Generated<string>;
  tenant_id: string;
  name: string;
  slug: string;
  description: Generated<string>;
  is_default: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RolePermissionsTable {
  role_id: string;
  permission_id: string;
}

export interface AuditLogsTable {
  id: Generated<string>;
  tenant_id: string | null;
  actor_id: string | null;
  action: string;
  metadata: ColumnType<Record<string, unknown>, string, never>;
  request_id: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

export interface ApiKeysTable {
  id: Generated<string>;
  tenant_id: string;
  created_by: string;
  name: string;
  scopes: string[];
  expires_at: NullableTimestamp;
  key_prefix: Generated<string>;
  last_four: string;
  key_hash: string;
  key_salt: string;
  lookup_digest: string;
  created_at: Timestamp;
  revoked_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
}

/** better-auth's twoFactor plugin; `secret` is encrypted with AUTH_SECRET, `backup_codes` holds keyed hashes. */
export interface TwoFactorsTable {
  id: Generated<string>;
  user_id: string;
  secret: string;
  backup_codes: string;
  verified: Generated<boolean>;
  failed_verification_count: Generated<number>;
  locked_until: NullableTimestamp;
  /** The RFC 6238 time step of the last code accepted; a code of that step or an earlier one is a replay. */
  last_totp_step: ColumnType<
    string | null,
    string | number | bigint | null | undefined,
    string | number | bigint | null
  >;
  created_at: Timestamp;
}

/** @better-auth/passkey's table: public-key credentials, never a private part. */
export interface PasskeysTable {
  id: Generated<string>;
  user_id: string;
  name: string | null;
  public_key: string;
  credential_id: string;
  counter: number;
  device_type: string;
  backed_up: boolean;
  transports: string | null;
  aaguid: string | null;
  created_at: Timestamp;
}

export interface Database {
  users: UsersTable;
  sessions: SessionsTable;
  accounts: AccountsTable;
  verifications: VerificationsTable;
  organizations: OrganizationsTable;
  members: MembersTable;
  invitations: InvitationsTable;
  permissions: PermissionsTable;
  roles: RolesTable;
  role_permissions: RolePermissionsTable;
  audit_logs: AuditLogsTable;
  api_keys: ApiKeysTable;
  two_factors: TwoFactorsTable;
  passkeys: PasskeysTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  sso_connections: SsoConnectionsTable;
  sso_domains: SsoDomainsTable;
  sso_saml_replays: SsoSamlReplaysTable;
  sso_bypasses: SsoBypassesTable;
  scim_tokens: ScimTokensTable;
  scim_users: ScimUsersTable;
  scim_groups: ScimGroupsTable;
  scim_group_members: ScimGroupMembersTable;
  scim_group_roles: ScimGroupRolesTable;
}

export type User = Selectable<UsersTable>;
export type Role = Selectable<RolesTable>;
export type NewRole = Insertable<RolesTable>;
export type RoleUpdate = Updateable<RolesTable>;
export type Member = Selectable<MembersTable>;
