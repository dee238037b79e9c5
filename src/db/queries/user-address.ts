import type { Kysely } from 'kysely';
import type { Database } from '../database.js';

/** The address a user's notices go to; null when the user is gone. */
export async function userAddress(db: Kysely<Database>, userId: string): Promise<string | null> {
  const user = await db.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirst();
  return user?.email ?? null;
}
