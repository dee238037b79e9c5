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

const CursorSchema = z.object({ createdAt: z.iso.datetime({ offset: true }), id: z.uuid() }).strict();

export function encodeCursor(row: { created_at: Date | string; id: string }): string {
  const cursor: Cursor = { createdAt: new Date(row.created_at).toISOString(), id: row.id };
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

export function decodeCursor(value: string): Cursor {
  try {
    return CursorSchema.parse(JSON.parse(Buffer.from(value, 'base64url').toString('utf8')));
  } catch {
    throw new ApiError('VALIDATION_ERROR', 'Invalid cursor', { details: [{ path: 'cursor', message: 'Invalid cursor' }] });
  }
}

/** Query parameters shared by every paginated list (API.md: `?limit=1..100&cursor=`). */
export const PageQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(50),
    cursor: z.string().min(1).max(512).optional(),
  })
  .strict();

/** Given `limit + 1` rows, the page and the cursor of the next one. */
export function page<T extends { created_at: Date | string; id: string }>(rows: T[], limit: number): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(last) : null };
}
