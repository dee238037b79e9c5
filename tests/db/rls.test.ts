import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordAudit } from '../../src/db/audit.js';
import type { Database } from '../../src/db/database.js';
import { listRoles } from '../../src/db/queries/roles.js';
import { setTenant, withTenant } from '../../src/db/tenant.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * Row-level security on the tenant tables (migrations 0002, 0003), as the
 * runtime role, on both engines: the second lock behind every query's own
 * tenant filter. That every tenant table has it is checked from the catalog
 * in tests/db/tenant-tables.test.ts.
 */

/** The SQLSTATE of a database error, however the driver wraps it. */
async function sqlState(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    return String((error as { code?: unknown }).code);
  }
  throw new Error('expected the database to refuse');
}

describe('row-level security (runtime role)', () => {
  let database: TestDatabase;
  let db: Kysely<Database>;
  const tenants = { a: '', b: '' };
  const roleIds: Record<'a' | 'b', string[]> = { a: [], b: [] };

  const counts = (handle: Kysely<Database> | Transaction<Database>) =>
    Promise.all([
      handle.selectFrom('roles').select('id').execute(),
      handle.selectFrom('role_permissions').select('role_id').execute(),
      handle.selectFrom('audit_logs').select('id').execute(),
    ]).then(([roles, rolePermissions, auditLogs]) => ({
      roles: roles.length,
      rolePermissions: rolePermissions.length,
      auditLogs: auditLogs.length,
    }));

  beforeAll(async () => {
    database = await openTestDatabase();
    db = database.db;
    // Organizations and a user, as the owner (no row-level security on them).
    await database.withOwner(async (owner) => {
      const [a, b] = await owner
        .insertInto('organizations')
        .values([
          { name: 'Tenant A', slug: `tenant-a-${crypto.randomUUID().slice(0, 8)}` },
          { name: 'Tenant B', slug: `tenant-b-${crypto.randomUUID().slice(0, 8)}` },
        ])
        .returning('id')
        .execute();
      tenants.a = a!.id;
      tenants.b = b!.id;
    });
    // Each tenant's rows, written by the runtime role inside a transaction that names that tenant.
    for (const key of ['a', 'b'] as const) {
      const tenantId = tenants[key];
      await withTenant(db, tenantId, async (trx) => {
        const slugs = key === 'a' ? ['alpha', 'beta', 'gamma'] : ['delta', 'epsilon'];
        for (const slug of slugs) {
          const { id } = await trx
            .insertInto('roles')
            .values({ tenant_id: tenantId, name: slug, slug })
            .returning('id')
            .executeTakeFirstOrThrow();
          roleIds[key].push(id);
          await trx
            .insertInto('role_permissions')
            .columns(['role_id', 'permission_id'])
            .expression((eb) =>
              eb
                .selectFrom('permissions')
                .select([eb.val(id).as('role_id'), 'id'])
                .where('action', '=', 'read'),
            )
            .execute();
        }
        await recordAudit(trx, {
          action: 'role.created',
          actorId: null,
          organizationId: tenantId,
          metadata: { tenant: key },
        });
      });
    }
  });
  afterAll(() => database?.close());

  it('runs as a role that is neither superuser nor owner of the tenant tables', async () => {
    const { rows } = await sql<{ current_user: string; rolsuper: boolean; rolbypassrls: boolean }>`
      select current_user, r.rolsuper, r.rolbypassrls from pg_roles r where r.rolname = current_user`.execute(db);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ rolsuper: false, rolbypassrls: false });
    const { rows: tables } = await sql<{
      tablename: string;
      tableowner: string;
      is_owner: boolean;
      in_owner_role: boolean;
      rowsecurity: boolean;
      forced: boolean;
    }>`
      select t.tablename, t.tableowner,
             t.tableowner = current_user as is_owner,
             pg_has_role(current_user, t.tableowner, 'MEMBER') as in_owner_role,
             t.rowsecurity, c.relforcerowsecurity as forced
      from pg_tables t join pg_class c on c.relname = t.tablename and c.relnamespace = 'public'::regnamespace
      where t.schemaname = 'public' and t.rowsecurity
      order by t.tablename`.execute(db);
    // Every table under row-level security (tests/db/tenant-tables.test.ts finds them all from the catalog).
    expect(tables.map((table) => table.tablename)).toEqual(
      expect.arrayContaining(['audit_logs', 'role_permissions', 'roles']),
    );
    for (const table of tables) {
      expect(table, table.tablename).toMatchObject({
        is_owner: false,
        in_owner_role: false,
        rowsecurity: true,
        forced: true,
      });
      expect(table.tableowner).not.toBe(rows[0]!.current_user);
    }
  });

  it('shows no row of roles, role_permissions or audit_logs without a tenant context', async () => {
    expect(await counts(db)).toEqual({ roles: 0, rolePermissions: 0, auditLogs: 0 });
    // Inside a transaction that names no tenant, too.
    expect(await db.transaction().execute((trx) => counts(trx))).toEqual({
      roles: 0,
      rolePermissions: 0,
      auditLogs: 0,
    });
  });

  it("shows only the named tenant's rows", async () => {
    for (const key of ['a', 'b'] as const) {
      const seen = await withTenant(db, tenants[key], async (trx) => ({
        roles: await trx.selectFrom('roles').select(['id', 'tenant_id']).execute(),
        rolePermissions: await trx.selectFrom('role_permissions').select('role_id').execute(),
        auditLogs: await trx.selectFrom('audit_logs').select(['tenant_id', 'metadata']).execute(),
      }));
      expect(seen.roles.map((r) => r.id).sort()).toEqual([...roleIds[key]].sort());
      expect(new Set(seen.roles.map((r) => r.tenant_id))).toEqual(new Set([tenants[key]]));
      expect(seen.rolePermissions).toHaveLength(roleIds[key].length * 6);
      expect(seen.rolePermissions.every((rp) => roleIds[key].includes(rp.role_id))).toBe(true);
      expect(seen.auditLogs).toEqual([{ tenant_id: tenants[key], metadata: { tenant: key } }]);
      // Naming the other tenant in the WHERE clause does not help.
      const other = key === 'a' ? tenants.b : tenants.a;
      const crossed = await withTenant(db, tenants[key], (trx) =>
        trx.selectFrom('roles').select('id').where('tenant_id', '=', other).execute(),
      );
      expect(crossed).toEqual([]);
    }
  });

  it('does not carry the tenant past the end of its transaction', async () => {
    await db.connection().execute(async (conn) => {
      await conn.transaction().execute(async (trx) => {
        await setTenant(trx, tenants.a);
        expect((await counts(trx)).roles).toBe(3);
      });
      expect(await counts(conn)).toEqual({ roles: 0, rolePermissions: 0, auditLogs: 0 });
    });
  });

  it("lists one tenant's roles in a single statement (tenant_roles) that leaves no tenant behind on the connection", async () => {
    await db.connection().execute(async (conn) => {
      for (const key of ['a', 'b'] as const) {
        const roles = await listRoles(conn, tenants[key]);
        expect(roles.map((r) => r.id).sort()).toEqual([...roleIds[key]].sort());
        expect(roles.map((r) => r.slug)).toEqual(key === 'a' ? ['alpha', 'beta', 'gamma'] : ['delta', 'epsilon']);
        expect(roles.every((r) => r.tenant_id === tenants[key] && r.permissions.length === 6)).toBe(true);
        // The same connection, next statement: no tenant named, nothing visible.
        expect(await counts(conn)).toEqual({ roles: 0, rolePermissions: 0, auditLogs: 0 });
      }
    });
  });

  it('shows nothing for an empty-string tenant context', async () => {
    const seen = await db.transaction().execute(async (trx) => {
      await sql`select set_config('app.tenant_id', '', true)`.execute(trx);
      return counts(trx);
    });
    expect(seen).toEqual({ roles: 0, rolePermissions: 0, auditLogs: 0 });
  });

  it("refuses writing a row into another tenant than the transaction's (42501), and leaves nothing behind", async () => {
    const slug = `intruder-${crypto.randomUUID().slice(0, 8)}`;
    // Insert a role for B while the context is A.
    expect(
      await sqlState(
        withTenant(db, tenants.a, (trx) =>
          trx.insertInto('roles').values({ tenant_id: tenants.b, name: 'Intruder', slug }).execute(),
        ),
      ),
    ).toBe('42501');
    // Move one of A's roles to B.
    expect(
      await sqlState(
        withTenant(db, tenants.a, (trx) =>
          trx.updateTable('roles').set({ tenant_id: tenants.b }).where('id', '=', roleIds.a[0]!).execute(),
        ),
      ),
    ).toBe('42501');
    // Attach a permission to B's role while the context is A.
    expect(
      await sqlState(
        withTenant(db, tenants.a, async (trx) => {
          const permission = await trx
            .selectFrom('permissions')
            .select('id')
            .where('resource', '=', 'users')
            .where('action', '=', 'delete')
            .executeTakeFirstOrThrow();
          await trx
            .insertInto('role_permissions')
            .values({ role_id: roleIds.b[0]!, permission_id: permission.id })
            .execute();
        }),
      ),
    ).toBe('42501');
    // An audit entry for B, or a tenant-less one, while the context is A.
    expect(
      await sqlState(
        withTenant(db, tenants.a, (trx) =>
          trx
            .insertInto('audit_logs')
            .values({ tenant_id: tenants.b, actor_id: null, action: 'role.created', metadata: '{}' })
            .execute(),
        ),
      ),
    ).toBe('42501');
    expect(
      await sqlState(
        withTenant(db, tenants.a, (trx) =>
          trx
            .insertInto('audit_logs')
            .values({ tenant_id: null, actor_id: null, action: 'role.created', metadata: '{}' })
            .execute(),
        ),
      ),
    ).toBe('42501');
    // Without any tenant, no role can be written at all.
    expect(
      await sqlState(db.insertInto('roles').values({ tenant_id: tenants.a, name: 'Nobody', slug }).execute()),
    ).toBe('42501');

    const b = await withTenant(db, tenants.b, async (trx) => ({
      roles: (await trx.selectFrom('roles').select('id').execute()).map((r) => r.id).sort(),
      rolePermissions: (await trx.selectFrom('role_permissions').select('role_id').execute()).length,
      auditLogs: (await trx.selectFrom('audit_logs').select('id').execute()).length,
    }));
    expect(b).toEqual({ roles: [...roleIds.b].sort(), rolePermissions: roleIds.b.length * 6, auditLogs: 1 });
    const a = await withTenant(db, tenants.a, async (trx) =>
      (await trx.selectFrom('roles').select('id').execute()).map((r) => r.id).sort(),
    );
    expect(a).toEqual([...roleIds.a].sort());
  });

  it("cannot update or delete another tenant's rows (they are invisible: nothing changes)", async () => {
    const changed = await withTenant(db, tenants.a, async (trx) => ({
      updated: Number(
        (await trx.updateTable('roles').set({ name: 'taken over' }).where('id', 'in', roleIds.b).executeTakeFirst())
          .numUpdatedRows,
      ),
      deleted: Number(
        (await trx.deleteFrom('role_permissions').where('role_id', 'in', roleIds.b).executeTakeFirst()).numDeletedRows,
      ),
    }));
    expect(changed).toEqual({ updated: 0, deleted: 0 });
    const names = await withTenant(db, tenants.b, async (trx) =>
      (await trx.selectFrom('roles').select('name').execute()).map((r) => r.name).sort(),
    );
    expect(names).toEqual(['delta', 'epsilon']);
  });

  it('keeps audit_logs append-only: UPDATE and DELETE are denied (42501) even with the tenant set', async () => {
    expect(
      await sqlState(
        withTenant(db, tenants.a, (trx) =>
          trx.updateTable('audit_logs').set({ action: 'role.deleted' }).where('tenant_id', '=', tenants.a).execute(),
        ),
      ),
    ).toBe('42501');
    expect(
      await sqlState(
        withTenant(db, tenants.a, (trx) => trx.deleteFrom('audit_logs').where('tenant_id', '=', tenants.a).execute()),
      ),
    ).toBe('42501');
    expect(await sqlState(withTenant(db, tenants.a, (trx) => sql`truncate audit_logs`.execute(trx)))).toBe('42501');
    const rows = await withTenant(db, tenants.a, (trx) => trx.selectFrom('audit_logs').select(['action']).execute());
    expect(rows).toEqual([{ action: 'role.created' }]);
  });

  it("never lets concurrent transactions of two tenants see each other's rows", async () => {
    const rounds = 50;
    const run = (key: 'a' | 'b', round: number) =>
      withTenant(db, tenants[key], async (trx) => {
        await sleep(round % 3);
        const roles = await trx.selectFrom('roles').select(['id', 'tenant_id']).execute();
        await sleep((round + 1) % 2);
        const rolePermissions = await trx.selectFrom('role_permissions').select('role_id').execute();
        const audit = await trx.selectFrom('audit_logs').select('tenant_id').execute();
        const { rows } = await sql<{ tenant: string }>`select current_setting('app.tenant_id', true) as tenant`.execute(
          trx,
        );
        return { key, roles, rolePermissions, audit, tenant: rows[0]!.tenant };
      });
    const results = await Promise.all(Array.from({ length: rounds * 2 }, (_, i) => run(i % 2 === 0 ? 'a' : 'b', i)));
    expect(results).toHaveLength(rounds * 2);
    for (const { key, roles, rolePermissions, audit, tenant } of results) {
      expect(tenant).toBe(tenants[key]);
      expect(roles.map((r) => r.id).sort()).toEqual([...roleIds[key]].sort());
      expect(roles.every((r) => r.tenant_id === tenants[key])).toBe(true);
      expect(rolePermissions.every((rp) => roleIds[key].includes(rp.role_id))).toBe(true);
      expect(rolePermissions).toHaveLength(roleIds[key].length * 6);
      expect(audit).toEqual([{ tenant_id: tenants[key] }]);
    }
  });
});
