import type { ColumnType, Generated } from 'kysely';

/** The webhook tables of `Database` (src/db/database.ts; migrations/0008). */

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

/** An organization's webhook endpoint; `secret` is the signing secret encrypted under AUTH_SECRET. */
export interface WebhookEndpointsTable {
  id: Generated<string>;
  tenant_id: string;
  url: string;
  events: string[];
  description: string | null;
  secret: string;
  enabled: Generated<boolean>;
  disabled_reason: string | null;
  failing_since: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

/** One event for one endpoint (the outbox); the row id is the `webhook-id` of every attempt. */
export interface WebhookDeliveriesTable {
  id: Generated<string>;
  tenant_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  payload: ColumnType<Record<string, unknown>, string, string>;
  status: ColumnType<DeliveryStatus, DeliveryStatus | undefined, DeliveryStatus>;
  attempts: Generated<number>;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: NullableTimestamp;
  locked_until: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
