import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../database.js';

type Db = Kysely<Database> | Transaction<Database>;

/** The user's TOTP row: its id and encrypted secret. */
export function totpSecretOf(db: Db, userId: string) {
  return db.selectFrom('two_factors').select(['id', 'secret']).where('user_id', '=', userId).executeTakeFirst();
}

/**
 * Records `step` as the last TOTP time step accepted, only when it is above
 * the last one (one conditional UPDATE): false when it is not, a replay.
 */
export async function advanceTotpStep(db: Db, twoFactorId: string, step: number): Promise<boolean> {
  const { numUpdatedRows } = await db
    .updateTable('two_factors')
    .set({ last_totp_step: step })
    .where('id', '=', twoFactorId)
    .where((eb) => eb.or([eb('last_totp_step', 'is', null), eb('last_totp_step', '<', String(step))]))
    .executeTakeFirst();
  return numUpdatedRows > 0n;
}

/** Until when the user's codes are locked (null: never locked, or no second factor). */
export async function codesLockedUntil(db: Db, userId: string): Promise<Date | string | null> {
  const row = await db
    .selectFrom('two_factors')
    .select('locked_until')
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row?.locked_until ?? null;
}

/** Clears the user's failed-code count and lock. */
export async function clearCodeFailures(db: Db, userId: string): Promise<void> {
  await db
    .updateTable('two_factors')
    .set({ failed_verification_count: 0, locked_until: null })
    .where('user_id', '=', userId)
    .execute();
}

/** Adds one failed code, atomically; the `maxFailedAttempts`-th in a row locks the codes until `lockUntil`. */
export async function countCodeFailure(
  db: Db,
  userId: string,
  { maxFailedAttempts, lockUntil }: { maxFailedAttempts: number; lockUntil: Date },
): Promise<void> {
  await db
    .updateTable('two_factors')
    .set((eb) => ({
      failed_verification_count: eb('failed_verification_count', '+', 1),
      locked_until: eb
        .case()
        .when('failed_verification_count', '>=', maxFailedAttempts - 1)
        .then(lockUntil)
        .else(eb.ref('locked_until'))
        .end(),
    }))
    .where('user_id', '=', userId)
    .execute();
}

/** The user's stored backup codes (a JSON array of keyed hashes), with the row's id. */
export function backupCodesOf(db: Db, userId: string) {
  return db.selectFrom('two_factors').select(['id', 'backup_codes']).where('user_id', '=', userId).executeTakeFirst();
}

/** Writes the remaining codes only if the stored ones are still `previous` (one conditional UPDATE): true when written. */
export async function replaceBackupCodes(
  db: Db,
  twoFactorId: string,
  { previous, remaining }: { previous: string; remaining: string },
): Promise<boolean> {
  const { numUpdatedRows } = await db
    .updateTable('two_factors')
    .set({ backup_codes: remaining })
    .where('id', '=', twoFactorId)
    .where('backup_codes', '=', previous)
    .executeTakeFirst();
  return numUpdatedRows > 0n;
}
