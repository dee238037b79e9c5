import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Kysely } from 'kysely';
import type { Auth } from '../auth/auth.js';
import { runInTransaction } from '../db/ambient.js';
import type { Database } from '../db/database.js';
import { type LibraryInput, libraryInput, withOrganizationIn } from '../library/input.js';
import { authorizedOrganization, organizationTarget } from '../library/organization-gate.js';
import { forwardedRequest } from '../library/request.js';
import { finish, forwardToLibrary, issuedSessionToken, reply } from '../library/responses.js';
import { LIBRARY_ROUTES } from '../library/routes.js';
import type { LibraryCall, LibraryDeps, LibraryRoute } from '../library/row.js';
import { access, guard, loadSession } from '../middleware/guard.js';
import { withAccountAttempt } from '../middleware/rate-limit.js';
import type { RateLimitStore } from '../platform/rate-limit-store.js';
import { createRouter, defineRoute } from '../router.js';
import type { Config } from '../shared/config.js';
import type { AppEnv, Clock } from '../shared/types.js';

export const AUTH_PREFIX = '/api/auth';
/** What the composition hands the rate limiter and the auth library, read from the rows. */
export { LIBRARY_RATE_LIMITS, LIBRARY_SESSION_PATHS } from '../library/routes.js';

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
 * `/api/auth/*` is the library's, behind the same chain, and deny by
 * default: only the rows of LIBRARY_ROUTES are served, each behind the guard
 * with its declared access; anything else the library mounts answers 404.
 * Every row is served the same way: its input checked (and rewritten), then
 * its `before` hook, the library's call, its `after` hook (the three in one
 * transaction when the row has one), and the answer (the row's `reply`, or
 * the library's in the contract's shape). Calls reach the library without
 * its cookie cache, so it reads the session (and its active organization)
 * from the database as the service does, and organization calls name the
 * organization the guard authorized.
 */
export function authRoutes({ auth, config, db, store, clock }: Deps) {
  const router = createRouter();
  router.openapi(providersRoute, (c) =>
    c.json({ google: config.oauth.google !== null, github: config.oauth.github !== null }, 200),
  );
  const deps: LibraryDeps = { db, store, clock, config };

  /** The library's answer as the row shapes it, else in the contract's shape. */
  const answerWith = (route: LibraryRoute, call: LibraryCall, response: Response, body: unknown): Response => {
    const shaped = route.reply?.(call, body);
    return shaped === undefined ? finish(response, body) : reply(response, shaped);
  };

  const serve = (route: LibraryRoute) => async (c: Context<AppEnv>) => {
    // Public routes load no session in the guard; a call with a transaction records who acted.
    const session = route.transaction === 'none' ? c.get('session') : await loadSession(c);
    const target = authorizedOrganization(c);
    let input: LibraryInput = await libraryInput(c, route);
    if (target?.id && route.organization) input = withOrganizationIn(route, target.id, input);
    const call: LibraryCall = {
      session,
      target,
      organizationId: target?.id ?? null,
      body: input.body,
      query: input.query,
      notes: {},
    };
    if (route.answer) return c.json((await route.answer(call, deps)) as object);
    if (route.rewrite) {
      call.body = await route.rewrite(call, deps);
      input = { ...input, body: call.body };
    }
    const keepCookieCache = route.keepsCookieCache === true && session !== null;
    const request = await forwardedRequest(c, route, input, { keepCookieCache, config });

    if (route.transaction === 'none') {
      const { response, body } = await forwardToLibrary(auth, c, request);
      return answerWith(route, call, response, body);
    }
    const commitsRefusals = route.transaction === 'commit-refusals';
    try {
      return await runInTransaction(db, async (trx) => {
        await route.before?.(trx, call);
        const { response, body } = await forwardToLibrary(auth, c, request);
        if (!response.ok && commitsRefusals) return answerWith(route, call, response, body);
        if (!response.ok) throw new Rollback(answerWith(route, call, response, body));
        const outcome = { body, issuedToken: issuedSessionToken(response, config), now: clock() };
        const answered = route.after ? await route.after(trx, call, outcome) : body;
        return answerWith(route, call, response, answered);
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
    const handler = route.spendsAccountBudget === 'session-user' ? withAccountBudget(serve(route)) : serve(route);
    router.on(route.method, `${AUTH_PREFIX}${route.path}`, guard(route.access, target), handler);
  }
  return router;
}
