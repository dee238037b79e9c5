import type { Expression, SqlBool, Transaction } from 'kysely';
import type { Database } from '../database.js';
import { tooManyMemberships } from './scim-group-reads.js';

/**
 * docs/scim.md "Users": reading the organization's SCIM Users (scim_users
 * joined to the account in users, with their groups), in the request's
 * transaction with the tenant named; each query names the tenant too. A
 * resource of another organization is not found. The writes are scim-users.ts.
 */

type Trx = Transaction<Database>;

/** What the User resource is made of (src/scim/resources.ts ScimUserRecord). */
export interface StoredScimUser {
  id: string;
  email: string;
  name: string;
  externalId: string | null;
  active: boolean;
  created: Date;
  lastModified: Date;
  version: number;
  groups: { id: string; displayName: string }[];
}

export function baseQuery(trx: Trx, tenantId: string) {
  return trx
    .selectFrom('scim_users as su')
    .innerJoin('users as u', 'u.id', 'su.user_id')
    .where('su.tenant_id', '=', tenantId);
}

const COLUMNS = [
  'su.user_id',
  'u.email',
  'u.name',
  'su.external_id',
  'su.active',
  'su.created_at',
  'su.updated_at',
  'su.version',
] as const;
type Row = Pick<StoredScimUser, 'email' | 'name' | 'active' | 'version'> & {
  user_id: string;
  external_id: string | null;
  created_at: Date;
  updated_at: Date;
};

async function withGroups(trx: Trx, tenantId: string, rows: Row[]): Promise<StoredScimUser[]> {
  const ids = rows.map((row) => row.user_id);
  const groups =
    ids.length === 0
      ? []
      : await trx
          .selectFrom('scim_group_members as gm')
          .innerJoin('scim_groups as g', (join) =>
            join.onRef('g.id', '=', 'gm.group_id').onRef('g.tenant_id', '=', 'gm.tenant_id'),
          )
          .select(['gm.user_id', 'g.id', 'g.display_name'])
          .where('gm.tenant_id', '=', tenantId)
          .where('gm.user_id', 'in', ids)
          .orderBy('g.display_name')
          .execute();
  return rows.map((row) => ({
    id: row.user_id,
    email: row.email,
    name: row.name,
    externalId: row.external_id,
    active: row.active,
    created: new Date(row.created_at),
    lastModified: new Date(row.updated_at),
    version: row.version,
    groups: groups.filter((g) => g.user_id === row.user_id).map((g) => ({ id: g.id, displayName: g.display_name })),
  }));
}

export async function getScimUser(trx: Trx, tenantId: string, userId: string): Promise<StoredScimUser | undefined> {
  const row = await baseQuery(trx, tenantId).select(COLUMNS).where('su.user_id', '=', userId).executeTakeFirst();
  return row ? (await withGroups(trx, tenantId, [row]))[0] : undefined;
}

/**
 * One page of the list, oldest first, and how many match in all (`count` 0:
 * the total only); `users` null when the page's Users are in more than
 * MAX_LISTED_MEMBERSHIPS groups between them (the answer would be too large to build).
 */
export async function listScimUsers(
  trx: Trx,
  tenantId: string,
  { filter, offset, count }: { filter: Expression<SqlBool>; offset: number; count: number },
): Promise<{ total: number; users: StoredScimUser[] | null }> {
  const { total } = await baseQuery(trx, tenantId)
    .where(filter)
    .select((eb) => eb.fn.countAll<string>().as('total'))
    .executeTakeFirstOrThrow();
  const rows =
    count === 0
      ? []
      : await baseQuery(trx, tenantId)
          .where(filter)
          .select(COLUMNS)
          .orderBy('su.created_at')
          .orderBy('su.user_id')
          .offset(offset)
          .limit(count)
          .execute();
  const ids = rows.map((row) => row.user_id);
  if (await tooManyMemberships(trx, tenantId, 'user_id', ids)) return { total: Number(total), users: null };
  return { total: Number(total), users: await withGroups(trx, tenantId, rows) };
}
