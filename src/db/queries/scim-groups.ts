import type { Expression, Selectable, SqlBool, Transaction } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import type { ScimGroupsTable } from '../scim-tables.js';
import { syncMemberRole } from './scim-membership.js';

/**
 * docs/scim.md "Groups": an organization's directory groups and who is in
 * them, in the request's one transaction with the tenant named (`withTenant`);
 * each query names the tenant too. The route checks (a locked row's version,
 * a free name, members that are SCIM Users) and answers in SCIM's terms.
 */
export type ScimGroupRow = Selectable<ScimGroupsTable>;
/** `value`: the member's SCIM User id (the account's); `members` absent: asked without them. */
export type ScimGroupMember = { value: string; display: string };
export type ScimGroupRecord = ScimGroupRow & { members?: ScimGroupMember[] };

/** Who acts: the organization and its directory's token (audited as `metadata.scimTokenId`, via scim). */
export type GroupActor = { tenantId: string; scimTokenId: string };

/** What a request makes of a group: PUT and PATCH both end in all of it (`members`: every member's id). */
export interface GroupChanges {
  displayName: string;
  externalId: string | null;
  members: string[];
}

async function membersOf(trx: Transaction<Database>, tenantId: string, groupIds: string[]) {
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

/** One page of the organization's groups, oldest first, and how many match in all. */
export async function listGroups(
  trx: Transaction<Database>,
  tenantId: string,
  // `filter`: over `scim_groups` (groupFilterSql in scim-filter-sql.ts).
  { filter, offset, limit, members }: { filter?: Expression<SqlBool>; offset: number; limit: number; members: boolean },
): Promise<{ total: number; groups: ScimGroupRecord[] }> {
  const base = trx
    .selectFrom('scim_groups')
    .where('tenant_id', '=', tenantId)
    .$if(filter !== undefined, (query) => query.where(filter!));
  const { total } = await base.select((eb) => eb.fn.countAll<string>().as('total')).executeTakeFirstOrThrow();
  const rows =
    limit === 0 ? [] : await base.selectAll().orderBy('created_at').orderBy('id').offset(offset).limit(limit).execute();
  if (!members) return { total: Number(total), groups: rows };
  const byGroup = await membersOf(
    trx,
    tenantId,
    rows.map((row) => row.id),
  );
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
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  const candidates = wanted.filter((id) => uuid.test(id));
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

/** Makes `members` the group's members; returns the users it added and removed. */
async function setMembers(trx: Transaction<Database>, tenantId: string, groupId: string, members: string[]) {
  const current = new Set(((await membersOf(trx, tenantId, [groupId])).get(groupId) ?? []).map((m) => m.value));
  const next = new Set(members);
  const added = [...next].filter((id) => !current.has(id));
  const removed = [...current].filter((id) => !next.has(id));
  if (removed.length > 0)
    await trx
      .deleteFrom('scim_group_members')
      .where('tenant_id', '=', tenantId)
      .where('group_id', '=', groupId)
      .where('user_id', 'in', removed)
      .execute();
  if (added.length > 0)
    await trx
      .insertInto('scim_group_members')
      .values(added.map((user_id) => ({ tenant_id: tenantId, group_id: groupId, user_id })))
      .execute();
  return { added, removed };
}

/** Membership in a group that maps to a role decides roles (docs/scim.md "Roles"); in another, none. */
async function syncRoles(trx: Transaction<Database>, actor: GroupActor, groupId: string, userIds: string[]) {
  if (userIds.length === 0 || !(await mapsToRole(trx, actor.tenantId, groupId))) return;
  for (const userId of [...userIds].sort()) await syncMemberRole(trx, { ...actor, userId });
}

function mapsToRole(trx: Transaction<Database>, tenantId: string, groupId: string) {
  return trx
    .selectFrom('scim_group_roles')
    .select('role_id')
    .where('tenant_id', '=', tenantId)
    .where('group_id', '=', groupId)
    .executeTakeFirst();
}

/** A new group with its members, audited as `scim.group_created`. */
export async function createGroup(
  trx: Transaction<Database>,
  actor: GroupActor,
  input: GroupChanges,
): Promise<ScimGroupRecord> {
  const row = await trx
    .insertInto('scim_groups')
    .values({ tenant_id: actor.tenantId, display_name: input.displayName, external_id: input.externalId })
    .returningAll()
    .executeTakeFirstOrThrow();
  const { added } = await setMembers(trx, actor.tenantId, row.id, input.members);
  await syncRoles(trx, actor, row.id, added);
  await recordAudit(trx, {
    action: 'scim.group_created',
    actorId: null,
    organizationId: actor.tenantId,
    metadata: { groupId: row.id, displayName: row.display_name, membersAdded: added, ...via(actor) },
  });
  return (await getGroup(trx, actor.tenantId, row.id))!;
}

/**
 * A replacement (PUT) or a patch, audited as `scim.group_updated` with what
 * changed; nothing changed: no new version, no entry. Members who joined or
 * left a group mapped to a role get their role again in this transaction.
 */
export async function updateGroup(
  trx: Transaction<Database>,
  actor: GroupActor,
  row: ScimGroupRow,
  changes: GroupChanges,
): Promise<ScimGroupRecord> {
  const { id } = row;
  const fields: string[] = [];
  if (changes.displayName !== row.display_name) fields.push('displayName');
  if (changes.externalId !== row.external_id) fields.push('externalId');
  const { added, removed } = await setMembers(trx, actor.tenantId, id, changes.members);
  if (added.length + removed.length > 0) fields.push('members');
  if (fields.length === 0) return (await getGroup(trx, actor.tenantId, id))!;
  const updated = await trx
    .updateTable('scim_groups')
    .set((eb) => ({
      ...(fields.includes('displayName') ? { display_name: changes.displayName } : {}),
      ...(fields.includes('externalId') ? { external_id: changes.externalId } : {}),
      version: eb('version', '+', 1),
      updated_at: new Date(),
    }))
    .where('tenant_id', '=', actor.tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  await syncRoles(trx, actor, id, [...added, ...removed]);
  await recordAudit(trx, {
    action: 'scim.group_updated',
    actorId: null,
    organizationId: actor.tenantId,
    metadata: {
      groupId: id,
      displayName: updated.display_name,
      fields,
      membersAdded: added,
      membersRemoved: removed,
      ...via(actor),
    },
  });
  return (await getGroup(trx, actor.tenantId, id))!;
}

/** Deletes a group (its members and role mapping go with it), audited as `scim.group_deleted`. */
export async function deleteGroup(trx: Transaction<Database>, actor: GroupActor, row: ScimGroupRow) {
  const { id } = row;
  const members = (await membersOf(trx, actor.tenantId, [id])).get(id) ?? [];
  const mapped = await mapsToRole(trx, actor.tenantId, id);
  await trx.deleteFrom('scim_groups').where('tenant_id', '=', actor.tenantId).where('id', '=', id).execute();
  // The mapping went with the group: its members' roles come from their other groups now.
  if (mapped) for (const { value } of members) await syncMemberRole(trx, { ...actor, userId: value });
  await recordAudit(trx, {
    action: 'scim.group_deleted',
    actorId: null,
    organizationId: actor.tenantId,
    metadata: { groupId: id, displayName: row.display_name, members: members.length, ...via(actor) },
  });
}

const via = (actor: GroupActor) => ({ scimTokenId: actor.scimTokenId, via: 'scim' });
