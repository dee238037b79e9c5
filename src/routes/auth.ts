import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Kysely } from 'kysely';
import type { Auth } from '../auth/auth.js';
import { authorizeOrganizationCall, afterOrganizationCall, ORGANIZATION_TRANSACTIONAL_PATHS } from '../auth/organization-gate.js';
import type { Config } from '../config.js';
import { runInTransaction } from '../db/ambient.js';
import type { DB } from '../db/database.js';
import { ApiError } from '../errors.js';
import { access, guard, loadSession, scheduledForDeletion } from '../middleware/guard.js';
import { normalizePath } from '../middleware/rate-limit.js';
import { createRouter, defineRoute } from '../router.js';
import type { AppEnv } from '../types.js';

const providersRoute = defineRoute({
  method: 'get',
  path: '/api/auth/providers',
  access: access.public(),
  summary: 'Which OAuth providers are enabled',
  responses: {
    200: {
      description: 'One boolean per provider',
      content: { 'application/json': { schema: z.object({ google: z.boolean(), github: z.boolean() }).openapi('Providers') } },
    },
  },
});

/** Library routes that work without a session, or only end one: open to accounts scheduled for deletion. */
const OPEN_TO_SCHEDULED = ['sign-in', 'sign-up', 'sign-out', 'get-session', 'callback', 'verify-email', 'send-verification-email', 'magic-link', 'request-password-reset', 'reset-password', 'error', 'ok'];

function isOpenToScheduledAccounts(path: string): boolean {
  const first = path.slice('/api/auth/'.length).split('/')[0] ?? '';
  return OPEN_TO_SCHEDULED.includes(first);
}

/**
 * API.md "Errors": one shape, `{ code, message }`. Most library errors carry
 * a code; the few that carry only a message (update-user's "No fields to
 * update") get the one the library would derive (upper snake case of it).
 */
async function withErrorCode(response: Response): Promise<Response> {
  const body = (await response
    .clone()
    .json()
    .catch(() => null)) as { code?: unknown; message?: unknown } | null;
  if (!body || typeof body !== 'object' || typeof body.code === 'string' || typeof body.message !== 'string') return response;
  const code = body.message.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '') || `HTTP_${response.status}`;
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(JSON.stringify({ code, message: body.message }), { status: response.status, statusText: response.statusText, headers });
}

/** Ends the ambient transaction with the library's own error response, rolling back whatever it wrote. */
class Rollback extends Error {
  constructor(readonly response: Response) {
    super('rollback');
  }
}

/**
 * `/api/auth/*` is the library's (spec §4): the request goes to its handler
 * behind the same middleware chain. Organization-plugin calls are first
 * authorized by our permission strings (API.md "Organizations"), and the ones
 * that change roles or membership run in one transaction with our own
 * follow-up writes (role seeding, role ids, owner locks).
 */
export function authRoutes({ auth, config, db }: { auth: Auth; config: Config; db: Kysely<DB> }) {
  const router = createRouter();
  router.openapi(providersRoute, (c) => c.json({ google: config.oauth.google !== null, github: config.oauth.github !== null }, 200));

  const forward = async (c: Context<AppEnv>, request: Request): Promise<Response> => {
    const response = await auth.handler(request);
    if (response.status === 404 && !response.headers.get('content-type')?.includes('json')) {
      throw new ApiError('NOT_FOUND', 'Not found');
    }
    // The library's own 5xx answers carry no contract body: ours does, with the
    // request id, and throwing rolls back an ambient transaction.
    if (response.status >= 500) {
      throw new ApiError('INTERNAL_ERROR', 'Internal server error', { cause: new Error(`auth library answered ${response.status} on ${c.req.path}`) });
    }
    if (response.status >= 400 && response.headers.get('content-type')?.includes('json')) return withErrorCode(response);
    return response;
  };

  router.on(['GET', 'POST'], '/api/auth/*', guard(access.public()), async (c) => {
    const path = normalizePath(c.req.path);
    // Spec §5: a scheduled account may sign in and out and read its session,
    // but every library route that acts for a signed-in user is refused.
    if (!isOpenToScheduledAccounts(path) && c.req.header('cookie')) {
      const session = await loadSession(c);
      if (session?.deletedAt) throw scheduledForDeletion(session);
    }
    const call = await authorizeOrganizationCall(c, { path, db });
    if (!call) return forward(c, c.req.raw);
    if (!ORGANIZATION_TRANSACTIONAL_PATHS.has(path)) return forward(c, call.request);
    try {
      return await runInTransaction(db, async (trx) => {
        await call.before?.(trx);
        const response = await forward(c, call.request);
        if (!response.ok) throw new Rollback(response);
        return afterOrganizationCall(trx, { path, call, response });
      });
    } catch (error) {
      if (error instanceof Rollback) return error.response;
      throw error;
    }
  });
  return router;
}
