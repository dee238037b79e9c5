import { type Kysely, sql, type Transaction } from 'kysely';
import { runInTransaction } from './ambient.js';
import type { Database } from './database.js';

/**
 * The settings row-level security reads (migrations 0002-0004), named for the
 * rest of the transaction (set_config(..., true)), never for the connection.
 * '' names nobody; a setting left out keeps its value.
 */
export interface Scope {
  /** `app.tenant_id`: the organization whose roles, keys and audit rows are visible. */
  tenantId?: string;
  /** `app.key_owner_id`: with no tenant named, the keys this user created, in every organization. */
  keyOwnerId?: string;
  /** `app.actor_id`: with no tenant named, the audit entries this user caused. */
  actorId?: string;
  /** `app.webhook_deliverer`: 'on' for the deliverer's statements, which claim and settle every organization's deliveries. */
  webhookDeliverer?: 'on';
}

const SETTINGS = {
  tenantId: 'app.tenant_id',
  keyOwnerId: 'app.key_owner_id',
  actorId: 'app.actor_id',
  webhookDeliverer: 'app.webhook_deliverer',
} as const satisfies Record<keyof Scope, string>;

/** Sets the given scope in one statement: the only place the service calls set_config. */
export async function setScope(trx: Transaction<Database>, scope: Scope): Promise<void> {
  const calls = (Object.keys(SETTINGS) as (keyof Scope)[])
    .filter((key) => scope[key] !== undefined)
    .map((key) => sql`set_config(${SETTINGS[key]}, ${scope[key]!}, true)`);
  if (calls.length > 0) await sql`select ${sql.join(calls)}`.execute(trx);
}

/** Names the tenant for the rest of this transaction. */
export async function setTenant(trx: Transaction<Database>, tenantId: string): Promise<void> {
  await setScope(trx, { tenantId });
}

/** One transaction scoped to one organization: the second lock behind each query's own `tenant_id` filter. */
export function withTenant<T>(
  db: Kysely<Database>,
  tenantId: string,
  fn: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return runInTransaction(db, async (trx) => {
    await setTenant(trx, tenantId);
    return fn(trx);
  });
}
