import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permissionListOf } from '../../src/db/queries/roles.js';
import {
  ALL_PERMISSIONS,
  PERMISSION_COUNT,
  PERMISSION_PATTERN,
  PLATFORM_ROLES,
  RESOURCE_ACTIONS,
} from '../../src/shared/permissions.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * src/shared/permissions.ts is the one source of the
 * permission table and the platform roles; the frozen migrations that seed
 * and check them are the only other place. This fails when the two disagree
 * (a permission added to the table without its migration, or the reverse).
 */
describe('permission table versus migrations', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await openTestDatabase();
  });
  afterAll(() => database?.close());

  const constraint = async (name: string) => {
    const { rows } = await sql<{
      def: string;
    }>`select pg_get_constraintdef(oid) as def from pg_constraint where conname = ${name}`.execute(database.db);
    expect(rows, name).toHaveLength(1);
    return rows[0]!.def;
  };
  const quoted = (def: string) => [...def.matchAll(/'([^']+)'/g)].map((m) => m[1]).sort();

  it('seeds exactly the permissions of the table', async () => {
    const rows = await database.db.selectFrom('permissions').select(['resource', 'action']).execute();
    expect(rows.map((row) => `${row.resource}:${row.action}`).sort()).toEqual([...ALL_PERMISSIONS].sort());
    expect(rows).toHaveLength(PERMISSION_COUNT);
  });

  it('orders permission lists as the code does (a created role is answered without reading it back)', async () => {
    const { rows } = await sql<{ list: string[] }>`
      select array_agg(resource || ':' || action order by resource || ':' || action) as list from permissions
    `.execute(database.db);
    expect(rows[0]!.list).toEqual(permissionListOf([...ALL_PERMISSIONS].reverse()));
  });

  it('checks the same resources and actions as the table', async () => {
    expect(quoted(await constraint('permissions_resource_check'))).toEqual(Object.keys(RESOURCE_ACTIONS).sort());
    expect(quoted(await constraint('permissions_action_check'))).toEqual(
      [...new Set(Object.values(RESOURCE_ACTIONS).flat())].sort(),
    );
  });

  it("bounds a key's scopes by the permission count", async () => {
    const defs = await sql<{ def: string }>`
      select pg_get_constraintdef(c.oid) as def from pg_constraint c join pg_class t on t.oid = c.conrelid
      where t.relname = 'api_keys' and c.contype = 'c' and pg_get_constraintdef(c.oid) like '%cardinality(scopes)%'
    `.execute(database.db);
    expect(defs.rows).toHaveLength(1);
    expect(Number(/<= (\d+)/.exec(defs.rows[0]!.def)?.[1])).toBe(PERMISSION_COUNT);
  });

  it('stores the platform roles the table declares', async () => {
    expect(quoted(await constraint('users_role_check'))).toEqual([...PLATFORM_ROLES].sort());
  });

  it('derives the permission pattern from the table', () => {
    const resources = Object.keys(RESOURCE_ACTIONS);
    const actions = [...new Set(Object.values(RESOURCE_ACTIONS).flat())];
    for (const permission of ALL_PERMISSIONS) expect(PERMISSION_PATTERN.test(permission)).toBe(true);
    for (const resource of resources)
      for (const action of actions) expect(PERMISSION_PATTERN.test(`${resource}:${action}`)).toBe(true);
    expect(PERMISSION_PATTERN.test('unknown:read')).toBe(false);
    expect(PERMISSION_PATTERN.test('users:admin')).toBe(false);
  });
});
