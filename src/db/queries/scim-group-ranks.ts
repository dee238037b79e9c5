import type { Transaction } from 'kysely';
import type { Database } from '../database.js';

/** docs/scim.md "Roles": which mapped role ranks highest among a member's groups. */

type Trx = Transaction<Database>;

export interface RankedRole {
  id: string;
  slug: string;
  is_default: boolean;
  permission_count: number;
}

const DEFAULT_RANK: Record<string, number> = { owner: 4, admin: 3, member: 2, viewer: 1 };

/** Owner > Admin > Member > Viewer; otherwise more permissions, then a default role, then the older id. */
function outranks(a: RankedRole, b: RankedRole): boolean {
  const rank = (role: RankedRole) => (role.is_default ? (DEFAULT_RANK[role.slug] ?? 0) : 0);
  if (rank(a) === 4 || rank(b) === 4) return rank(a) > rank(b);
  if (rank(a) && rank(b)) return rank(a) > rank(b);
  if (a.permission_count !== b.permission_count) return a.permission_count > b.permission_count;
  if (rank(a) !== rank(b)) return rank(a) > rank(b);
  return a.id < b.id;
}

/** Whether the organization maps any group to a role: without mappings, groups leave roles alone. */
export async function mapsGroups(trx: Trx, tenantId: string): Promise<boolean> {
  const row = await trx.selectFrom('scim_group_roles').select('group_id').where('tenant_id', '=', tenantId).limit(1);
  return (await row.executeTakeFirst()) !== undefined;
}

/** For each of the users, the highest role mapped to one of their groups (absent: none is), in one statement. */
export async function groupRoles(trx: Trx, tenantId: string, userIds: string[]): Promise<Map<string, RankedRole>> {
  const best = new Map<string, RankedRole>();
  if (userIds.length === 0) return best;
  const roles = await trx
    .selectFrom('scim_group_members as gm')
    .innerJoin('scim_group_roles as gr', (join) =>
      join.onRef('gr.group_id', '=', 'gm.group_id').onRef('gr.tenant_id', '=', 'gm.tenant_id'),
    )
    .innerJoin('roles as r', (join) => join.onRef('r.id', '=', 'gr.role_id').onRef('r.tenant_id', '=', 'gr.tenant_id'))
    .select(['gm.user_id', 'r.id', 'r.slug', 'r.is_default'])
    .select((eb) =>
      eb
        .selectFrom('role_permissions as rp')
        .select((inner) => inner.fn.countAll<number>().as('n'))
        .whereRef('rp.role_id', '=', 'r.id')
        .as('permission_count'),
    )
    .where('gm.tenant_id', '=', tenantId)
    // One array parameter, however many users (syncMemberRoles).
    .where('gm.user_id', '=', (eb) => eb.fn.any(eb.val(userIds)))
    .execute();
  for (const { user_id, ...row } of roles) {
    const role = { ...row, permission_count: Number(row.permission_count ?? 0) };
    const held = best.get(user_id);
    if (!held || outranks(role, held)) best.set(user_id, role);
  }
  return best;
}
