/**
 * 0006: the role list of one organization in ONE statement (GET
 * /api/roles, the hottest permission-checked read).
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * A tenant read is otherwise a transaction of four statements (BEGIN,
 * set_config, SELECT, COMMIT): four round trips to a server, four trips
 * through the embedded engine. This function names the tenant for its own
 * statement's transaction (set_config(..., true)) and then reads under
 * row-level security as the caller (SECURITY INVOKER: the runtime role, so
 * the policies of 0002 still apply), filtering by tenant as well. Called
 * inside a transaction, the tenant it names lasts until that transaction ends,
 * as withTenant's does. Rows come in the documented order (docs/api.md
 * "Permissions and roles"): Owner, Admin, Member, Viewer, then custom roles
 * by name (callers keep it WITH ORDINALITY).
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE FUNCTION tenant_roles(p_tenant_id uuid)
    RETURNS TABLE (
      id          uuid,
      tenant_id   uuid,
      name        text,
      slug        text,
      description text,
      is_default  boolean,
      created_at  timestamptz,
      updated_at  timestamptz,
      permissions text[]
    )
    LANGUAGE plpgsql VOLATILE
    AS $$
    BEGIN
      PERFORM set_config('app.tenant_id', p_tenant_id::text, true);
      RETURN QUERY
        SELECT r.id, r.tenant_id, r.name, r.slug, r.description, r.is_default, r.created_at, r.updated_at,
               coalesce(array_agg(p.resource || ':' || p.action ORDER BY p.resource || ':' || p.action) FILTER (WHERE p.id IS NOT NULL), '{}')
        FROM roles r
        LEFT JOIN role_permissions rp ON rp.role_id = r.id
        LEFT JOIN permissions p ON p.id = rp.permission_id
        WHERE r.tenant_id = p_tenant_id
        GROUP BY r.id
        ORDER BY CASE r.slug WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'member' THEN 2 WHEN 'viewer' THEN 3 ELSE 4 END,
                 CASE WHEN r.is_default THEN '' ELSE lower(r.name) END,
                 r.name;
    END
    $$
  `.execute(db);
  await sql`REVOKE ALL ON FUNCTION tenant_roles(uuid) FROM PUBLIC`.execute(db);
  await sql`GRANT EXECUTE ON FUNCTION tenant_roles(uuid) TO gatehouse_app`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS tenant_roles(uuid)`.execute(db);
}
