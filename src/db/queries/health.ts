import { type Kysely, sql } from 'kysely';
import type { Database } from '../database.js';

/** The smallest statement the database must answer: `select 1`. */
export async function ping(db: Kysely<Database>): Promise<void> {
  await sql`select 1`.execute(db);
}
