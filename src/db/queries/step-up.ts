import type { Kysely } from 'kysely';
import type { Database } from '../database.js';

/** The account's password hash (its credential account's), or null when it has none. */
export async function passwordHashOf(db: Kysely<Database>, userId: string): Promise<string | null> {
  const credential = await db
    .selectFrom('accounts')
    .select('password')
    .where('user_id', '=', userId)
    .where('provider_id', '=', 'credential')
    .where('password', 'is not', null)
    .executeTakeFirst();
  return credential?.password ?? null;
}

/**
 * Marks the session as having proved every factor at `at` (and as
 * multi-factor when a second factor was among them). False when the session
 * is gone (signed out or revoked meanwhile).
 */
export async function markSteppedUp(
  db: Kysely<Database>,
  { sessionId, userId, at, secondFactor }: { sessionId: string; userId: string; at: Date; secondFactor: boolean },
): Promise<boolean> {
  const { numUpdatedRows } = await db
    .updateTable('sessions')
    .set(secondFactor ? { step_up_at: at, mfa: true } : { step_up_at: at })
    .where('id', '=', sessionId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return numUpdatedRows > 0n;
}
