import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Kysely } from 'kysely';
import { type Auth, COOKIE_PREFIX } from '../auth/auth.js';
import { runInTransaction } from '../db/ambient.js';
import type { Database } from '../db/database.js';
import { sessionToken } from '../db/queries/accounts.js';
import { answerForLibrary, withoutTokens } from '../library/answers.js';
import type { LibraryRoute } from '../library/fields.js';
import { type JsonObject, type LibraryInput, libraryInput } from '../library/input.js';
import {
  afterOrganizationCall,
  authorizedOrganization,
  beforeOrganizationCall,
  checkInvitation,
  type OrganizationCall,
  organizationTarget,
} from '../library/organization-gate.js';
import { forwardedRequest, spendInvitationBudget } from '../library/request.js';
import { LIBRARY_ROUTES } from '../library/routes.js';
import { afterSecondFactorCall, beforeSecondFactorCall } from '../library/second-factor-calls.js';
import { access, guard, loadSession } from '../middleware/guard.js';
import { withAccountAttempt } from '../middleware/rate-limit.js';
import type { RateLimitStore } from '../platform/rate-limit-store.js';
import { createRouter, defineRoute } from '../router.js';
import type { Config } from '../shared/config.js';
import { ApiError } from '../shared/errors.js';
import type { AppEnv, Clock } from '../shared/types.js';

export const AUTH_PREFIX = '/api/auth';

const providersRoute = defineRoute({
  method: 'get',
  path: '/api/auth/providers',
  access: access.public(),
  summary: 'Which OAuth providers are enabled',
  responses: {
    200: {
      description: 'One boolean per provider',
      content: {
        'application/json': { schema: z.object({ google: z.boolean(), github: z.boolean() }).openapi('Providers') },
      },
    },
  },
});

/** A JSON answer with the library's status (unless given) and headers (its Set-Cookie included) and our body. */
function reply(response: Response, body: unknown, status?: number): Response {
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  headers.set('content-type', 'application/json');
  return new Response(JSON.stringify(body), {
    status: status ?? response.status,
    statusText: status ? '' : response.statusText,
    headers,
  });
}

const FAILED_REGISTRATION = {
  code: 'FAILED_TO_VERIFY_REGISTRATION',
  message: 'The passkey registration could not be verified',
};

/** The `code` of a library answer's JSON body, if any. */
async function libraryCode(response: Response): Promise<unknown> {
  const body = await response
    .clone()
    .json()
    .catch(() => null);
  return body && typeof body === 'object' ? (body as { code?: unknown }).code : undefined;
}

/**
 * API.md "Errors": one shape, `{ code, message }`. Most library errors carry
 * a code; the few that carry only a message get the one the library would
 * derive (upper snake case of it).
 */
