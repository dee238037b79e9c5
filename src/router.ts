import { createRoute, OpenAPIHono, type RouteConfig } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { z } from 'zod';
import { requireJson } from './middleware/body-limit.js';
import { guard, type RouteAccess } from './middleware/guard.js';
import { renderError } from './middleware/render-error.js';
import { describedRoute } from './openapi.js';
import { ApiError, type ErrorDetail } from './shared/errors.js';
import type { AppEnv } from './shared/types.js';

/** zod issues as the contract's `details`: `[{ path: "scopes.0", message }]`. */
export function validationDetails(error: z.ZodError): ErrorDetail[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

/**
 * Every route file builds its router here, so one validation hook turns any
 * failed zod schema into 400 VALIDATION_ERROR (never zod-validator's plain
 * text default).
 */
export function createRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
          details: validationDetails(result.error),
        });
      }
    },
  });
}

const jsonOnly = requireJson();

/** How routes are stated in the OpenAPI document (src/openapi.ts), for the files that describe routes. */
export { describedRoute, ErrorSchema, errorResponse, REQUEST_ID_HEADER } from './openapi.js';

/**
 * createRoute plus what every service route needs, in the guard's order (docs/api.md "Access"): the
 * route's declared access (checked by the guard before anything reads the
 * request), then for a JSON body the 415 check (docs/api.md "Conventions") and a
 * body that must be present, then zod validation.
 */
export function defineRoute<const R extends RouteConfig>(config: R & { access: RouteAccess }): R {
  const own =
    config.middleware === undefined ? [] : Array.isArray(config.middleware) ? config.middleware : [config.middleware];
  return createRoute({
    ...describedRoute(config),
    middleware: [guard(config.access), ...(config.request?.body ? [jsonOnly] : []), ...own],
  } as unknown as R);
}

/** An OpenAPI JSON response: `{ description, content: { application/json: { schema } } }`. */
export const jsonContent = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

/** A hono route path (`/api/roles/:id`, `:id{regex}`) as a regular expression matching exactly the paths it serves. */
function pathPattern(path: string): RegExp {
  const parts = (path.match(/\/:\w+(?:\{[^}]*\})?|\/[^/]*/g) ?? []).map((part) => {
    const param = /^\/:\w+(?:\{(.*)\})?$/.exec(part);
    return param ? `/(?:${param[1] ?? '[^/]+'})` : part.replace(/[.\\+*?[^\]$(){}|]/g, '\\$&');
  });
  return new RegExp(`^${parts.join('')}$`);
}

/**
 * The app's not-found answer. A path the app serves, asked with a method it
 * does not serve there, answers 405 METHOD_NOT_ALLOWED with `Allow` naming
 * the methods it does (RFC 9110 §15.5.6; HEAD wherever GET is served, as hono
 * answers HEAD with the GET route), in the contract's error shape, for the
 * service's routes and the auth library's alike. Any other path: 404
 * NOT_FOUND.
 */
export function notFoundAnswer(app: { routes: readonly { method: string; path: string }[] }) {
  let table: { pattern: RegExp; methods: Set<string> }[] = [];
  let routeCount = -1;
  const build = () => {
    const byPath = new Map<string, Set<string>>();
    for (const { method, path } of app.routes) {
      // Middleware (`ALL`) and wildcards serve no method of their own.
      if (method === 'ALL' || path.includes('*')) continue;
      const methods = byPath.get(path) ?? new Set<string>();
      methods.add(method);
      if (method === 'GET') methods.add('HEAD');
      byPath.set(path, methods);
    }
    return [...byPath].map(([path, methods]) => ({ pattern: pathPattern(path), methods }));
  };
  return (c: Context<AppEnv>): Response => {
    // Built on first use, and again if routes were added since (tests add some).
    if (routeCount !== app.routes.length) {
      table = build();
      routeCount = app.routes.length;
    }
    const allowed = new Set<string>();
    for (const { pattern, methods } of table) if (pattern.test(c.req.path)) for (const m of methods) allowed.add(m);
    if (allowed.size > 0 && !allowed.has(c.req.method)) {
      return renderError(
        new ApiError('METHOD_NOT_ALLOWED', 'Method not allowed', {
          headers: { Allow: [...allowed].sort().join(', ') },
        }),
        c,
      );
    }
    return renderError(new ApiError('NOT_FOUND', 'Not found'), c);
  };
}
