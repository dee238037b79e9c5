import type { ColumnType, Generated } from 'kysely';

/** The SCIM tables of `Database` (src/db/database.ts; migrations/0012; docs/scim.md). */

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export interface ScimTokensTable {
  id: Generated<string>;
  tenant_id: string;
  /** Who created it; null once that account is gone. */
  created_by: string | null;
  name: string;
  /** HMAC-SHA256 of the token keyed by `token_salt` (hex); never the token. */
  token_hash: string;
  token_salt: string;
  /** SHA-256 of the token (hex): the index that finds the row. */
  lookup_digest: string;
  created_at: Timestamp;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
}

export interface ScimUsersTable {
  tenant_id: string;
  /** The account, and the SCIM resource's id. */
  user_id: string;
  external_id: string | null;
  /** false: no membership; the resource stays. */
  active: Generated<boolean>;
  /** The role a reactivated member comes back with. */
  previous_role_id: string | null;
  /** The ETag (`W/"<version>"`), bumped by every change. */
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ScimGroupsTable {
  id: Generated<string>;
  tenant_id: string;
  display_name: string;
  external_id: string | null;
  version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ScimGroupMembersTable {
  tenant_id: string;
  group_id: string;
  user_id: string;
}

export interface ScimGroupRolesTable {
  tenant_id: string;
  group_id: string;
  role_id: string;
}
