import { z } from '@hono/zod-openapi';
import { sql, type Kysely } from 'kysely';
import { ApiError } from '../errors.js';
import { access } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';

const HealthSchema = z.object({ status: z.literal('ok') }).openapi('Health');

const route = defineRoute({
  method: 'get',
  path: '/api/health',
  access: access.public(),
  summary: 'Liveness and database reachability',
  responses: {
    200: { description: 'The service and its database answer', content: { 'application/json': { schema: HealthSchema } } },
  },
});

/** API.md: 200 `{ status: "ok" }`; 503 when the database does not answer within `timeoutMs`. */
export function healthRoutes({ db, timeoutMs = 2000 }: { db: Kysely<any>; timeoutMs?: number }) {
  return createRouter().openapi(route, async (c) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('database health check timed out')), timeoutMs);
    });
    try {
      await Promise.race([sql`select 1`.execute(db), timeout]);
    } catch (error) {
      throw new ApiError('SERVICE_UNAVAILABLE', 'Database unavailable', { cause: error });
    } finally {
      clearTimeout(timer);
    }
    return c.json({ status: 'ok' as const }, 200);
  });
}
