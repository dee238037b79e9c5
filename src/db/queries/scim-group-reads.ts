import type { Expression, Selectable, SqlBool, Transaction } from 'kysely';
import { isUuid } from '../../shared/text.js';
import type { Database } from '../database.js';
import type { ScimGroupsTable } from '../scim-tables.js';

/**
 * docs/scim.md "Groups": reading an organization's directory groups and who
 * is in them, in the request's one transaction with the tenant named
 * (`withTenant`); each query names the tenant too. The writes are scim-groups.ts.
 */
export type ScimGroupRow = Selectable<ScimGroupsTable>;
/** `value`: the member's SCIM User id (the account's); `members` absent: asked without them. */
export type ScimGroupMember = { value: string; display: string };
export type ScimGroupRecord = ScimGroupRow & { members?: ScimGroupMember[] };

export async function membersOf(trx: Transaction<Database>, tenantId: string, groupIds: string[]) {
  const byGroup = new Map<string, ScimGroupMember[]>(groupIds.map((id) => [id, []]));
  if (groupIds.length === 0) return byGroup;
  const rows = await trx
    .selectFrom('scim_group_members as gm')
    .innerJoin('users as u', 'u.id', 'gm.user_id')
    .select(['gm.group_id', 'gm.user_id', 'u.name', 'u.email'])
    .where('gm.tenant_id', '=', tenantId)
    .where('gm.group_id', 'in', groupIds)
    .orderBy('u.email')
    .execute();
  for (const row of rows) byGroup.get(row.group_id)?.push({ value: row.user_id, display: row.name || row.email });
  return byGroup;
}

/**
 * The most group memberships one list answer carries, between its groups'
 * members or its Users' groups (RFC 7644 section 3.4.2.4 lets the service
 * refuse what it will not build: `tooMany`). Unbounded, 200 groups of 10,000
 * members made one answer of two million: memory enough to stop the
 * process, every organization with it.
 */
export const MAX_LISTED_MEMBERSHIPS = 100_000;

/**
 * Whether the page's groups (`group_id`) or Users (`user_id`) hold more than
 * MAX_LISTED_MEMBERSHIPS memberships between them: counted before any is read.
 */
export async function tooManyMemberships(
  trx: Transaction<Database>,
  tenantId: string,
  column: 'group_id' | 'user_id',
  ids: string[],
): Promise<boolean> {
  if (ids.length === 0) return false;
  const { held } = await trx
    .selectFrom('scim_group_members')
    .select((eb) => eb.fn.countAll<string>().as('held'))
    .where('tenant_id', '=', tenantId)
    .where(column, 'in', ids)
    .executeTakeFirstOrThrow();
  return Number(held) > MAX_LISTED_MEMBERSHIPS;
}

/**
 * One page of the organization's groups, oldest first, and how many match
 * in all. With `members`, `groups` is null when the page's groups hold more
 * than MAX_LISTED_MEMBERSHIPS members between them (too large to build).
 */
export async function listGroups(
  trx: Transaction<Database>,
  tenantId: string,
  // `filter`: over `scim_groups` (groupFilterSql in scim-filter-sql.ts).
  { filter, offset, limit, members }: { filter?: Expression<SqlBool>; offset: number; limit: number; members: boolean },
): Promise<{ total: number; groups: ScimGroupRecord[] | null }> {
  const base = trx
    .selectFrom('scim_groups')
    .where('tenant_id', '=', tenantId)
    .$if(filter !== undefined, (query) => query.where(filter!));
  const { total } = await base.select((eb) => eb.fn.countAll<string>().as('total')).executeTakeFirstOrThrow();
  const rows =
    limit === 0 ? [] : await base.selectAll().orderBy('created_at').orderBy('id').offset(offset).limit(limit).execute();
  if (!members) return { total: Number(total), groups: rows };
  const ids = rows.map((row) => row.id);
  if (await tooManyMemberships(trx, tenantId, 'group_id', ids)) return { total: Number(total), groups: null };
  const byGroup = await membersOf(trx, tenantId, ids);
  return { total: Number(total), groups: rows.map((row) => ({ ...row, members: byGroup.get(row.id) ?? [] })) };
}

/**
 * The organization's group with its members (`members: false`: without),
 * `lock`ed until the transaction ends when asked (its version is the
 * If-Match check); undefined for another organization's id too.
 */
export async function getGroup(
  trx: Transaction<Database>,
  tenantId: string,
  id: string,
  { members = true, lock = false }: { members?: boolean; lock?: boolean } = {},
): Promise<ScimGroupRecord | undefined> {
  const row = await trx
    .selectFrom('scim_groups')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .$if(lock, (query) => query.forUpdate())
    .executeTakeFirst();
  if (!row || !members) return row;
  return { ...row, members: (await membersOf(trx, tenantId, [id])).get(id) ?? [] };
}

/** displayName is unique in the organization regardless of case (the index scim_groups_display_name_key). */
export async function groupNameTaken(
  trx: Transaction<Database>,
  tenantId: string,
  displayName: string,
  except?: string,
): Promise<boolean> {
  const taken = await trx
    .selectFrom('scim_groups')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where((eb) => eb(eb.fn('lower', ['display_name']), '=', displayName.toLowerCase()))
    .$if(except !== undefined, (query) => query.where('id', '!=', except!))
    .executeTakeFirst();
  return taken !== undefined;
}

/** The ids among `userIds` that are not SCIM Users of the organization (a member must be one). */
export async function unknownScimUsers(trx: Transaction<Database>, tenantId: string, userIds: string[]) {
  const wanted = [...new Set(userIds)];
  const candidates = wanted.filter(isUuid);
  const found =
    candidates.length === 0
      ? []
      : await trx
          .selectFrom('scim_users')
          .select('user_id')
          .where('tenant_id', '=', tenantId)
          .where('user_id', 'in', candidates)
          .execute();
  const known = new Set(found.map((row) => row.user_id));
  return wanted.filter((id) => !known.has(id));
}
