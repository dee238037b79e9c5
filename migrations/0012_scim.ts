/**
 * 0012: SCIM 2.0 provisioning (docs/scim.md).
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * - scim_tokens: an organization's directory tokens, stored as API keys are
 *   (migrations/0004): never the token; `token_hash` is HMAC-SHA256 of it
 *   keyed by `token_salt`, `lookup_digest` (SHA-256) finds the row before the
 *   salted hash is checked. `scim_token_by_digest` names the digest for the
 *   policy (transaction-local) and reads the row, whatever the tenant.
 * - scim_users: the organization's SCIM User resources, one per account
 *   (the resource id is the user's id). `active` false: the membership is
 *   gone, the resource stays, and `previous_role_id` is the role it comes
 *   back with. `version` is the resource's ETag, bumped by every change.
 * - scim_groups, scim_group_members: the directory's groups and who is in
 *   them (accounts with a scim_users row of the organization).
 * - scim_group_roles: a group's role in the organization; a member's role is
 *   the highest role of their groups (docs/scim.md "Roles").
 * - Row-level security like every tenant table.
 */
import { sql, type Kysely } from 'kysely';

const APP_ROLE = 'gatehouse_app';
const CURRENT_TENANT = sql`nullif(current_setting('app.tenant_id', true), '')::uuid`;
const CURRENT_SCIM_DIGEST = sql`nullif(current_setting('app.scim_digest', true), '')`;

const TENANT_TABLES = ['scim_users', 'scim_groups', 'scim_group_members', 'scim_group_roles'];

export async function up(db: Kysely<any>): Promise<void> {
  const statements = [
    sql`
      CREATE TABLE scim_tokens (
        id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id     uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        created_by    uuid,
        name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
        token_hash    text        NOT NULL CHECK (token_hash ~ '^[0-9a-f]{64}$'),
        token_salt    text        NOT NULL CHECK (token_salt ~ '^[0-9a-f]{32}$'),
        lookup_digest text        NOT NULL CHECK (lookup_digest ~ '^[0-9a-f]{64}$'),
        created_at    timestamptz NOT NULL DEFAULT now(),
        last_used_at  timestamptz,
        revoked_at    timestamptz,
        CONSTRAINT scim_tokens_lookup_digest_key UNIQUE (lookup_digest)
      )
    `,
    sql`CREATE INDEX scim_tokens_tenant_id_idx ON scim_tokens (tenant_id, created_at, id)`,
    sql`
      CREATE TABLE scim_users (
        tenant_id        uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        user_id          uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        external_id      text        CHECK (length(external_id) BETWEEN 1 AND 256),
        active           boolean     NOT NULL DEFAULT true,
        previous_role_id uuid,
        version          integer     NOT NULL DEFAULT 1,
        created_at       timestamptz NOT NULL DEFAULT now(),
        updated_at       timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, user_id)
      )
    `,
    sql`CREATE INDEX scim_users_external_id_idx ON scim_users (tenant_id, external_id)`,
    sql`CREATE INDEX scim_users_user_id_idx ON scim_users (user_id)`,
    sql`
      CREATE TABLE scim_groups (
        id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id    uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        display_name text        NOT NULL CHECK (length(display_name) BETWEEN 1 AND 256),
        external_id  text        CHECK (length(external_id) BETWEEN 1 AND 256),
        version      integer     NOT NULL DEFAULT 1,
        created_at   timestamptz NOT NULL DEFAULT now(),
        updated_at   timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT scim_groups_id_tenant_id_key UNIQUE (id, tenant_id)
      )
    `,
    sql`CREATE UNIQUE INDEX scim_groups_display_name_key ON scim_groups (tenant_id, lower(display_name))`,
    sql`
      CREATE TABLE scim_group_members (
        tenant_id uuid NOT NULL,
        group_id  uuid NOT NULL,
        user_id   uuid NOT NULL,
        PRIMARY KEY (group_id, user_id),
        CONSTRAINT scim_group_members_group_fkey FOREIGN KEY (group_id, tenant_id)
          REFERENCES scim_groups (id, tenant_id) ON DELETE CASCADE,
        CONSTRAINT scim_group_members_user_fkey FOREIGN KEY (tenant_id, user_id)
          REFERENCES scim_users (tenant_id, user_id) ON DELETE CASCADE
      )
    `,
    sql`CREATE INDEX scim_group_members_user_idx ON scim_group_members (tenant_id, user_id)`,
    sql`
      CREATE TABLE scim_group_roles (
        tenant_id uuid NOT NULL,
        group_id  uuid PRIMARY KEY,
        role_id   uuid NOT NULL,
        CONSTRAINT scim_group_roles_group_fkey FOREIGN KEY (group_id, tenant_id)
          REFERENCES scim_groups (id, tenant_id) ON DELETE CASCADE,
        CONSTRAINT scim_group_roles_role_fkey FOREIGN KEY (role_id, tenant_id)
          REFERENCES roles (id, tenant_id) ON DELETE CASCADE
      )
    `,
    sql`CREATE INDEX scim_group_roles_role_idx ON scim_group_roles (role_id)`,

    sql`ALTER TABLE scim_tokens ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE scim_tokens FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY scim_tokens_access ON scim_tokens
        USING (tenant_id = ${CURRENT_TENANT} OR lookup_digest = ${CURRENT_SCIM_DIGEST})
        WITH CHECK (tenant_id = ${CURRENT_TENANT})
    `,
    ...TENANT_TABLES.flatMap((table) => [
      sql`ALTER TABLE ${sql.id(table)} ENABLE ROW LEVEL SECURITY`,
      sql`ALTER TABLE ${sql.id(table)} FORCE ROW LEVEL SECURITY`,
      sql`
        CREATE POLICY ${sql.id(`${table}_access`)} ON ${sql.id(table)}
          USING (tenant_id = ${CURRENT_TENANT})
          WITH CHECK (tenant_id = ${CURRENT_TENANT})
      `,
    ]),
    sql`GRANT SELECT, INSERT ON scim_tokens TO ${sql.id(APP_ROLE)}`,
    sql`GRANT UPDATE (revoked_at, last_used_at) ON scim_tokens TO ${sql.id(APP_ROLE)}`,
    sql`GRANT SELECT, INSERT, UPDATE, DELETE ON scim_users, scim_groups, scim_group_members, scim_group_roles TO ${sql.id(APP_ROLE)}`,

    // The one statement that finds the token presenting this digest, whatever its organization.
    sql`
      CREATE FUNCTION scim_token_by_digest(p_digest text)
      RETURNS SETOF scim_tokens
      LANGUAGE plpgsql VOLATILE
      AS $$
      BEGIN
        PERFORM set_config('app.scim_digest', p_digest, true);
        RETURN QUERY SELECT * FROM scim_tokens WHERE lookup_digest = p_digest;
      END
      $$
    `,
    sql`REVOKE ALL ON FUNCTION scim_token_by_digest(text) FROM PUBLIC`,
    sql`GRANT EXECUTE ON FUNCTION scim_token_by_digest(text) TO ${sql.id(APP_ROLE)}`,
  ];
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS scim_token_by_digest(text)`.execute(db);
  for (const table of ['scim_group_roles', 'scim_group_members', 'scim_groups', 'scim_users', 'scim_tokens'])
    await sql`DROP TABLE IF EXISTS ${sql.id(table)}`.execute(db);
}
