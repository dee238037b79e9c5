import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../database.js';

type Db = Kysely<Database> | Transaction<Database>;

/** Whether the account has a password (a credential account holding one). */
export async function hasPassword(db: Db, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('accounts')
    .select('id')
    .where('user_id', '=', userId)
    .where('provider_id', '=', 'credential')
    .where('password', 'is not', null)
    .executeTakeFirst();
  return row !== undefined;
}

/** Whether the user has two-factor enabled (undefined: no such user). */
export async function twoFactorEnabled(db: Db, userId: string): Promise<boolean | undefined> {
  const row = await db.selectFrom('users').select('two_factor_enabled').where('id', '=', userId).executeTakeFirst();
  return row?.two_factor_enabled;
}

/** A session's marks: multi-factor, and when it last proved every factor. */
export function sessionMarksOf(db: Db, sessionId: string) {
  return db.selectFrom('sessions').select(['mfa', 'step_up_at']).where('id', '=', sessionId).executeTakeFirst();
}

/** Deletes a verification record of `value` that has not expired: true when there was one. */
export async function takeVerification(db: Db, identifier: string, value: string): Promise<boolean> {
  const taken = await db
    .deleteFrom('verifications')
    .where('identifier', '=', identifier)
    .where('value', '=', value)
    .where('expires_at', '>', new Date())
    .returning('id')
    .executeTakeFirst();
  return taken !== undefined;
}

/** Deletes a verification record that has not expired, answering its value; null when there was none. */
export async function takeVerificationValue(db: Db, identifier: string): Promise<string | null> {
  const taken = await db
    .deleteFrom('verifications')
    .where('identifier', '=', identifier)
    .where('expires_at', '>', new Date())
    .returning('value')
    .executeTakeFirst();
  return taken?.value ?? null;
}

/** Adds a verification record. */
export async function insertVerification(
  db: Db,
  { identifier, value, expiresAt }: { identifier: string; value: string; expiresAt: Date },
): Promise<void> {
  const now = new Date();
  await db
    .insertInto('verifications')
    .values({ identifier, value, expires_at: expiresAt, created_at: now, updated_at: now })
    .execute();
}
