import { OpenAPIHono, createRoute, type RouteConfig } from '@hono/zod-openapi';
import { requireJson } from './middleware/body-limit.js';
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
 * createRoute, plus what every route with a JSON body needs: the 415 check
 * before validation (API.md "Conventions") and a body that must be present.
 */
export function defineRoute<const R extends RouteConfig>(config: R): R {
  const body = config.request?.body;
  if (!body) return createRoute(config);
  const middleware = config.middleware === undefined ? [] : Array.isArray(config.middleware) ? config.middleware : [config.middleware];
  return createRoute({
    ...config,
    request: { ...config.request, body: { required: true, ...body } },
    middleware: [jsonOnly, ...middleware],
  });
}
