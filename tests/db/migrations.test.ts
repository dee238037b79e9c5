import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { migrateDown, migrateToLatest } from '../../src/db/migrate.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';
import { UUID_V4 } from '../support/http.js';
import { ALL_PERMISSIONS } from '../support/orgs.js';

/** The migration history (migrations/*), up, all the way down, and up again, on both engines. */

// Oracle: the migration history and its tables, copied by hand on purpose; the database must agree with them.
const FIRST_THREE = ['0001_auth_tables', '0002_rbac', '0003_audit_logs'];
const TABLES_OF_FIRST_THREE = [
  'accounts',
  'audit_logs',
  'invitations',
  'members',
  'organizations',
  'permissions',
  'role_permissions',
  'roles',
  'sessions',
  'users',
  'verifications',
];

describe('migrations', () => {
  let database: TestDatabase;
  const names = Object.keys(migrations);

  beforeAll(async () => {
    database = await openTestDatabase({ migrate: false });
  });
  afterAll(() => database?.close());

  /** Our tables and functions in `public` (Kysely's own bookkeeping tables excepted). */
  const schema = () =>
    database.withOwner(async (owner: Kysely<any>) => {
      const { rows: tables } = await sql<{ name: string }>`
        select table_name as name from information_schema.tables
        where table_schema = 'public' and table_name not like 'kysely\\_%'
        order by table_name`.execute(owner);
      const { rows: functions } = await sql<{ name: string }>`
        select p.proname as name from pg_proc p where p.pronamespace = 'public'::regnamespace order by p.proname`.execute(
        owner,
      );
      const { rows: policies } = await sql<{
        name: string;
      }>`select policyname as name from pg_policies where schemaname = 'public' order by policyname`.execute(owner);
      return {
        tables: tables.map((r) => r.name),
        functions: functions.map((r) => r.name),
        policies: policies.map((r) => r.name),
      };
    });

  const permissionRows = () =>
    database.withOwner(
      async (owner: Kysely<any>) =>
        (await owner.selectFrom('permissions').select(['id', 'resource', 'action', 'description']).execute()) as {
          id: string;
          resource: string;
          action: string;
          description: string;
        }[],
    );

  const applied = () =>
    database.withOwner(async (owner: Kysely<any>) =>
      (await owner.selectFrom('kysely_migration').select('name').orderBy('name').execute()).map(
        (row: { name: string }) => row.name,
      ),
    );

  function expectSeeded(rows: { id: string; resource: string; action: string; description: string }[]) {
    expect(rows).toHaveLength(17);
    expect(rows.map((row) => `${row.resource}:${row.action}`).sort()).toEqual(ALL_PERMISSIONS);
    for (const row of rows) {
      expect(row.id).toMatch(UUID_V4);
      expect(row.description.length).toBeGreaterThan(0);
    }
    expect(new Set(rows.map((row) => row.id)).size).toBe(17);
  }

  it('starts from an empty schema', async () => {
    expect((await schema()).tables).toEqual([]);
  });

  it('applies 0001..0003 (and whatever follows) in order, seeding the 17 permissions once', async () => {
    expect(names.slice(0, 3)).toEqual(FIRST_THREE);
    expect(await migrateToLatest(database)).toEqual(names);
    expect(await applied()).toEqual(names);
    const { tables, functions, policies } = await schema();
    expect(tables).toEqual(expect.arrayContaining(TABLES_OF_FIRST_THREE));
    expect(functions).toContain('session_state');
    expect(policies).toEqual(
      expect.arrayContaining([
        'audit_logs_insert',
        'audit_logs_select',
        'role_permissions_tenant_isolation',
        'roles_tenant_isolation',
      ]),
    );
    expectSeeded(await permissionRows());
    // A second run has nothing to do and seeds nothing again.
    expect(await migrateToLatest(database)).toEqual([]);
    expectSeeded(await permissionRows());
    // The runtime handle reads the seed through its grant.
    expect((await database.db.selectFrom('permissions').select('id').execute()).length).toBe(17);
  });

  it('rolls back one migration at a time, newest first, to a schema with none of our tables', async () => {
    for (const name of [...names].reverse()) {
      expect(await migrateDown(database)).toEqual([name]);
      expect(await applied()).toEqual(names.slice(0, names.indexOf(name)));
      if (name === '0007_multi_factor') {
        const { tables, functions } = await schema();
        expect(tables).not.toContain('two_factors');
        expect(tables).not.toContain('passkeys');
        // session_state is back in its 0002 shape: the runtime role still reads it.
        expect(functions).toContain('session_state');
        const { rows } = await sql<{ column: string }>`
          select unnest(proargnames) as column from pg_proc where proname = 'session_state'`.execute(database.db);
        expect(rows.map((row) => row.column)).not.toContain('session_mfa');
        expect(rows.map((row) => row.column)).toContain('permissions');
      }
      if (name === '0003_audit_logs') {
        const { tables } = await schema();
        expect(tables).not.toContain('audit_logs');
        expect(tables).toContain('roles');
      }
      if (name === '0002_rbac') {
        const { tables, functions } = await schema();
        expect(tables.filter((table) => ['permissions', 'roles', 'role_permissions'].includes(table))).toEqual([]);
        expect(functions).not.toContain('session_state');
        expect(tables).toContain('members');
      }
    }
    expect(await schema()).toEqual({ tables: [], functions: [], policies: [] });
    expect(await applied()).toEqual([]);
    // Nothing left to undo.
    expect(await migrateDown(database)).toEqual([]);
  });

  it('applies everything again on the emptied schema', async () => {
    expect(await migrateToLatest(database)).toEqual(names);
    expect((await schema()).tables).toEqual(expect.arrayContaining(TABLES_OF_FIRST_THREE));
    expectSeeded(await permissionRows());
    // The runtime role is back in business: RLS'd tables, its grants, the session function.
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from roles`.execute(database.db);
    expect(rows[0]!.n).toBe(0);
    const state =
      await sql`select * from session_state(${crypto.randomUUID()}::uuid, ${crypto.randomUUID()}::uuid)`.execute(
        database.db,
      );
    expect(state.rows).toEqual([]);
  });
});
