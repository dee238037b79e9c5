import type { Transaction } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { getGroup, membersOf, type ScimGroupRecord, type ScimGroupRow } from './scim-group-reads.js';
import { type ScimTokenActor, syncMemberRoles, via } from './scim-membership.js';

/**
 * docs/scim.md "Groups": writing an organization's directory groups and who
 * is in them (reading: scim-group-reads.ts), in the request's one
 * transaction with the tenant named (`withTenant`); each query names the
 * tenant too. The route checks (a locked row's version, a free name, members
 * that are SCIM Users) and answers in SCIM's terms.
 */

/** What a request makes of a group: PUT and PATCH both end in all of it (`members`: every member's id). */
export interface GroupChanges {
  displayName: string;
  externalId: string | null;
  members: string[];
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
async function syncRoles(trx: Transaction<Database>, actor: ScimTokenActor, groupId: string, userIds: string[]) {
  if (userIds.length === 0 || !(await mapsToRole(trx, actor.tenantId, groupId))) return;
  await syncMemberRoles(trx, { ...actor, userIds });
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
  actor: ScimTokenActor,
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
    metadata: { groupId: row.id, displayName: row.display_name, membersAdded: added, ...via(actor.scimTokenId) },
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
  actor: ScimTokenActor,
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
      ...via(actor.scimTokenId),
    },
  });
  return (await getGroup(trx, actor.tenantId, id))!;
}

/** Deletes a group (its members and role mapping go with it), audited as `scim.group_deleted`. */
export async function deleteGroup(trx: Transaction<Database>, actor: ScimTokenActor, row: ScimGroupRow) {
  const { id } = row;
  const members = (await membersOf(trx, actor.tenantId, [id])).get(id) ?? [];
  const mapped = await mapsToRole(trx, actor.tenantId, id);
  await trx.deleteFrom('scim_groups').where('tenant_id', '=', actor.tenantId).where('id', '=', id).execute();
  // The mapping went with the group: its members' roles come from their other groups now.
  if (mapped) await syncMemberRoles(trx, { ...actor, userIds: members.map(({ value }) => value) });
  await recordAudit(trx, {
    action: 'scim.group_deleted',
    actorId: null,
    organizationId: actor.tenantId,
    metadata: { groupId: id, displayName: row.display_name, members: members.length, ...via(actor.scimTokenId) },
  });
}
