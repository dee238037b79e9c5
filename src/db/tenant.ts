import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from './database.js';
import { runInTransaction } from './ambient.js';

/**
 * Names the tenant for the rest of this transaction (set_config(..., true)),
 * never for the connection: row-level security on the tenant tables reads it
 * (migrations 0002, 0003).
 */
export async function setTenant(trx: Transaction<DB>, tenantId: string): Promise<void> {
  await sql`select set_config('app.tenant_id', ${tenantId}, true)`.execute(trx);
}

/** One transaction scoped to one organization: the second lock behind each query's own `tenant_id` filter. */
export function withTenant<T>(db: Kysely<DB>, tenantId: string, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return runInTransaction(db, async (trx) => {
    await setTenant(trx, tenantId);
    return fn(trx);
  });
}