function withErrorCode(response: Response, body: { code?: unknown; message?: unknown } | null): Response {
  if (!body || typeof body !== 'object' || typeof body.code === 'string' || typeof body.message !== 'string')
    return response;
  const code =
    body.message
      .toUpperCase()
      .replace(/[^A-Z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '') || `HTTP_${response.status}`;
  return reply(response, { code, message: body.message });
}

/**
 * The session token a library answer sets in the session cookie, when it
 * issued one (better-call's signed value `<token>.<signature>`, URI-encoded);
 * null when the answer sets none or expires it.
 */
function issuedSessionToken(response: Response, config: Config): string | null {
  const name = `${config.auth.secureCookies ? '__Secure-' : ''}${COOKIE_PREFIX}.session_token=`;
  const header = response.headers.getSetCookie().findLast((cookie) => cookie.startsWith(name));
  const value = decodeURIComponent(header?.slice(name.length).split(';')[0] ?? '');
  const dot = value.lastIndexOf('.');
  return dot > 0 ? value.slice(0, dot) : null;
}

/** Ends the ambient transaction with the library's own error response, rolling back whatever it wrote. */
class Rollback extends Error {
  constructor(readonly response: Response) {
    super('rollback');
  }
}

interface Deps {
  auth: Auth;
  config: Config;
  db: Kysely<Database>;
  store: RateLimitStore;
  clock: Clock;
}

/**
 * `/api/auth/*` is the library's (spec §4), behind the same chain, and deny
 * by default: only the routes of LIBRARY_ROUTES are served, each
 * behind the guard with its declared access; anything else the library
 * mounts answers 404. Calls reach the library without its cookie cache, so
 * it reads the session (and its active organization) from the database as
 * the service does, and organization calls name the organization the guard
 * authorized. Organization changes run in one transaction with our own
 * follow-up writes (role seeding, role ids, owner locks, key revocations).
 */
export function authRoutes({ auth, config, db, store, clock }: Deps) {
  const router = createRouter();
  router.openapi(providersRoute, (c) =>
    c.json({ google: config.oauth.google !== null, github: config.oauth.github !== null }, 200),
  );

  const forward = async (c: Context<AppEnv>, request: Request): Promise<{ response: Response; body: unknown }> => {
    const response = await auth.handler(request);
    // The passkey plugin answers 500 to any credential its verifier cannot
    // parse: a malformed registration is the client's error (the plugin logs the cause).
    if (response.status === 500 && (await libraryCode(response)) === 'FAILED_TO_VERIFY_REGISTRATION')
      return { response: reply(response, FAILED_REGISTRATION, 400), body: FAILED_REGISTRATION };
    // The library's own 5xx answers carry no contract body: ours does, with the
    // request id, and throwing rolls back an ambient transaction.
    if (response.status >= 500) {
      throw new ApiError('INTERNAL_ERROR', 'Internal server error', {
        cause: new Error(`auth library answered ${response.status} on ${c.req.path}`),
      });
    }
    if (response.status === 404 && !response.headers.get('content-type')?.includes('json'))
      throw new ApiError('NOT_FOUND', 'Not found');
    const isJson = response.headers.get('content-type')?.includes('json') ?? false;
    const body = isJson
      ? await response
          .clone()
          .json()
          .catch(() => undefined)
      : undefined;
    return { response, body };
  };

  const finish = (response: Response, body: unknown): Response => {
    if (body === undefined) return response;
    if (response.status >= 400) return withErrorCode(response, body as JsonObject);
    return reply(response, withoutTokens(body));
  };

  const serve = (route: LibraryRoute) => async (c: Context<AppEnv>) => {
    // Public routes load no session in the guard; a transactional call records who acted.
    const session = route.transactional ? await loadSession(c) : c.get('session');
    const target = authorizedOrganization(c);
    let input: LibraryInput = await libraryInput(c, route);
    if (target?.id && route.organization) input = withOrganizationIn(route, target.id, input);
    if (route.answeredByService)
      return c.json((await answerForLibrary(db, route.path, { session: session!, target: target!, input })) as object);

    const call: OrganizationCall = {
      path: route.path,
      session,
      organizationId: target?.id ?? null,
      body: input.body,
      query: input.query,
      requestId: c.get('requestId'),
    };
    if (route.path === '/organization/invite-member') {
      await spendInvitationBudget(store, clock, session!.user.id, call.organizationId!);
      input = { ...input, body: await checkInvitation(db, call, target!.permissions) };
    }
    if (route.path === '/revoke-session') {
      // Sessions are named by id (tokens are never shown): the library revokes by token.
      const token = await sessionToken(db, { sessionId: String(input.body!.id), userId: session!.user.id });
      if (!token) throw new ApiError('NOT_FOUND', 'Session not found');
      input = { ...input, body: { token } };
    }
    // get-session keeps the library's cookie cache (the SPA's repeated read)
    // while the service agrees the session stands; every other call reads the database.
    const keepCookieCache = route.path === '/get-session' && session !== null;
    const request = await forwardedRequest(c, route, input, { keepCookieCache, config });

    if (route.path === '/get-session') {
      const { response, body } = await forward(c, request);
      if (!session || !body || typeof body !== 'object') return reply(response, null);
      const answer = withoutTokens(body) as { session: JsonObject };
      return reply(response, {
        ...answer,
        session: { ...answer.session, activeOrganizationId: session.session.activeOrganizationId },
      });
    }
    if (route.path === '/list-sessions') {
      const { response, body } = await forward(c, request);
      if (!Array.isArray(body)) return finish(response, body);
      return reply(
        response,
        (withoutTokens(body) as JsonObject[]).map((entry) => ({ ...entry, current: entry.id === session!.session.id })),
      );
    }
    if (!route.transactional) {
      const { response, body } = await forward(c, request);
      return finish(response, body);
    }
    try {
      return await runInTransaction(db, async (trx) => {
        await beforeOrganizationCall(trx, call);
        const secondFactor = await beforeSecondFactorCall(trx, call);
        const { response, body } = await forward(c, request);
        if (!response.ok && route.commitsRefusals) return finish(response, body);
        if (!response.ok) throw new Rollback(finish(response, body));
        await afterSecondFactorCall(trx, call, body, secondFactor, issuedSessionToken(response, config), clock());
        return finish(response, await afterOrganizationCall(trx, call, body));
      });
    } catch (error) {
      if (error instanceof Rollback) return error.response;
      throw error;
    }
  };

  /** Spends one attempt of the session user's wrong-password budget, given back when the call succeeds. */
  const withAccountBudget =
    (handler: (c: Context<AppEnv>) => Promise<Response>) =>
    async (c: Context<AppEnv>): Promise<Response> => {
      const email = c.get('session')?.user.email;
      if (!config.rateLimit.enabled || !email) return handler(c);
      return withAccountAttempt(
        { config: config.rateLimit, store, clock, logger: c.get('logger') },
        email,
        () => handler(c),
        (answer) => !answer.ok,
      );
    };

  for (const route of LIBRARY_ROUTES) {
    const target = route.organization ? organizationTarget(route, db) : undefined;
    const handler = route.spendsAccountBudget ? withAccountBudget(serve(route)) : serve(route);
    router.on(route.method, `${AUTH_PREFIX}${route.path}`, guard(route.access, target), handler);
  }
  return router;
}

function withOrganizationIn(route: LibraryRoute, organizationId: string, input: LibraryInput): LibraryInput {
  if (route.organization === 'query') {
    const { organizationSlug: _slug, ...query } = input.query;
    return { ...input, query: { ...query, organizationId } };
  }
  if (route.organization === 'body') {
    const { organizationSlug: _slug, ...body } = input.body ?? {};
    return { ...input, body: { ...body, organizationId } };
  }
  return input;
}
