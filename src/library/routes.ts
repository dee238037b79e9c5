import type { SessionCreation, SessionPaths } from '../auth/second-factor.js';
import { ACCOUNT_ROUTES } from './account-routes.js';
import { MEMBERSHIP_ROUTES } from './membership-routes.js';
import { ORGANIZATION_ROUTES } from './organization-routes.js';
import type { LibraryRoute } from './row.js';
import { SECOND_FACTOR_ROUTES } from './second-factor-routes.js';
import { SIGN_IN_ROUTES } from './sign-in-routes.js';
import { SSO_ROUTES } from './sso-routes.js';

/**
 * The auth library's routes the service serves, one row each, each row
 * carrying all of its route (src/library/row.ts): deny by default, as for the
 * service's own routes. Each row declares its access the way `defineRoute`
 * does, and is checked by the same guard with the same resolved session.
 * Whatever the library mounts that is not here answers 404.
 *
 * `organization` names where the organization the call acts on travels: the
 * gate resolves it (the request's `organizationId` or `organizationSlug`,
 * else the session's active organization as the service resolved it), checks
 * the permission list *in that organization*, and writes it into the
 * forwarded request, so the library never falls back on a stale cookie
 * cache's idea of the active organization.
 *
 * `body` / `query` bound what the library takes (lengths, formats, no control characters). Bodies are JSON.
 */
export const LIBRARY_ROUTES: readonly LibraryRoute[] = [
  ...SIGN_IN_ROUTES,
  ...SSO_ROUTES,
  ...ACCOUNT_ROUTES,
  ...SECOND_FACTOR_ROUTES,
  ...ORGANIZATION_ROUTES,
  ...MEMBERSHIP_ROUTES,
];

/** `/api/auth/...` of each state-changing organization call, with the permission it needs (the authorization suite walks these). */
export const ORGANIZATION_PERMISSIONS: Readonly<Record<string, string>> = Object.fromEntries(
  LIBRARY_ROUTES.flatMap((route) =>
    route.method === 'POST' && route.access.kind === 'session' && route.access.permissions?.length
      ? [[`/api/auth${route.path}`, route.access.permissions[0]!]]
      : [],
  ),
);

/** How each path's new sessions are marked, from the rows; a path whose rows disagree is a mistake, thrown at start. */
export function sessionPathsOf(rows: readonly LibraryRoute[]): SessionPaths {
  const paths = new Map<string, SessionCreation>();
  for (const { path, newSessions } of rows) {
    if (!newSessions) continue;
    const declared = paths.get(path);
    if (declared && declared !== newSessions)
      throw new Error(`${path}: new sessions marked both ${declared} and ${newSessions}`);
    paths.set(path, newSessions);
  }
  return paths;
}

/**
 * The auth tier's paths under `/api/auth`, from the rows: a row's tier covers
 * its first path segment, so each `auth` row's first segment is a prefix
 * (the paths below it that the library mounts and the service does not
 * serve answer 404, and are counted the same).
 */
export function authTierPrefixes(rows: readonly LibraryRoute[]): string[] {
  const prefixes = rows.filter((row) => row.tier === 'auth').map((row) => `/api/auth/${row.path.split('/')[1]}`);
  return [...new Set(prefixes)];
}

export const LIBRARY_SESSION_PATHS = sessionPathsOf(LIBRARY_ROUTES);
/** What the rows tell the rate limiter: the auth tier's paths, and the paths that name an account by email. */
export const LIBRARY_RATE_LIMITS = {
  authPrefixes: authTierPrefixes(LIBRARY_ROUTES),
  namedAccountPaths: LIBRARY_ROUTES.filter((row) => row.spendsAccountBudget === 'named-account').map(
    (row) => `/api/auth${row.path}`,
  ),
};
