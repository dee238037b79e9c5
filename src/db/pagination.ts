import { type ExpressionBuilder, type SelectQueryBuilder, sql } from 'kysely';
import { z } from 'zod';
import { ApiError } from '../errors.js';

/**
 * Keyset pagination, newest first: the cursor is the (created_at, id) of the
 * last item served, opaque to clients (base64url JSON).
 */
export interface Cursor {
  createdAt: string;
  id: string;
}

/**
 * A time PostgreSQL reads as a timestamptz the same way: at most microseconds
 * (more digits would round, possibly past the range), and an instant between
 * years 1 and 9999 UTC (PostgreSQL has no year 0 and refuses some far years
 * with an error, which must be the client's 400, not a 500).
 */
const CursorTime = z.iso.datetime({ offset: true }).refine((value) => {
  if ((/\.(\d+)/.exec(value)?.[1]?.length ?? 0) > 6) return false;
  const at = new Date(value);
  const year = at.getUTCFullYear();
  return !Number.isNaN(at.getTime()) && year >= 1 && year <= 9999;
}, 'Out of range');

const CursorSchema = z.object({ createdAt: CursorTime, id: z.uuid() }).strict();

/**
 * `created_at` to the microsecond, as the cursor keeps it: a JS Date holds
 * milliseconds, and rows one transaction writes share now() to the
 * microsecond, so a cursor cut to milliseconds would skip the rest of them.
 */
export const cursorAt = sql<string>`to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`.as(
  'cursor_at',
);

/** Rows strictly after the cursor in (created_at desc, id desc) order. */
// biome-ignore lint/suspicious/noExplicitAny: any table with created_at and id (Kysely has no type for "a table with these columns")
export function afterCursor(eb: ExpressionBuilder<any, any>, cursor: Cursor) {
  const at = sql<Date>`${cursor.createdAt}::timestamptz`;
  return eb.or([eb('created_at', '<', at), eb.and([eb('created_at', '=', at), eb('id', '<', cursor.id)])]);
}

export function encodeCursor(row: { cursor_at: string; id: string }): string {
  const cursor: Cursor = { createdAt: row.cursor_at, id: row.id };
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

export function decodeCursor(value: string): Cursor {
  try {
    return CursorSchema.parse(JSON.parse(Buffer.from(value, 'base64url').toString('utf8')));
  } catch {
    throw new ApiError('VALIDATION_ERROR', 'Invalid cursor', {
      details: [{ path: 'cursor', message: 'Invalid cursor' }],
    });
  }
}

/** Query parameters shared by every paginated list (API.md: `?limit=1..100&cursor=`). */
export const PageQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(50),
    cursor: z.string().min(1).max(512).optional(),
  })
  .strict();

/** Given `limit + 1` rows (selected with `cursorAt`), the page and the cursor of the next one. */
export function page<T extends { cursor_at: string; id: string }>(
  rows: T[],
  limit: number,
): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}

/**
 * One page of `query`, newest first: orders by (created_at, id) descending,
 * reads one row more than `limit` to know whether another page follows, and
 * starts after `cursor` (400 VALIDATION_ERROR when it is not one of ours).
 */
export async function paginate<O extends { id: string }>(
  // biome-ignore lint/suspicious/noExplicitAny: any table with created_at and id, as afterCursor
  query: SelectQueryBuilder<any, any, O>,
  { limit, cursor }: { limit: number; cursor?: string },
): Promise<{ items: (O & { cursor_at: string })[]; nextCursor: string | null }> {
  const after = cursor ? decodeCursor(cursor) : null;
  let paged = query
    .select(cursorAt)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit + 1);
  if (after) paged = paged.where((eb) => afterCursor(eb, after));
  return page((await paged.execute()) as (O & { cursor_at: string })[], limit);
}
