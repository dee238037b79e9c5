import type { Kysely, Transaction } from 'kysely';
import { ApiError, type ErrorDetail } from '../../shared/errors.js';
import { assertGrantable, bypassesPermissions } from '../../shared/permissions.js';
import type { EnrichedSession } from '../../shared/types.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';
import { listRoles } from './roles.js';
import { syncMemberRoles } from './scim-membership.js';

/** docs/scim.md "Roles": which role each directory group gives its members. */
export interface GroupRoleMapping {
  groupId: string;
  roleId: string;
}

export function listGroupRoles(db: Kysely<Database>, tenantId: string): Promise<GroupRoleMapping[]> {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('scim_group_roles as gr')
      .innerJoin('scim_groups as g', 'g.id', 'gr.group_id')
      .select(['gr.group_id as groupId', 'gr.role_id as roleId'])
      .where('gr.tenant_id', '=', tenantId)
      .orderBy('g.created_at')
      .orderBy('g.id')
      .execute(),
  );
}

/**
 * The rule for the roles a mapping hands out, as for an SSO connection's
 * (docs/sso.md "Connections"): each is one of the organization's (else 400)
 * and the caller's to grant, the Owner role only by an Owner; the roles the
 * change stops handing out are held to the same rule.
 */
async function checkRoles(
  trx: Transaction<Database>,
  tenantId: string,
  caller: EnrichedSession,
  refs: { path: string; roleId: string }[],
) {
  const roles = new Map((await listRoles(trx, tenantId)).map((role) => [role.id, role]));
  const unknown: ErrorDetail[] = refs
    .filter((ref) => !roles.has(ref.roleId))
    .map((ref) => ({ path: ref.path, message: 'no such role in this organization' }));
  if (unknown.length > 0) throw new ApiError('VALIDATION_ERROR', 'Unknown role', { details: unknown });
  for (const { path, roleId } of refs) {
    const role = roles.get(roleId)!;
    assertGrantable({ caller, granted: caller.permissions, wanted: role.permissions, path });
    if (role.is_default && role.slug === 'owner' && !bypassesPermissions(caller) && !caller.isOwner)
      throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', {
        details: [{ path, message: 'only an Owner maps groups to the Owner role' }],
      });
  }
}

/**
 * Replaces the organization's mapping, audited as `scim.group_roles_updated`;
 * every member of a group whose role changed gets their role again in the
 * same transaction (the last Owner is kept: 409 OWNERSHIP_CONSTRAINT).
 */
export function replaceGroupRoles(
  db: Kysely<Database>,
  { tenantId, caller, mappings }: { tenantId: string; caller: EnrichedSession; mappings: GroupRoleMapping[] },
): Promise<GroupRoleMapping[]> {
  return withTenant(db, tenantId, async (trx) => {
    const duplicates = mappings.flatMap((m, i) => (mappings.findIndex((n) => n.groupId === m.groupId) < i ? [i] : []));
    if (duplicates.length > 0)
      throw new ApiError('VALIDATION_ERROR', 'A group is mapped once', {
        details: duplicates.map((i) => ({ path: `${i}.groupId`, message: 'mapped twice' })),
      });
    const found =
      mappings.length === 0
        ? []
        : await trx
            .selectFrom('scim_groups')
            .select('id')
            .where('tenant_id', '=', tenantId)
            .where(
              'id',
              'in',
              mappings.map((m) => m.groupId),
            )
            .forShare()
            .execute();
    const groups = new Set(found.map((row) => row.id));
    const missing = mappings.flatMap((m, i) =>
      groups.has(m.groupId) ? [] : [{ path: `${i}.groupId`, message: 'no such group in this organization' }],
    );
    if (missing.length > 0) throw new ApiError('VALIDATION_ERROR', 'Unknown group', { details: missing });

    const previous = await trx
      .selectFrom('scim_group_roles')
      .select(['group_id as groupId', 'role_id as roleId'])
      .where('tenant_id', '=', tenantId)
      .forUpdate()
      .execute();
    const key = (m: GroupRoleMapping) => `${m.groupId}:${m.roleId}`;
    const before = new Set(previous.map(key));
    const after = new Set(mappings.map(key));
    const given = mappings.flatMap((m, i) => (before.has(key(m)) ? [] : [{ path: `${i}.roleId`, roleId: m.roleId }]));
    const taken = previous.filter((m) => !after.has(key(m))).map((m) => ({ path: 'previous', roleId: m.roleId }));
    await checkRoles(trx, tenantId, caller, [...given, ...taken]);
    const changedGroups = [
      ...new Set(
        [...mappings.filter((m) => !before.has(key(m))), ...previous.filter((m) => !after.has(key(m)))].map(
          (m) => m.groupId,
        ),
      ),
    ];
    if (changedGroups.length === 0) return listGroupRoles(db, tenantId);

    await trx.deleteFrom('scim_group_roles').where('tenant_id', '=', tenantId).execute();
    if (mappings.length > 0)
      await trx
        .insertInto('scim_group_roles')
        .values(mappings.map((m) => ({ tenant_id: tenantId, group_id: m.groupId, role_id: m.roleId })))
        .execute();
    const affected = await trx
      .selectFrom('scim_group_members')
      .select('user_id')
      .distinct()
      .where('tenant_id', '=', tenantId)
      .where('group_id', 'in', changedGroups)
      .orderBy('user_id')
      .execute();
    // No token acts here: the person who changed the mapping does, and demotes no Owner unless one.
    const actorIsOwner = caller.isOwner || bypassesPermissions(caller);
    await syncMemberRoles(trx, {
      tenantId,
      userIds: affected.map((row) => row.user_id),
      scimTokenId: null,
      actorId: caller.user.id,
      actorIsOwner,
      mappingChanged: true,
    });
    await recordAudit(trx, {
      action: 'scim.group_roles_updated',
      actorId: caller.user.id,
      organizationId: tenantId,
      metadata: { mappings, previous, membersRecomputed: affected.length },
    });
    return listGroupRoles(db, tenantId);
  });
}
