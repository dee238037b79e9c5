/**
 * 0002: permissions, tenant-scoped roles, role_permissions, members.role_id,
 * and row-level security on the tenant tables (docs/api.md "Permissions and roles").
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * Row-level security: the runtime role (gatehouse_app) is neither superuser
 * nor owner, and FORCE makes the policies bind the owner too. A transaction
 * names its tenant with set_config('app.tenant_id', <uuid>, true); without
 * it (unset or empty) the policy compares to NULL and matches nothing.
 */
import { sql, type Kysely } from 'kysely';

const PERMISSIONS: ReadonlyArray<readonly [resource: string, actions: readonly string[]]> = [
  ['users', ['read', 'write', 'delete']],
  ['organizations', ['read', 'write', 'delete']],
  ['members', ['read', 'write', 'delete']],
  ['invitations', ['read', 'write', 'delete']],
  ['roles', ['read', 'write', 'delete']],
  ['api_keys', ['read', 'write']],
];

const VERBS: Record<string, string> = { read: 'Read', write: 'Create and change', delete: 'Delete' };

/** The tenant named by the current transaction, or NULL (matches no row). */
const CURRENT_TENANT = sql`nullif(current_setting('app.tenant_id', true), '')::uuid`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE permissions (
      id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      resource    text NOT NULL,
      action      text NOT NULL,
      description text NOT NULL,
      CONSTRAINT permissions_resource_action_key UNIQUE (resource, action),
      CONSTRAINT permissions_resource_check CHECK (resource IN ('users', 'organizations', 'members', 'invitations', 'roles', 'api_keys')),
      CONSTRAINT permissions_action_check CHECK (action IN ('read', 'write', 'delete'))
    )
  `.execute(db);
  for (const [resource, actions] of PERMISSIONS) {
    for (const action of actions) {
      const description = `${VERBS[action]} ${resource.replace('_', ' ')}`;
      await sql`INSERT INTO permissions (resource, action, description) VALUES (${resource}, ${action}, ${description})`.execute(db);
    }
  }

  await sql`
    CREATE TABLE roles (
      id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
      tenant_id   uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
      name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
      slug        text        NOT NULL CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$'),
      description text        NOT NULL DEFAULT '',
      is_default  boolean     NOT NULL DEFAULT false,
      created_at  timestamptz NOT NULL DEFAULT now(),
      updated_at  timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT roles_tenant_id_slug_key UNIQUE (tenant_id, slug),
      -- target of the composite key that keeps a member's role in its own organization
      CONSTRAINT roles_id_tenant_id_key UNIQUE (id, tenant_id)
    )
  `.execute(db);

  await sql`
    CREATE TABLE role_permissions (
      role_id       uuid NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
      permission_id uuid NOT NULL REFERENCES permissions (id) ON DELETE RESTRICT,
      PRIMARY KEY (role_id, permission_id)
    )
  `.execute(db);
  await sql`CREATE INDEX role_permissions_permission_id_idx ON role_permissions (permission_id)`.execute(db);

  // A member's role belongs to the member's organization; a role with members
  // cannot be deleted until they are moved (the route moves them to Viewer).
  await sql`
    ALTER TABLE members
      ADD CONSTRAINT members_role_id_organization_id_fkey
      FOREIGN KEY (role_id, organization_id) REFERENCES roles (id, tenant_id)
  `.execute(db);
  await sql`CREATE INDEX members_role_id_idx ON members (role_id)`.execute(db);

  for (const table of ['roles', 'role_permissions']) {
    await sql`ALTER TABLE ${sql.table(table)} ENABLE ROW LEVEL SECURITY`.execute(db);
    await sql`ALTER TABLE ${sql.table(table)} FORCE ROW LEVEL SECURITY`.execute(db);
  }
  await sql`
    CREATE POLICY roles_tenant_isolation ON roles
      USING (tenant_id = ${CURRENT_TENANT})
      WITH CHECK (tenant_id = ${CURRENT_TENANT})
  `.execute(db);
  // role_permissions has no tenant column: a row is visible through its role,
  // and the roles policy above decides which roles are visible.
  await sql`
    CREATE POLICY role_permissions_tenant_isolation ON role_permissions
      USING (EXISTS (SELECT 1 FROM roles r WHERE r.id = role_id AND r.tenant_id = ${CURRENT_TENANT}))
      WITH CHECK (EXISTS (SELECT 1 FROM roles r WHERE r.id = role_id AND r.tenant_id = ${CURRENT_TENANT}))
  `.execute(db);

  // The session's state in one statement (docs/api.md "Access": permissions
  // are resolved once, when the session is read): whether the session row still
  // stands, its active organization as stored now (not as a 5-minute cookie
  // cache remembers it), the user's current platform role and deletion mark,
  // and the permission strings of the member's role in that organization (or
  // in p_organization_id when given). It names the tenant itself
  // (transaction-local) so row-level security applies to the role tables; it
  // runs as the caller (SECURITY INVOKER).
  await sql`
    CREATE FUNCTION session_state(p_session_id uuid, p_user_id uuid, p_organization_id uuid DEFAULT NULL)
    RETURNS TABLE (
      email                  text,
      name                   text,
      role                   text,
      email_verified         boolean,
      deleted_at             timestamptz,
      session_valid          boolean,
      active_organization_id uuid,
      member_id              uuid,
      permissions            text[]
    )
    LANGUAGE plpgsql VOLATILE
    AS $$
    DECLARE
      v_valid boolean := false;
      v_active uuid;
      v_org uuid;
    BEGIN
      SELECT true, s.active_organization_id INTO v_valid, v_active
      FROM sessions s
      WHERE s.id = p_session_id AND s.user_id = p_user_id AND s.expires_at > now();
      v_valid := coalesce(v_valid, false);
      v_org := coalesce(p_organization_id, v_active);
      PERFORM set_config('app.tenant_id', coalesce(v_org::text, ''), true);
      RETURN QUERY
        SELECT u.email, u.name, u.role, u.email_verified, u.deleted_at,
               v_valid,
               v_active,
               m.id,
               coalesce((
                 SELECT array_agg(p.resource || ':' || p.action ORDER BY p.resource, p.action)
                 FROM role_permissions rp JOIN permissions p ON p.id = rp.permission_id
                 WHERE rp.role_id = m.role_id
               ), '{}')
        FROM users u
        LEFT JOIN members m ON m.user_id = u.id AND m.organization_id = v_org
        WHERE u.id = p_user_id;
    END
    $$
  `.execute(db);
  await sql`REVOKE ALL ON FUNCTION session_state(uuid, uuid, uuid) FROM PUBLIC`.execute(db);
  await sql`GRANT EXECUTE ON FUNCTION session_state(uuid, uuid, uuid) TO gatehouse_app`.execute(db);

  await sql`GRANT SELECT ON permissions TO gatehouse_app`.execute(db);
  await sql`GRANT SELECT, INSERT, UPDATE, DELETE ON roles TO gatehouse_app`.execute(db);
  await sql`GRANT SELECT, INSERT, DELETE ON role_permissions TO gatehouse_app`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS session_state(uuid, uuid, uuid)`.execute(db);
  await sql`DROP INDEX IF EXISTS members_role_id_idx`.execute(db);
  await sql`ALTER TABLE members DROP CONSTRAINT IF EXISTS members_role_id_organization_id_fkey`.execute(db);
  await sql`DROP TABLE IF EXISTS role_permissions`.execute(db);
  await sql`DROP TABLE IF EXISTS roles`.execute(db);
  await sql`DROP TABLE IF EXISTS permissions`.execute(db);
}
