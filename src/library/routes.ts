import { z } from 'zod';
import { type Access, access } from '../auth/access.js';

/**
 * The auth library's routes the service serves (issue 14 item 1): deny by
 * default, as for the service's own routes. Each entry declares its access
 * the way `defineRoute` does, and is checked by the same guard with the same
 * resolved session. Whatever the library mounts that is not here answers 404.
 *
 * `organization` names where the organization the call acts on travels: the
 * gate resolves it (the request's `organizationId` or `organizationSlug`,
 * else the session's active organization as the service resolved it), checks
 * the permission list *in that organization*, and writes it into the
 * forwarded request, so the library never falls back on a stale cookie
 * cache's idea of the active organization.
 *
 * `body` / `query` bound what the library takes (item 8). Bodies are JSON.
 */
export interface LibraryRoute {
  method: 'GET' | 'POST';
  /** Under /api/auth; `:name` matches one path segment. */
  path: string;
  access: Access;
  organization?: 'body' | 'query' | 'invitation';
  body?: z.ZodType;
  query?: z.ZodType;
  /** Runs in one transaction with the gate's follow-up writes (role seeding, role ids, owner locks). */
  transactional?: boolean;
  /** Answered by the service from its own roles, never by the library's role names (item 3). */
  answeredByService?: true;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** One line of human text: no control characters (CR/LF included). */
export const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((value) => !CONTROL.test(value), 'must not contain control characters')
    .refine((value) => value.trim() !== '', 'must not be blank');

const line = (max: number) =>
  z
    .string()
    .max(max)
    .refine((value) => !CONTROL.test(value), 'must not contain control characters');
const httpUrl = z
  .string()
  .max(2048)
  .refine((value) => /^https?:\/\/[^\s]+$/i.test(value) && URL.canParse(value), 'must be an http(s) URL');
/** Where the library redirects after a flow: a path, or a URL it checks against the trusted origins. */
const callback = line(2048).optional();
const email = line(254);
/** Where an email names someone to act on (an invitee, a member), it must be one. */
const address = z.email().max(254);
const uuid = z.uuid({ version: 'v4' });
const slug = z
  .string()
  .max(64)
  .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, 'lower-case letters, digits and single hyphens');
const metadata = z
  .record(z.string().max(64), z.unknown())
  .refine((value) => JSON.stringify(value).length <= 4096, 'must be at most 4096 bytes of JSON');
const orgName = text(100);
const userName = text(100);
const image = z.union([httpUrl, z.null()]);
const providerId = z.string().regex(/^[a-z0-9-]{1,32}$/);
const pageNumber = (max: number) =>
  z
    .union([
      z.number(),
      z
        .string()
        .regex(/^\d{1,9}$/, 'must be a whole number')
        .transform(Number),
    ])
    .pipe(z.number().int().min(0).max(max));

const organizationRef = { organizationId: uuid.optional(), organizationSlug: slug.optional() };

const MEMBER_FIELDS = ['createdAt', 'role', 'userId', 'id'] as const;

const listMembersQuery = z
  .object({
    ...organizationRef,
    limit: pageNumber(100).optional(),
    offset: pageNumber(100_000).optional(),
    sortBy: z.enum(MEMBER_FIELDS).optional(),
    sortDirection: z.enum(['asc', 'desc']).optional(),
    filterField: z.enum(MEMBER_FIELDS).optional(),
    filterOperator: z.enum(['eq', 'ne']).optional(),
    filterValue: line(256).optional(),
  })
  .strict();

const session = access.session;
/** A permission list checked in the organization the call acts on (not necessarily the active one). */
const inOrganization = access.permissions;

