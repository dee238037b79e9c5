import { createRoute, OpenAPIHono, type RouteConfig, z as zo } from '@hono/zod-openapi';
import type { z } from 'zod';
import { ApiError, type ErrorDetail } from './errors.js';
import { requireJson } from './middleware/body-limit.js';
import { type Access, guard } from './middleware/guard.js';
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
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
          details: validationDetails(result.error),
        });
      }
    },
  });
}

const jsonOnly = requireJson();

/** API.md "Errors": the one error shape, as an OpenAPI component. */
export const ErrorSchema = zo
  .object({
    code: zo.string().openapi({ example: 'INSUFFICIENT_PERMISSIONS' }),
    message: zo.string().openapi({ example: 'Insufficient permissions' }),
    details: zo.array(zo.object({ path: zo.string(), message: zo.string() })).optional(),
  })
  .openapi('Error');

type HeaderObject = { description: string; schema: { type: 'string'; pattern?: string } };

/**
 * `X-Request-Id` (middleware/request-context.ts), sent with every response:
 * registered once as `components.headers.XRequestId` (routes/docs.ts) and
 * referenced from every response object.
 */
export const REQUEST_ID_HEADER = {
  name: 'XRequestId',
  header: {
    description:
      "The request's id, also in the service's log lines: the client's own `X-Request-Id` when well-formed (word characters, `-` and `=`, at most 128), a fresh UUID otherwise",
    schema: { type: 'string', pattern: '^[\\w=-]{1,128}$' },
  } satisfies HeaderObject,
};
const requestIdRef = { 'X-Request-Id': { $ref: `#/components/headers/${REQUEST_ID_HEADER.name}` } };

const errorResponse = (description: string, headers?: Record<string, HeaderObject>) => ({
  description,
  content: { 'application/json': { schema: ErrorSchema } },
  ...(headers ? { headers } : {}),
});

const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': { description: 'Requests allowed in the window', schema: { type: 'string' as const } },
  'X-RateLimit-Remaining': { description: 'Requests left in the window (0)', schema: { type: 'string' as const } },
  'X-RateLimit-Reset': {
    description: 'Unix seconds when the window or block ends',
    schema: { type: 'string' as const },
  },
  'Retry-After': { description: 'Seconds to wait', schema: { type: 'string' as const } },
};

/** The contract's error responses that can answer a route, from what it declares. */
function errorResponses(config: RouteConfig, declared: Access) {
  const hasBody = Boolean(config.request?.body);
  const hasParams = Boolean(config.request?.params);
  const validates = hasBody || hasParams || Boolean(config.request?.query);
  const protectedRoute = declared.kind === 'session';
  // A route the guard lets through but that checks its own credentials (its
  // `security` names a scheme and offers no anonymous `{}` alternative, as the
  // cron route's CRON_SECRET) answers 401 too (API.md cron row).
  const ownCredentials =
    !protectedRoute &&
    Boolean(config.security?.length) &&
    config.security!.every((requirement) => Object.keys(requirement).length > 0);
  return {
    ...(validates
      ? { 400: errorResponse('VALIDATION_ERROR: malformed JSON, wrong types, unknown fields, bad ids or query') }
      : {}),
    ...(protectedRoute ? { 401: errorResponse('UNAUTHORIZED: no valid session') } : {}),
    ...(ownCredentials ? { 401: errorResponse('UNAUTHORIZED: missing or wrong credentials (see `security`)') } : {}),
    ...(protectedRoute
      ? {
          403: errorResponse(
            'FORBIDDEN, NO_ACTIVE_ORGANIZATION, INSUFFICIENT_PERMISSIONS, ACCOUNT_SCHEDULED_FOR_DELETION (and NOT_OWNER where stated)',
          ),
        }
      : config.method !== 'get'
        ? // The CSRF check is global (middleware/csrf.ts): it does not ask whether the route needs the cookie.
          {
            403: errorResponse(
              "FORBIDDEN: a state change carrying a Cookie header from an origin other than the app's",
            ),
          }
        : {}),
    ...(hasParams ? { 404: errorResponse('NOT_FOUND: unknown id, or one of another organization') } : {}),
    ...(protectedRoute && config.method !== 'get'
      ? {
          409: errorResponse(
            'SLUG_CONFLICT, OWNERSHIP_CONSTRAINT, DEFAULT_ROLE or TARGET_NOT_ADMIN where the route can cause them',
          ),
        }
      : {}),
    // The body limit is global (app.ts): any request may send a body, even a GET.
    413: errorResponse('PAYLOAD_TOO_LARGE: body over 1,048,576 bytes'),
    ...(hasBody ? { 415: errorResponse('UNSUPPORTED_MEDIA_TYPE: body is not JSON') } : {}),
    429: errorResponse('RATE_LIMITED', RATE_LIMIT_HEADERS),
    500: errorResponse('INTERNAL_ERROR (the response carries X-Request-Id)'),
    503: errorResponse('SERVICE_UNAVAILABLE: database or rate-limit store unreachable'),
  };
}

/** The access rule as the OpenAPI document states it (`x-access`, and `security`). */
function describeAccess(declared: Access) {
  if (declared.kind === 'public') return { 'x-access': 'public', security: [] };
  if (declared.kind === 'optional') return { 'x-access': 'optional-auth', security: [{}, { sessionCookie: [] }] };
  const rule = {
    ...(declared.platformRoles ? { platformRoles: [...declared.platformRoles] } : {}),
    ...(declared.organization || declared.permissions?.length ? { activeOrganization: true } : {}),
    ...(declared.permissions?.length ? { permissions: [...declared.permissions] } : {}),
    ...(declared.allowScheduledForDeletion ? { allowedWhileScheduledForDeletion: true } : {}),
  };
  const keys = declared.permissions?.length && !declared.platformRoles && declared.apiKeys !== false;
  return {
    'x-access': { session: true, ...rule },
    security: keys ? [{ sessionCookie: [] }, { apiKey: [] }] : [{ sessionCookie: [] }],
  };
}

/** Every response object also declares `X-Request-Id` (after its own headers). */
function withRequestId(responses: RouteConfig['responses']): RouteConfig['responses'] {
  return Object.fromEntries(
    Object.entries(responses).map(([status, response]) => {
      const own = (response as { headers?: object }).headers;
      if (own !== undefined && typeof (own as { safeParse?: unknown }).safeParse === 'function') {
        throw new Error(`response ${status}: give headers as an OpenAPI headers object, not a zod schema`);
      }
      return [status, { ...response, headers: { ...own, ...requestIdRef } }];
    }),
  );
}

/**
 * createRoute plus what every service route needs, in spec §4 order: the
 * route's declared access (checked by the guard before anything reads the
 * request), then for a JSON body the 415 check (API.md "Conventions") and a
 * body that must be present, then zod validation.
 */
export function defineRoute<const R extends RouteConfig>(config: R & { access: Access }): R {
  const { access, ...route } = config;
  const own =
    route.middleware === undefined ? [] : Array.isArray(route.middleware) ? route.middleware : [route.middleware];
  const body = route.request?.body;
  return createRoute({
    ...(describeAccess(access) as object),
    ...route,
    responses: withRequestId({ ...errorResponses(route as RouteConfig, access), ...route.responses }),
    ...(body ? { request: { ...route.request, body: { required: true, ...body } } } : {}),
    middleware: [guard(access), ...(body ? [jsonOnly] : []), ...own],
  } as unknown as R);
}

/** An OpenAPI JSON response: `{ description, content: { application/json: { schema } } }`. */
export const jsonContent = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});
