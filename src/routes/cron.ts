import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { safeEqual } from '../auth/api-key-material.js';
import type { Database } from '../db/database.js';
import { purgeExpiredAccounts } from '../db/queries/accounts.js';
import { access } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';
import { ApiError } from '../shared/errors.js';
import type { Clock } from '../shared/types.js';

const route = defineRoute({
  method: 'post',
  path: '/api/cron/purge-accounts',
  // Not a session route: authenticated by `Authorization: Bearer <CRON_SECRET>` below.
  access: access.public(),
  summary: 'Purge accounts whose grace period has ended (scheduled job)',
  security: [{ cronSecret: [] }],
  responses: {
    200: {
      description: 'How many accounts were purged, and how many failed',
      content: { 'application/json': { schema: z.object({ purged: z.number().int(), failed: z.number().int() }) } },
    },
  },
});

/** The purge job (docs/api.md "Accounts scheduled for deletion"): 401 without the right secret, and always 401 when CRON_SECRET is unset. */
export function cronRoutes({
  db,
  clock,
  cronSecret,
  graceDays,
}: {
  db: Kysely<Database>;
  clock: Clock;
  cronSecret: string | null;
  graceDays: number;
}) {
  return createRouter().openapi(route, async (c) => {
    const presented = /^Bearer (.+)$/.exec(c.req.header('authorization') ?? '')?.[1] ?? '';
    if (!cronSecret || !safeEqual(presented, cronSecret))
      throw new ApiError('UNAUTHORIZED', 'Invalid cron credentials');
    const result = await purgeExpiredAccounts(db, { now: clock(), graceDays, logger: c.get('logger') });
    return c.json(result, 200);
  });
}
