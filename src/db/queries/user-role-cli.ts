import { sql, type Transaction } from 'kysely';
import type { PlatformRole } from '../../shared/permissions.js';
import { recordAudit } from '../audit.js';
import type { SchemalessDb } from '../client.js';
import type { Database } from '../database.js';

/** What `npm run user:role` did, or why it did nothing. */
export type RoleByEmail =
  | { outcome: 'no_user' }
  | { outcome: 'ambiguous' }
  | {
      outcome: 'done';
      userId: string;
      email: string;
      previousRole: PlatformRole;
      role: PlatformRole;
      changed: boolean;
    };

/**
 * Sets the platform role of the one user whose address is `email` (already
 * lower case; addresses differing only in case match too), audited as
 * `user.role_changed` with `via: 'cli'`, in one transaction of the schema
 * owner (src/entries/user-role.ts). A role already held changes nothing.
 */
export function setPlatformRoleByEmail(owner: SchemalessDb, email: string, role: PlatformRole): Promise<RoleByEmail> {
  return owner.transaction().execute(async (trx) => {
    const matches: { id: string; email: string; role: PlatformRole }[] = await trx
      .selectFrom('users')
      .select(['id', 'email', 'role'])
      .where(sql<string>`lower(email)`, '=', email)
      .forUpdate()
      .execute();
    const [user, ...others] = matches;
    if (!user) return { outcome: 'no_user' };
    if (others.length > 0) return { outcome: 'ambiguous' };
    const done = { outcome: 'done', userId: user.id, email: user.email, previousRole: user.role, role } as const;
    if (user.role === role) return { ...done, changed: false };
    await trx.updateTable('users').set({ role, updated_at: new Date() }).where('id', '=', user.id).execute();
    // The owner handle is untyped; the audit table is the same one.
    await recordAudit(trx as unknown as Transaction<Database>, {
      action: 'user.role_changed',
      actorId: null,
      organizationId: null,
      metadata: { userId: user.id, previousRole: user.role, role, via: 'cli' },
    });
    return { ...done, changed: true };
  });
}
