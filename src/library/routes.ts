import { ACCOUNT_ROUTES } from './account-routes.js';
import type { LibraryRoute } from './fields.js';
import { ORGANIZATION_ROUTES } from './organization-routes.js';
import { SECOND_FACTOR_ROUTES } from './second-factor-routes.js';

/**
 * The auth library's routes the service serves: deny by
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
 * `body` / `query` bound what the library takes (lengths, formats, no control characters). Bodies are JSON.
 */
export const LIBRARY_ROUTES: readonly LibraryRoute[] = [
  ...ACCOUNT_ROUTES,
  ...SECOND_FACTOR_ROUTES,
  ...ORGANIZATION_ROUTES,
];

/** `/api/auth/...` of each state-changing organization call, with the permission it needs (the authorization suite walks these). */
export const ORGANIZATION_PERMISSIONS: Readonly<Record<string, string>> = Object.fromEntries(
  LIBRARY_ROUTES.flatMap((route) =>
    route.method === 'POST' && route.access.kind === 'session' && route.access.permissions?.length
      ? [[`/api/auth${route.path}`, route.access.permissions[0]!]]
      : [],
  ),
);
