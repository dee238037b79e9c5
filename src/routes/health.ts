import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { ping } from '../db/queries/health.js';
import { access } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';
import { ApiError } from '../shared/errors.js';

const HealthSchema = z.object({ status: z.literal('ok') }).openapi('Health');

const route = defineRoute({
  method: 'get',
  path: '/api/health',
  access: access.public(),
  summary: 'Liveness and database reachability',
  description:
    'The database is asked at most once per second: answers within a second of a successful check share it; a failure is never reused.',
  responses: {
    200: {
      description: 'The service and its database answer',
      content: { 'application/json': { schema: HealthSchema } },
    },
  },
});

export interface DatabaseProbeOptions {
  db: Kysely<Database>;
  /** How long the database has to answer `select 1`. */
  timeoutMs?: number;
  /** How long a successful answer stands for later checks. */
  freshMs?: number;
  now?: () => number;
}

/**
 * One `select 1` stands for every health check within `freshMs` of its
 * success, and checks made while one is in flight wait for it: a load
 * balancer or a flood on /api/health costs the database one statement a
 * second, not one per request. A failure is shared only by the checks that
 * waited on it; the next check asks again.
 */
export function createDatabaseProbe({
  db,
  timeoutMs = 2000,
  freshMs = 1000,
  now = () => performance.now(),
}: DatabaseProbeOptions): () => Promise<void> {
  let okAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | null = null;
  const ask = async () => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('database health check timed out')), timeoutMs);
    });
    try {
      await Promise.race([ping(db), timeout]);
      okAt = now();
    } finally {
      clearTimeout(timer);
      inFlight = null;
    }
  };
  return () => {
    if (now() - okAt < freshMs) return Promise.resolve();
    inFlight ??= ask();
    return inFlight;
  };
}

/** 200 `{ status: "ok" }`; 503 when the database does not answer. */
export function healthRoutes(options: DatabaseProbeOptions) {
  const probe = createDatabaseProbe(options);
  return createRouter().openapi(route, async (c) => {
    try {
      await probe();
    } catch (error) {
      throw new ApiError('SERVICE_UNAVAILABLE', 'Database unavailable', { cause: error });
    }
    return c.json({ status: 'ok' as const }, 200);
  });
}
