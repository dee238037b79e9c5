import { type RouteConfig, z } from '@hono/zod-openapi';
import type { Access } from './auth/access.js';
import { ERROR_CODES, ERRORS, type ErrorCode } from './shared/errors.js';

/**
 * How a route is stated in `/api/openapi.json`: its access (`x-access`,
 * `security`), the error responses its access and input imply, each
 * described from the error table (src/shared/errors.ts), and `X-Request-Id`
 * on every response. Both doors (the service's routes and the auth
 * library's) are described by `describedRoute`.
 */

/** The service's error codes as an enum, each with its status and meaning, generated from the error table. */
export const ErrorCodeSchema = z.enum(ERROR_CODES).openapi('ErrorCode', {
  description: [
    "The service's error codes; each has exactly one status:",
    '',
    ...ERROR_CODES.map((code) => `- \`${code}\` (${ERRORS[code].status}): ${ERRORS[code].description}`),
  ].join('\n'),
});

/** docs/api.md "Errors": the one error shape, as an OpenAPI component. */
export const ErrorSchema = z
  .object({
    code: z.union([ErrorCodeSchema, z.string()]).openapi({
      description:
        "One of the service's codes (`ErrorCode`); under `/api/auth` also the auth library's own codes, in the same shape",
      example: 'INSUFFICIENT_PERMISSIONS',
    }),
    message: z.string().openapi({ example: 'Insufficient permissions' }),
    details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
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

type Status = (typeof ERRORS)[ErrorCode]['status'];
/** The codes whose status is S. */
type CodeOf<S extends Status> = { [C in ErrorCode]: (typeof ERRORS)[C]['status'] extends S ? C : never }[ErrorCode];
/** A code that can answer, described by the table, or by what it means on this route. */
export type Reason<S extends Status> = CodeOf<S> | readonly [CodeOf<S>, string];

/**
 * An error response of status S in the contract's shape, described as
 * `CODE: meaning; ...` for the codes that can answer it (checked at compile
 * time to have that status).
 */
export function errorResponse<S extends Status>(
  _status: S,
  reasons: readonly Reason<S>[],
  { headers, note }: { headers?: Record<string, HeaderObject>; note?: string } = {},
) {
  const lines = reasons.map((reason) =>
    typeof reason === 'string' ? `${reason}: ${ERRORS[reason].description}` : `${reason[0]}: ${reason[1]}`,
  );
  return {
    description: `${lines.join('; ')}${note ? ` ${note}` : ''}`,
    content: { 'application/json': { schema: ErrorSchema } },
    ...(headers ? { headers } : {}),
  };
}

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
function forbiddenReasons(declared: SessionAccess, method: string): Reason<403>[] {
  const needsOrganization = Boolean(declared.organization || declared.permissions?.length);
  const forbidden = [
    declared.platformRoles ? 'the platform role does not match' : null,
    // A key reaches only permission-guarded tenant routes (401 elsewhere); of those, not these.
    (declared.sensitive || declared.apiKeys === false) && declared.permissions?.length && !declared.platformRoles
      ? 'an API key'
      : null,
    method !== 'get' ? "a cookie-bearing state change from an origin other than the app's" : null,
  ].filter(Boolean);
  const reasons: (Reason<403> | null)[] = [
    forbidden.length ? ['FORBIDDEN', forbidden.join('; ')] : null,
    declared.allowScheduledForDeletion ? null : 'ACCOUNT_SCHEDULED_FOR_DELETION',
    needsOrganization ? 'NO_ACTIVE_ORGANIZATION' : null,
    needsOrganization ? 'MFA_REQUIRED' : null,
    declared.permissions?.length ? 'INSUFFICIENT_PERMISSIONS' : null,
    declared.sensitive ? 'STEP_UP_REQUIRED' : null,
  ];
  return reasons.filter((reason) => reason !== null);
}

/**
 * What a 400 means on a route. The JSON body check is global
 * (middleware/json-input.ts): any request sent with a JSON content type has
 * its body parsed, whether or not the route takes one.
 */
function validationReason(validates: boolean): Reason<400> {
  const body =
    'a body sent as JSON that is malformed, not UTF-8, nested deeper than 32 levels or holding a NUL character';
  return [
    'VALIDATION_ERROR',
    validates
      ? `${body}; wrong types, unknown fields, a path id that is not a UUID v4, a bad query parameter (\`details\` name them)`
      : `${body} (checked on every request, even one to a route that takes no body)`,
  ];
}

/** The 409 codes, for a protected route that changes something: the table's, as the route can cause them. */
const CONFLICTS = ERROR_CODES.filter((code): code is CodeOf<409> => ERRORS[code].status === 409);

/** The contract's error responses that can answer a route, from what it declares. */
function errorResponses(config: RouteConfig, declared: Access) {
  const hasBody = Boolean(config.request?.body);
  const hasParams = Boolean(config.request?.params);
  const validates = hasBody || hasParams || Boolean(config.request?.query);
  const protectedRoute = declared.kind === 'session';
  // A route the guard lets through but that checks its own credentials (its
  // `security` names a scheme and offers no anonymous `{}` alternative, as the
  // cron route's CRON_SECRET) answers 401 too.
  const ownCredentials =
    !protectedRoute &&
    Boolean(config.security?.length) &&
    config.security!.every((requirement) => Object.keys(requirement).length > 0);
  const crossSite = "a state change carrying a Cookie header from an origin other than the app's";
  return {
    400: errorResponse(400, [validationReason(validates)]),
    ...(protectedRoute ? { 401: errorResponse(401, [['UNAUTHORIZED', 'no valid session']]) } : {}),
    ...(ownCredentials
      ? { 401: errorResponse(401, [['UNAUTHORIZED', 'missing or wrong credentials (see `security`)']]) }
      : {}),
    ...(protectedRoute
      ? {
          403: errorResponse(403, forbiddenReasons(declared, config.method), {
            note: '(and NOT_OWNER where the route says so)',
          }),
        }
      : config.method !== 'get'
        ? // The CSRF check is global (middleware/csrf.ts): it does not ask whether the route needs the cookie.
          { 403: errorResponse(403, [['FORBIDDEN', crossSite]]) }
        : {}),
    ...(hasParams ? { 404: errorResponse(404, ['NOT_FOUND']) } : {}),
    ...(protectedRoute && config.method !== 'get'
      ? { 409: errorResponse(409, CONFLICTS, { note: '(where the route can cause them)' }) }
      : {}),
    // The body limit is global (app.ts): any request may send a body, even a GET.
    413: errorResponse(413, ['PAYLOAD_TOO_LARGE']),
    ...(hasBody ? { 415: errorResponse(415, ['UNSUPPORTED_MEDIA_TYPE']) } : {}),
    429: errorResponse(429, ['RATE_LIMITED'], { headers: RATE_LIMIT_HEADERS }),
    500: errorResponse(500, ['INTERNAL_ERROR']),
    503: errorResponse(503, ['SERVICE_UNAVAILABLE']),
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
