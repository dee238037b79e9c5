import type { Context, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { type Access, bypassesPermissions, type OrganizationTarget, type ScimAccess } from '../auth/access.js';
import { ApiError } from '../shared/errors.js';
import { hasAll } from '../shared/permissions.js';
import type { AppEnv, EnrichedSession } from '../shared/types.js';

export { type Access, access, type OrganizationTarget, type RouteAccess, type ScimAccess } from '../auth/access.js';
/** The organization a call acts on, when the request names it (src/library/organization-gate.ts). */
export type TargetResolver = (c: Context<AppEnv>, session: EnrichedSession) => Promise<OrganizationTarget>;

/** The session, loaded at most once per request (the session middleware installs the loader). */
export async function loadSession(c: Context<AppEnv>): Promise<EnrichedSession | null> {
  return c.get('loadSession')();
}

/** The session of a route whose access requires one: the guard has already refused requests without. */
export function sessionOf(c: Context<AppEnv>): EnrichedSession {
  const session = c.get('session');
  if (!session) throw new ApiError('UNAUTHORIZED', 'Authentication required');
  return session;
}

/**
 * The rule of a sensitive action (docs/security.md "Sensitive actions and
 * step-up"): no API key performs one (403 FORBIDDEN), and the session must
 * have proved every factor of its account recently (403 STEP_UP_REQUIRED).
 * The guard applies it to routes declared `sensitive`; a route whose
 * sensitivity depends on what it is asked (a role change that makes or
 * unmakes an Owner) calls it itself.
 */
export function assertSensitiveAllowed(session: EnrichedSession): void {
  if (session.apiKey) throw new ApiError('FORBIDDEN', 'API keys cannot perform this action');
  if (!session.stepUpFresh) throw new ApiError('STEP_UP_REQUIRED', 'Recent authentication required');
}

/**
 * The organization a tenant route acts in: the one the guard checked the
 * caller's permissions in (the session's active organization, or the API
 * key's). Only routes whose access needs an organization have one; calling it
 * from another route is a programming error (500).
 */
export function tenantOf(c: Context<AppEnv>): string {
  const tenantId = c.get('tenantId');
  if (!tenantId) throw new Error('tenantOf: this route declares no organization');
  return tenantId;
}

const guards = new WeakMap<object, Access>();

/** 403 ACCOUNT_SCHEDULED_FOR_DELETION, saying when the purge is due. */
export function scheduledForDeletion(session: EnrichedSession): ApiError {
  return new ApiError(
    'ACCOUNT_SCHEDULED_FOR_DELETION',
    `This account is scheduled for deletion; it will be purged after ${session.purgeAfter}. Reactivate it to continue.`,
    {
      details: [{ path: 'purgeAfter', message: session.purgeAfter ?? '' }],
    },
  );
}

/**
 * docs/api.md "Access": the global guard's seven steps, in order, for one route's declared
 * access. With `target`, steps 6 and 7 (and the organization's policies
 * between them) are checked in the organization it names instead of the
 * active one.
 */
export function guard(declared: Access | ScimAccess, target?: TargetResolver): MiddlewareHandler<AppEnv> {
  if (declared.kind === 'scim') return scimGuard;
  const middleware: MiddlewareHandler<AppEnv> = async function guard(c, next) {
    await check(c, declared, target);
    return next();
  };
  guards.set(middleware, declared);
  return middleware;
}

/** `access.scim()`: only what SCIM's door let in (a token in force, src/middleware/scim.ts) acts, in its organization. */
const scimGuard: MiddlewareHandler<AppEnv> = function scimGuard(c, next) {
  const scim = c.get('scim');
  if (!scim) throw new ApiError('UNAUTHORIZED', 'A SCIM bearer token is required');
  c.set('tenantId', scim.tenantId);
  return next();
};

/** The access a route declared, for the route-walk test and the OpenAPI document. */
export function declaredAccess(handler: object): Access | undefined {
  return guards.get(handler);
}

async function check(c: Context<AppEnv>, declared: Access, target?: TargetResolver): Promise<void> {
  // 1. Public: no session needed.
  if (declared.kind === 'public') return;
  // 2. Fetch the session (once per request).
  const session = await loadSession(c);
  // 3. Optional-auth: allowed either way, the session (if any) is attached.
  if (declared.kind === 'optional') return;
  // 4. No session: 401.
  if (!session) throw new ApiError('UNAUTHORIZED', 'Authentication required');
  // An API key authenticates permission-guarded tenant routes only (README API_KEY_AUTH).
  if (session.apiKey && (!declared.permissions?.length || declared.platformRoles)) {
    throw new ApiError('UNAUTHORIZED', 'API keys are not accepted on this route');
  }
  // docs/api.md "Accounts scheduled for deletion": an account scheduled for deletion reaches only the allowlist.
  if (session.deletedAt && !declared.allowScheduledForDeletion) throw scheduledForDeletion(session);
  // 5. Platform roles.
  if (declared.platformRoles && !declared.platformRoles.includes(session.user.role)) {
    throw new ApiError('FORBIDDEN', 'Forbidden');
  }
  const organization = target
    ? await target(c, session)
    : {
        id: session.session.activeOrganizationId,
        permissions: session.permissions,
        requireMfa: session.requireMfa,
        ssoRequired: session.ssoRequired,
        isOwner: session.isOwner,
      };
  // 6. Active organization (also implied by a permission list).
  const needsOrganization = declared.organization || (declared.permissions?.length ?? 0) > 0;
  if (needsOrganization && !organization.id) {
    throw new ApiError('NO_ACTIVE_ORGANIZATION', 'No active organization');
  }
  // The organization's policy (README "Multi-factor authentication"): a session that is not multi-factor
  // stops here, superadmins too; an API key is not a session.
  if (needsOrganization && organization.requireMfa && !session.apiKey && !session.session.mfa) {
    throw new ApiError('MFA_REQUIRED', 'Multi-factor authentication required');
  }
  // docs/sso.md "Policy": a member at one of its verified domains works there only through its single
  // sign-on; an Owner passes (break-glass, audited once per session). Keys are not sessions.
  if (needsOrganization && organization.id && organization.ssoRequired && !session.apiKey) {
    if (!organization.isOwner) throw new ApiError('SSO_REQUIRED', 'Single sign-on required');
    await session.recordSsoBypass(organization.id);
  }
  // 7. Permissions: AND over the list; a superadmin passes (never through a key).
  if (
    declared.permissions &&
    !bypassesPermissions(session) &&
    !hasAll(organization.permissions, declared.permissions)
  ) {
    throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions');
  }
  // docs/security.md "Sensitive actions and step-up", after the permission
  // step (a caller without the permission learns that first): no key
  // performs a sensitive action or one its route keeps from keys, and a
  // session must have proved every factor of its account recently.
  if (session.apiKey && declared.apiKeys === false) {
    throw new ApiError('FORBIDDEN', 'API keys cannot perform this action');
  }
  if (declared.sensitive) assertSensitiveAllowed(session);
  if (needsOrganization && organization.id) c.set('tenantId', organization.id);
}

/**
 * Deny by default (docs/api.md "Access"): a request that reaches an endpoint
 * whose definition declared no access is treated as "session required".
 * `globals` are the app-wide middleware, which are not endpoints.
 */
export function denyUndeclared(globals: WeakSet<object>): MiddlewareHandler<AppEnv> {
  return async function denyUndeclared(c, next) {
    const handlers = matchedRoutes(c).map((route) => route.handler);
    const endpoint = handlers.some((handler) => !globals.has(handler) && handler !== denyUndeclared);
    const declared = handlers.some((handler) => guards.has(handler));
    if (endpoint && !declared) await check(c, { kind: 'session' });
    return next();
  };
}