export const LIBRARY_ROUTES: readonly LibraryRoute[] = [
  // Sign-up, sign-in and the flows that start without a session (spec §5 Flows).
  {
    method: 'POST',
    path: '/sign-up/email',
    access: access.public(),
    body: z
      .object({
        email,
        password: line(1024),
        name: userName,
        image: image.optional(),
        callbackURL: callback,
        rememberMe: z.boolean().optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/sign-in/email',
    access: access.public(),
    body: z.looseObject({ email, password: line(1024), callbackURL: callback, rememberMe: z.boolean().optional() }),
  },
  {
    method: 'POST',
    path: '/sign-in/social',
    access: access.public(),
    body: z.looseObject({
      provider: providerId,
      callbackURL: callback,
      errorCallbackURL: callback,
      newUserCallbackURL: callback,
      disableRedirect: z.boolean().optional(),
    }),
  },
  { method: 'GET', path: '/callback/:id', access: access.public() },
  { method: 'POST', path: '/callback/:id', access: access.public() },
  {
    method: 'POST',
    path: '/sign-in/magic-link',
    access: access.public(),
    body: z.looseObject({
      email,
      name: userName.optional(),
      callbackURL: callback,
      newUserCallbackURL: callback,
      errorCallbackURL: callback,
    }),
  },
  { method: 'GET', path: '/magic-link/verify', access: access.public() },
  { method: 'GET', path: '/verify-email', access: access.public() },
  {
    method: 'POST',
    path: '/send-verification-email',
    access: access.public(),
    body: z.looseObject({ email, callbackURL: callback }),
  },
  {
    method: 'POST',
    path: '/request-password-reset',
    access: access.public(),
    body: z.looseObject({ email, redirectTo: callback }),
  },
  {
    method: 'POST',
    path: '/reset-password',
    access: access.public(),
    body: z.looseObject({ newPassword: line(1024), token: line(512).optional() }),
  },
  { method: 'GET', path: '/reset-password/:token', access: access.public() },
  { method: 'GET', path: '/error', access: access.public() },
  { method: 'GET', path: '/ok', access: access.public() },
  // Ending a session needs none that is still valid; reading one answers null without.
  { method: 'POST', path: '/sign-out', access: access.optional() },
  { method: 'GET', path: '/get-session', access: access.optional() },

  // The signed-in user's own account and sessions.
  { method: 'GET', path: '/list-sessions', access: session() },
  { method: 'POST', path: '/revoke-session', access: session(), body: z.object({ id: uuid }).strict() },
  { method: 'POST', path: '/revoke-sessions', access: session() },
  { method: 'POST', path: '/revoke-other-sessions', access: session() },
  {
    method: 'POST',
    path: '/update-user',
    access: session(),
    body: z.object({ name: userName.optional(), image: image.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/change-password',
    access: session(),
    body: z
      .object({ currentPassword: line(1024), newPassword: line(1024), revokeOtherSessions: z.boolean().optional() })
      .strict(),
  },
  { method: 'POST', path: '/verify-password', access: session(), body: z.object({ password: line(1024) }).strict() },
  { method: 'GET', path: '/list-accounts', access: session() },
  {
    method: 'POST',
    path: '/link-social',
    access: session(),
    body: z.looseObject({ provider: providerId, callbackURL: callback, errorCallbackURL: callback }),
  },
  {
    method: 'POST',
    path: '/unlink-account',
    access: session(),
    body: z.object({ providerId, accountId: line(255).optional() }).strict(),
  },

  // Organizations (API.md "Organizations"): permission strings, in the organization acted on.
  {
    method: 'POST',
    path: '/organization/create',
    access: session(),
    transactional: true,
    body: z
      .object({
        name: orgName,
        slug,
        logo: z.union([httpUrl, z.null()]).optional(),
        metadata: metadata.optional(),
        keepCurrentActiveOrganization: z.boolean().optional(),
      })
      .strict(),
  },
  { method: 'POST', path: '/organization/check-slug', access: session(), body: z.object({ slug }).strict() },
  { method: 'GET', path: '/organization/list', access: session() },
  {
    method: 'POST',
    path: '/organization/set-active',
    access: session(),
    transactional: true,
    body: z
      .object({ organizationId: z.union([uuid, z.null()]).optional(), organizationSlug: slug.optional() })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/update',
    access: inOrganization('organizations:write'),
    organization: 'body',
    body: z
      .object({
        organizationId: uuid.optional(),
        data: z
          .object({
            name: orgName.optional(),
            slug: slug.optional(),
            logo: z.union([httpUrl, z.null()]).optional(),
            metadata: metadata.optional(),
          })
          .strict(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/delete',
    access: inOrganization('organizations:delete'),
    organization: 'body',
    transactional: true,
    body: z.object({ organizationId: uuid.optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-organization',
    access: inOrganization('organizations:read'),
    organization: 'query',
    query: z.object(organizationRef).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-full-organization',
    access: inOrganization('members:read'),
    organization: 'query',
    transactional: true,
    query: z.object({ ...organizationRef, membersLimit: pageNumber(100).optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-members',
    access: inOrganization('members:read'),
    organization: 'query',
    query: listMembersQuery,
  },
  { method: 'GET', path: '/organization/get-active-member', access: session({ organization: true }) },
  {
    method: 'GET',
    path: '/organization/get-active-member-role',
    access: session({ organization: true }),
    organization: 'query',
    answeredByService: true,
    query: z.object({ ...organizationRef, userId: uuid.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/has-permission',
    access: session({ organization: true }),
    organization: 'body',
    answeredByService: true,
    body: z
      .object({
        organizationId: uuid.optional(),
        permissions: z.record(z.string().max(64), z.array(z.string().max(64)).max(16)).optional(),
        permission: z.record(z.string().max(64), z.array(z.string().max(64)).max(16)).optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/invite-member',
    access: inOrganization('invitations:write'),
    organization: 'body',
    transactional: true,
    body: z
      .object({
        email: address,
        role: slug.optional(),
        organizationId: uuid.optional(),
        resend: z.boolean().optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/cancel-invitation',
    access: inOrganization('invitations:delete'),
    organization: 'invitation',
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-invitations',
    access: inOrganization('invitations:read'),
    organization: 'query',
    query: z.object(organizationRef).strict(),
  },
  {
    method: 'POST',
    path: '/organization/accept-invitation',
    access: session(),
    transactional: true,
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/reject-invitation',
    access: session(),
    body: z.object({ invitationId: uuid }).strict(),
  },
  { method: 'GET', path: '/organization/get-invitation', access: session(), query: z.object({ id: uuid }).strict() },
  { method: 'GET', path: '/organization/list-user-invitations', access: session(), query: z.object({}).strict() },
  {
    method: 'POST',
    path: '/organization/remove-member',
    access: inOrganization('members:delete'),
    organization: 'body',
    transactional: true,
    body: z.object({ memberIdOrEmail: z.union([uuid, address]), organizationId: uuid.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/leave',
    access: session({ organization: true }),
    organization: 'body',
    transactional: true,
    body: z.object({ organizationId: uuid.optional() }).strict(),
  },
];

/** `/api/auth/...` of each state-changing organization call, with the permission it needs (the authorization suite walks these). */
export const ORGANIZATION_PERMISSIONS: Readonly<Record<string, string>> = Object.fromEntries(
  LIBRARY_ROUTES.flatMap((route) =>
    route.method === 'POST' && route.access.kind === 'session' && route.access.permissions?.length
      ? [[`/api/auth${route.path}`, route.access.permissions[0]!]]
      : [],
  ),
);
