import { OpenAPIHono, createRoute, type RouteConfig } from '@hono/zod-openapi';
import { requireJson } from './middleware/body-limit.js';
import { guard, type Access } from './middleware/guard.js';
import type { z } from 'zod';
import { ApiError, type ErrorDetail } from './errors.js';
import type { AppEnv } from './types.js';

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
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: validationDetails(result.error) });
      }
    },
  });
}

const jsonOnly = requireJson();

/**
 * createRoute plus what every service route needs, in spec §4 order: the
 * route's declared access (checked by the guard before anything reads the
 * request), then for a JSON body the 415 check (API.md "Conventions") and a
 * body that must be present, then zod validation.
 */
export function defineRoute<const R extends RouteConfig>(config: R & { access: Access }): R {
  const { access, ...route } = config;
  const own = route.middleware === undefined ? [] : Array.isArray(route.middleware) ? route.middleware : [route.middleware];
  const body = route.request?.body;
  return createRoute({
    ...route,
    ...(body ? { request: { ...route.request, body: { required: true, ...body } } } : {}),
    middleware: [guard(access), ...(body ? [jsonOnly] : []), ...own],
  } as unknown as R);
}
