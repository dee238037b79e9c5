import { type RouteConfig, z } from '@hono/zod-openapi';
import { describedRoute } from '../openapi.js';
import { LIBRARY_ROUTES } from './routes.js';
import type { LibraryRoute } from './row.js';

/**
 * The auth library's routes in `/api/openapi.json`, described from the rows
 * that serve them (src/library/routes.ts): method, path, access, and the zod
 * schemas that check their bodies and query strings. The access parts
 * (`x-access`, `security`) and the contract's error responses are added by
 * the same function that describes the service's own routes
 * (src/openapi.ts `describedRoute`), so the two doors read alike;
 * routes/docs.ts registers them.
 */

/** The prefix the library's routes are served under. */
export const LIBRARY_PREFIX = '/api/auth';

const timestamp = z.string().openapi({ format: 'date-time' });
const nullableText = z.union([z.string(), z.null()]);

const AuthUser = z
  .looseObject({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    image: nullableText.optional(),
    emailVerified: z.boolean(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .openapi('AuthUser');

const AuthSession = z
  .looseObject({
    id: z.string(),
    userId: z.string(),
    expiresAt: timestamp,
    createdAt: timestamp,
    updatedAt: timestamp,
    ipAddress: nullableText.optional(),
    userAgent: nullableText.optional(),
    activeOrganizationId: nullableText.optional(),
  })
  .openapi('AuthSession');

const AuthOrganization = z
  .looseObject({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    logo: nullableText.optional(),
    metadata: z.unknown().optional(),
    createdAt: timestamp,
  })
  .openapi('AuthOrganization');

const AuthMember = z
  .looseObject({ id: z.string(), organizationId: z.string(), userId: z.string(), role: z.string() })
  .openapi('AuthMember');

const AuthInvitation = z
  .looseObject({
    id: z.string(),
    organizationId: z.string(),
    email: z.string(),
    role: z.string(),
    status: z.string(),
    expiresAt: timestamp,
    /** In the invitations to the caller's own address (`list-user-invitations`). */
    organizationName: z.string().optional(),
  })
  .openapi('AuthInvitation');

/** Any other answer: a JSON object whose fields are the library's (tokens removed). */
const AuthAnswer = z.looseObject({}).openapi('AuthAnswer');

type Answer = { description: string; content?: Record<string, { schema: z.ZodType }> };
const json = (schema: z.ZodType, description: string): Answer => ({
  description,
  content: { 'application/json': { schema } },
});

/**
 * What a call answers on success, where the document can say more than "a
 * JSON object". Keyed by the row's path; a row not named here answers
 * `AuthAnswer`.
 */
const ANSWERS: Readonly<Record<string, Answer>> = {
  '/get-session': json(
    z.union([z.object({ session: AuthSession, user: AuthUser }), z.null()]),
    'The session and its user (no token), or null without a valid session',
  ),
  '/sign-up/email': json(z.looseObject({ user: AuthUser }), 'The new user (no token)'),
  '/sign-in/email': json(
    z.looseObject({ user: AuthUser.optional(), twoFactorRedirect: z.boolean().optional() }),
    'The signed-in user (the session is the cookie), or `twoFactorRedirect` when a second factor is due',
  ),
  '/list-sessions': json(
    z.array(AuthSession.extend({ current: z.boolean() })),
    "The user's sessions (no tokens); `current` marks the calling one",
  ),
  '/organization/create': json(AuthOrganization, 'The new organization'),
  '/organization/update': json(AuthOrganization, 'The organization as updated'),
  '/organization/get-organization': json(AuthOrganization, 'The organization'),
  '/organization/list': json(z.array(AuthOrganization), "The user's organizations"),
  '/organization/set-active': json(
    z.union([AuthOrganization, z.null()]),
    'The organization now active, or null when none is',
  ),
  '/organization/get-full-organization': json(
    z.union([
      AuthOrganization.extend({ members: z.array(AuthMember), invitations: z.array(AuthInvitation) }),
      z.null(),
    ]),
    'The organization with its members and invitations',
  ),
  '/organization/list-members': json(
    z.looseObject({ members: z.array(AuthMember), total: z.number() }),
    'A page of members, and how many there are',
  ),
  '/organization/get-active-member': json(AuthMember, "The caller's membership"),
  '/organization/get-active-member-role': json(
    z.object({ role: z.string(), roleId: z.string(), permissions: z.array(z.string()) }),
    "The member's role and permission strings, from the service's roles",
  ),
  '/organization/has-permission': json(
    z.object({ error: z.null(), success: z.boolean() }),
    "Whether the caller holds every permission named, from the service's roles",
  ),
  '/organization/invite-member': json(AuthInvitation, 'The invitation, with the role stored'),
  '/organization/list-invitations': json(z.array(AuthInvitation), "The organization's invitations"),
  '/organization/list-user-invitations': json(z.array(AuthInvitation), "The invitations to the caller's address"),
  '/organization/get-invitation': json(AuthInvitation, 'The invitation'),
  '/list-accounts': json(
    z.array(z.looseObject({ id: z.string(), providerId: z.string(), accountId: z.string() })),
    "The sign-in methods linked to the user's account (`credential` is the password)",
  ),
  '/passkey/list-user-passkeys': json(
    z.array(z.looseObject({ id: z.string(), name: nullableText.optional(), createdAt: timestamp })),
    "The user's passkeys",
  ),
  '/two-factor/enable': json(
    z.looseObject({ totpURI: z.string(), backupCodes: z.array(z.string()) }),
    'The authenticator URI and the backup codes (shown once); `verify-totp` completes enabling',
  ),
  '/two-factor/get-totp-uri': json(z.looseObject({ totpURI: z.string() }), 'The authenticator URI'),
  '/two-factor/generate-backup-codes': json(
    z.looseObject({ backupCodes: z.array(z.string()) }),
    'New backup codes (shown once); the old ones no longer work',
  ),
  '/sign-in/sso': json(
    z.object({ url: z.string() }),
    "The identity provider's sign-in URL: the browser goes there, and comes back to the callback",
  ),
  '/sign-out': json(z.looseObject({ success: z.boolean() }), 'Signed out (the cookies are expired)'),
  '/ok': json(z.looseObject({ ok: z.boolean() }), 'The library is up'),
  '/error': { description: "The library's error page", content: { 'text/html': { schema: z.string() } } },
};

/** Links a browser follows from a mail or a provider: they answer with a redirect. */
const REDIRECTS: ReadonlySet<string> = new Set([
  '/callback/:id',
  '/magic-link/verify',
  '/verify-email',
  '/reset-password/:token',
  '/sso/callback/:connectionId',
  '/sso/saml2/callback/:connectionId',
]);

const LIBRARY_REFUSAL =
  "the auth library's own refusal, in the same shape with the library's code (e.g. INVALID_EMAIL_OR_PASSWORD, EMAIL_NOT_VERIFIED, INVALID_TOKEN)";

/** One tag per area of the library. */
function tagOf(path: string): string {
  if (path.startsWith('/organization/')) return 'Auth: organizations';
  if (path.startsWith('/two-factor/')) return 'Auth: two-factor';
  if (path.startsWith('/passkey/')) return 'Auth: passkeys';
  if (path.startsWith('/sso/') || path === '/sign-in/sso') return 'Auth: single sign-on';
  return 'Auth: accounts and sessions';
}

/** hono's `/callback/:id` as OpenAPI's `/callback/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:(\w+)(\{[^}]*\})?/g, '{$1}');
}

type Responses = Record<string, { description: string; content?: unknown }>;

/** One row as the document states it. */
function libraryOperation(route: LibraryRoute): RouteConfig {
  const params = [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  // JSON, or a form another site's page posts (src/library/row.ts `foreignForm`).
  const bodySchema = route.body ?? route.foreignForm;
  const bodyType = route.foreignForm ? 'application/x-www-form-urlencoded' : 'application/json';
  const config = {
    method: route.method.toLowerCase() as 'get' | 'post',
    path: `${LIBRARY_PREFIX}${openApiPath(route.path)}`,
    access: route.access,
    summary: route.summary,
    tags: [tagOf(route.path)],
    request: {
      ...(params.length ? { params: z.object(Object.fromEntries(params.map((name) => [name, z.string()]))) } : {}),
      ...(route.query ? { query: route.query as z.ZodObject } : {}),
      ...(bodySchema ? { body: { content: { [bodyType]: { schema: bodySchema } } } } : {}),
    },
    responses: {
      200: ANSWERS[route.path] ?? json(AuthAnswer, "The auth library's answer: a JSON object (session tokens removed)"),
      ...(REDIRECTS.has(route.path)
        ? { 302: { description: 'Redirects to the callback URL the flow named; a refusal adds `?error=<code>`' } }
        : {}),
    },
  };
  // Described once to learn the errors its access implies, then again with
  // the library's own refusals added to them (same shape, the library's codes).
  const implied = describedRoute(config).responses as Responses;
  const errorContent = implied[500]!.content;
  const refusal = (status: number, first: string) => ({
    description: `${implied[status]?.description ?? first}; or ${LIBRARY_REFUSAL}`,
    content: errorContent,
  });
  const validated =
    bodySchema || route.query
      ? "; a body or query the route's schema refuses (`details` name the fields, e.g. `body.email`)"
      : '';
  return describedRoute({
    ...config,
    responses: {
      ...config.responses,
      400: {
        description: `VALIDATION_ERROR: a body sent as JSON that is malformed, not UTF-8, nested deeper than 32 levels or holding a NUL character${validated}; or ${LIBRARY_REFUSAL}`,
        content: errorContent,
      },
      401: refusal(401, 'UNAUTHORIZED'),
      403: refusal(403, 'FORBIDDEN'),
      404: {
        description: `NOT_FOUND: what the call names does not exist; or ${LIBRARY_REFUSAL}`,
        content: errorContent,
      },
    } as RouteConfig['responses'],
  });
}

/** Every served row of the library, as the document states it (routes/docs.ts registers them). */
export function libraryOperations(routes: readonly LibraryRoute[] = LIBRARY_ROUTES): RouteConfig[] {
  return routes.map(libraryOperation);
}
