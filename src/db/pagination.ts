import { type ExpressionBuilder, type SelectQueryBuilder, sql } from 'kysely';
import { z } from 'zod';
import { ApiError } from '../shared/errors.js';

/**
 * Keyset pagination, newest first: the cursor is the (created_at, id) of the
 * last item served, opaque to clients (base64url JSON).
 */
export interface Cursor {
  createdAt: string;
  id: string;
}

/**
 * A cursor's time, as the pages write it (`YYYY-MM-DDTHH:MM:SS.ffffffZ`) or
 * any RFC 3339 time PostgreSQL reads as the same instant: a real calendar
 * date and clock time (no second 60, no hour 24), at most microseconds (more
 * digits would round), an offset within PostgreSQL's ±15:59, years 1 to 9999
 * both as written and in UTC (PostgreSQL has no year 0, and some far years
 * are an error there). Anything else is the client's 400, never a 500.
 */
const CURSOR_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:Z|([+-])(\d{2}):(\d{2}))$/;

/** Days in a month of the proleptic Gregorian calendar (PostgreSQL's and JavaScript's). */
function daysIn(year: number, month: number): number {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * The instant `value` names, written the one way the pages write it (UTC,
 * six fractional digits), or null when it is not a cursor time. Only this
 * form ever reaches PostgreSQL.
 */
export function cursorTime(value: string): string | null {
  const match = CURSOR_TIME.exec(value);
  if (!match) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const micros = Number((match[7] ?? '').padEnd(6, '0'));
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offsetMinutes = 0;
  if (match[8]) {
    const [offsetHours, offsetRest] = [Number(match[9]), Number(match[10])];
    if (offsetHours > 15 || offsetRest > 59) return null;
    offsetMinutes = (match[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetRest);
  }
  const local = new Date(0);
  local.setUTCFullYear(year, month - 1, day);
  local.setUTCHours(hour, minute, second, Math.floor(micros / 1000));
  const at = new Date(local.getTime() - offsetMinutes * 60_000);
  const utcYear = at.getUTCFullYear();
  if (Number.isNaN(at.getTime()) || utcYear < 1 || utcYear > 9999) return null;
  return `${at.toISOString().slice(0, 23)}${String(micros % 1000).padStart(3, '0')}Z`;
}

const CursorSchema = z
  .object({
    createdAt: z.string().transform((value, ctx) => {
      const at = cursorTime(value);
      if (at === null) {
        ctx.addIssue({ code: 'custom', message: 'Out of range' });
        return z.NEVER;
      }
      return at;
    }),
    id: z.uuid(),
  })
  .strict();

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

/** Query parameters shared by every paginated list (docs/api.md "Pagination": `?limit=1..100&cursor=`). */
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
