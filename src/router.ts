import { createRoute, OpenAPIHono, type RouteConfig, z as zo } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { z } from 'zod';
import { requireJson } from './middleware/body-limit.js';
import { type Access, guard } from './middleware/guard.js';
import { renderError } from './middleware/render-error.js';
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

/** The session variant of `Access`: what a protected route declares. */
type SessionAccess = Extract<Access, { kind: 'session' }>;

/** Which 403 codes the guard (and the CSRF check, on a state change) can answer a protected route with. */
function forbiddenCodes(declared: SessionAccess, method: string): string {
  const needsOrganization = Boolean(declared.organization || declared.permissions?.length);
  const forbidden = [
    declared.platformRoles ? 'the platform role does not match' : null,
    // A key reaches only permission-guarded tenant routes (401 elsewhere); of those, not these.
    (declared.sensitive || declared.apiKeys === false) && declared.permissions?.length && !declared.platformRoles
      ? 'an API key'
      : null,
    method !== 'get' ? "a cookie-bearing state change from an origin other than the app's" : null,
  ].filter(Boolean);
  const codes = [
    forbidden.length ? `FORBIDDEN (${forbidden.join('; ')})` : null,
    declared.allowScheduledForDeletion ? null : 'ACCOUNT_SCHEDULED_FOR_DELETION',
    needsOrganization ? 'NO_ACTIVE_ORGANIZATION' : null,
    needsOrganization
      ? 'MFA_REQUIRED (the organization requires multi-factor sessions; message `Multi-factor authentication required`)'
      : null,
    declared.permissions?.length ? 'INSUFFICIENT_PERMISSIONS' : null,
    declared.sensitive
      ? 'STEP_UP_REQUIRED (a sensitive action: the session has not proved every factor of its account within STEP_UP_MAX_AGE; message `Recent authentication required`; `POST /api/session/step-up` renews it)'
      : null,
  ].filter(Boolean);
  return `${codes.join(', ')} (and NOT_OWNER where the route says so)`;
}

/**
 * What a 400 means on a route. The JSON body check is global
 * (middleware/json-input.ts): any request sent with a JSON content type has
 * its body parsed, whether or not the route takes one.
 */
function validationDescription(validates: boolean): string {
  const body =
    'a body sent as JSON that is malformed, not UTF-8, nested deeper than 32 levels or holding a NUL character';
  return validates
    ? `VALIDATION_ERROR: ${body}; wrong types, unknown fields, a path id that is not a UUID v4, a bad query parameter (\`details\` name them)`
    : `VALIDATION_ERROR: ${body} (checked on every request, even one to a route that takes no body)`;
}

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
    400: errorResponse(validationDescription(validates)),
    ...(protectedRoute ? { 401: errorResponse('UNAUTHORIZED: no valid session') } : {}),
    ...(ownCredentials ? { 401: errorResponse('UNAUTHORIZED: missing or wrong credentials (see `security`)') } : {}),
    ...(protectedRoute
      ? { 403: errorResponse(forbiddenCodes(declared, config.method)) }
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
            'SLUG_CONFLICT, OWNERSHIP_CONSTRAINT, DEFAULT_ROLE, TARGET_NOT_ADMIN or QUOTA_EXCEEDED where the route can cause them',
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

/**
 * The session cookie under either name (routes/docs.ts): a deployment reads
 * the one its AUTH_URL implies, `__Secure-` prefixed when it is https.
 */
const sessionCookies = () => [{ sessionCookie: [] }, { secureSessionCookie: [] }];

/** The access rule as the OpenAPI document states it (`x-access`, and `security`). */
function describeAccess(declared: Access) {
  if (declared.kind === 'public') return { 'x-access': 'public', security: [] };
  if (declared.kind === 'optional') return { 'x-access': 'optional-auth', security: [{}, ...sessionCookies()] };
  const rule = {
    ...(declared.platformRoles ? { platformRoles: [...declared.platformRoles] } : {}),
    ...(declared.organization || declared.permissions?.length ? { activeOrganization: true } : {}),
    ...(declared.permissions?.length ? { permissions: [...declared.permissions] } : {}),
    ...(declared.allowScheduledForDeletion ? { allowedWhileScheduledForDeletion: true } : {}),
    ...(declared.sensitive ? { stepUp: true } : {}),
  };
  const keys =
    declared.permissions?.length && !declared.platformRoles && declared.apiKeys !== false && !declared.sensitive;
  return {
    'x-access': { session: true, ...rule },
    security: keys ? [...sessionCookies(), { apiKey: [] }] : sessionCookies(),
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
 * A route as the OpenAPI document states it: its access (`x-access`,
 * `security`), the contract's error responses, `X-Request-Id` on each, and a
 * JSON body that must be present. The service's routes (defineRoute) and the
 * auth library's (library/document.ts) are described by this one function.
 */
export function describedRoute<const R extends RouteConfig>(config: R & { access: Access }): R {
  const { access, ...route } = config;
  const body = route.request?.body;
  return {
    ...(describeAccess(access) as object),
    ...route,
    responses: withRequestId({ ...errorResponses(route as RouteConfig, access), ...route.responses }),
    ...(body ? { request: { ...route.request, body: { required: true, ...body } } } : {}),
  } as unknown as R;
}

/**
 * createRoute plus what every service route needs, in spec §4 order: the
 * route's declared access (checked by the guard before anything reads the
 * request), then for a JSON body the 415 check (API.md "Conventions") and a
 * body that must be present, then zod validation.
 */
export function defineRoute<const R extends RouteConfig>(config: R & { access: Access }): R {
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
