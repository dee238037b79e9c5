import type { Transaction } from 'kysely';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { libraryRoleFor } from './roles.js';

/**
 * Moves a member to `role` as an identity provider or a directory does
 * (their rules checked by the caller), audited as `member.role_changed`
 * with who or what made the change (`actorId`, `via`). Needs the tenant set on `trx`.
 */
export async function moveMember(
  trx: Transaction<Database>,
  entry: {
    tenantId: string;
    member: { id: string; role_id: string | null };
    role: { id: string; slug: string };
    actorId: string | null;
    via: Record<string, unknown>;
  },
): Promise<void> {
  const { tenantId, member, role } = entry;
  await trx
    .updateTable('members')
    .set({ role_id: role.id, role: libraryRoleFor(role.slug) })
    .where('id', '=', member.id)
    .execute();
  await recordAudit(trx, {
    action: 'member.role_changed',
    actorId: entry.actorId,
    organizationId: tenantId,
    metadata: { memberId: member.id, roleId: role.id, previousRoleId: member.role_id, ...entry.via },
  });
}
