import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_ROLE, type SchemalessDb } from '../../src/db/client.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * The "add a tenant table" checklist, read from the catalog rather than from
 * a list: every table of the public schema that holds a tenant's rows (a
 * `tenant_id` column, or row-level security already switched on) has row-level
 * security enabled and forced, a policy that reads the transaction's tenant
 * (`app.tenant_id`, set by src/db/tenant.ts), and the runtime role's SELECT and
 * INSERT grants, on a table the runtime role neither owns nor inherits.
 *
 * A new table that names an organization under another column is not a
 * tenant table until it is listed below with the reason the library or the
 * service reads it without a tenant context.
 */
const ORGANIZATION_SCOPED_WITHOUT_RLS: Record<string, string> = {
  // better-auth's organization plugin reads and writes memberships and
  // invitations across organizations (listing a user's organizations,
  // accepting an invitation) with no tenant named.
  members: 'organization_id',
  invitations: 'organization_id',
};

interface TenantTable {
  table: string;
  rowSecurity: boolean;
  forced: boolean;
  tenantPolicies: number;
  canSelect: boolean;
  canInsert: boolean;
  runtimeOwns: boolean;
}

/** One row per tenant table of the public schema, with what the checklist asks of it. */
async function tenantTables(db: SchemalessDb): Promise<TenantTable[]> {
  const { rows } = await sql<TenantTable>`
    select c.relname as "table",
           c.relrowsecurity as "rowSecurity",
           c.relforcerowsecurity as "forced",
           (select count(*)::int from pg_policies p
             where p.schemaname = 'public' and p.tablename = c.relname
               and (coalesce(p.qual, '') || coalesce(p.with_check, '')) like '%app.tenant_id%') as "tenantPolicies",
           has_table_privilege(${APP_ROLE}, c.oid, 'SELECT') as "canSelect",
           has_table_privilege(${APP_ROLE}, c.oid, 'INSERT') as "canInsert",
           pg_has_role(${APP_ROLE}, c.relowner, 'MEMBER') as "runtimeOwns"
      from pg_class c
     where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p')
       and (c.relrowsecurity
            or exists (select 1 from pg_attribute a
                        where a.attrelid = c.oid and a.attname = 'tenant_id' and not a.attisdropped))
     order by c.relname`.execute(db);
  return rows;
}

/** What a tenant table lacks, as readable sentences (empty when it has everything). */
function missing(table: TenantTable): string[] {
  return [
    table.rowSecurity ? null : 'ENABLE ROW LEVEL SECURITY',
    table.forced ? null : 'FORCE ROW LEVEL SECURITY',
    table.tenantPolicies > 0 ? null : "a policy on current_setting('app.tenant_id')",
    table.canSelect && table.canInsert ? null : `GRANT SELECT, INSERT ... TO ${APP_ROLE}`,
    table.runtimeOwns ? `an owner other than ${APP_ROLE}` : null,
  ].filter((step): step is string => step !== null);
}

describe('tenant tables (from the catalog)', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await openTestDatabase();
  });
  afterAll(() => database?.close());

  it('every tenant table has row-level security, FORCE, a tenant policy and the runtime grants', async () => {
    const tables = await database.withOwner(tenantTables);
    // The catalog finds them: a table removed or renamed shows here first.
    expect(tables.map((t) => t.table)).toEqual([
      'api_keys',
      'audit_logs',
      'role_permissions',
      'roles',
      'scim_group_members',
      'scim_group_roles',
      'scim_groups',
      'scim_tokens',
      'scim_users',
      'sso_bypasses',
      'sso_connections',
      'sso_domains',
      'sso_saml_replays',
      'webhook_deliveries',
      'webhook_endpoints',
    ]);
    const gaps = Object.fromEntries(
      tables.map((t) => [t.table, missing(t)] as const).filter(([, steps]) => steps.length > 0),
    );
    expect(gaps).toEqual({});
  });

  it('reports a new table with tenant_id that skips the checklist (a throwaway table, rolled back)', async () => {
    const rolledBack = new Error('roll back');
    let seen: TenantTable | undefined;
    await expect(
      database.withOwner((owner) =>
        owner.transaction().execute(async (trx) => {
          await sql`create table throwaway_tenant_rows (id uuid primary key, tenant_id uuid not null)`.execute(trx);
          seen = (await tenantTables(trx)).find((t) => t.table === 'throwaway_tenant_rows');
          throw rolledBack;
        }),
      ),
    ).rejects.toBe(rolledBack);
    expect(seen && missing(seen)).toEqual([
      'ENABLE ROW LEVEL SECURITY',
      'FORCE ROW LEVEL SECURITY',
      "a policy on current_setting('app.tenant_id')",
      `GRANT SELECT, INSERT ... TO ${APP_ROLE}`,
    ]);
    // Gone with the transaction.
    expect((await database.withOwner(tenantTables)).map((t) => t.table)).not.toContain('throwaway_tenant_rows');
  });

  it('names every organization-scoped table without row-level security, with its reason', async () => {
    const { rows } = await database.withOwner((owner) =>
      sql<{ table: string; column: string }>`
        select c.relname as "table", a.attname as "column"
          from pg_class c join pg_attribute a on a.attrelid = c.oid and not a.attisdropped
         where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relrowsecurity
           and a.attname in ('organization_id', 'org_id', 'tenant')
         order by c.relname`.execute(owner),
    );
    expect(Object.fromEntries(rows.map((r) => [r.table, r.column]))).toEqual(ORGANIZATION_SCOPED_WITHOUT_RLS);
  });
});
