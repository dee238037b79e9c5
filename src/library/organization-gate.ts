import type { Context } from 'hono';
import type { Kysely } from 'kysely';
import type { OrganizationTarget } from '../auth/access.js';
import type { Database } from '../db/database.js';
import { invitationOrganization, organizationIdBySlug } from '../db/queries/library-calls.js';
import { loadSessionState } from '../db/queries/session-state.js';
import type { TargetResolver } from '../middleware/guard.js';
import { ApiError } from '../shared/errors.js';
import type { AppEnv, EnrichedSession } from '../shared/types.js';
import { libraryInput } from './input.js';
import type { JsonObject, LibraryRoute } from './row.js';

const targets = new WeakMap<Context<AppEnv>, OrganizationTarget>();

/** The organization the guard authorized this call in (see `organizationTarget`). */
export function authorizedOrganization(c: Context<AppEnv>): OrganizationTarget | undefined {
  return targets.get(c);
}

/**
 * The caller's permissions in `organizationId` (none unless a member), the
 * organization's MFA policy, which binds every session acting in it, member
 * or not (a platform admin included), and its single sign-on policy, which
 * binds members at its verified domains only (docs/sso.md "Policy"): the
 * session's own when it is the active one, else the same one statement.
 */
export async function organizationFor(
  db: Kysely<Database>,
  session: EnrichedSession,
  organizationId: string | null,
): Promise<OrganizationTarget> {
  if (!organizationId) return { id: null, permissions: [], requireMfa: false, ssoRequired: false, isOwner: false };
  if (organizationId === session.session.activeOrganizationId) {
    const { permissions, requireMfa, ssoRequired, isOwner } = session;
    return { id: organizationId, permissions, requireMfa, ssoRequired, isOwner };
  }
  const state = await loadSessionState(db, session.session.id, session.user.id, organizationId);
  return {
    id: organizationId,
    permissions: state?.member_id ? state.permissions : [],
    requireMfa: state?.require_mfa ?? false,
    ssoRequired: state?.sso_required ?? false,
    isOwner: state?.is_owner ?? false,
  };
}

/**
 * One session, one organization: the organization a library
 * call acts on is the one the request names (`organizationId`, or
 * `organizationSlug` resolved here), else the active organization as the
 * service resolved it from the database, never the library's cookie cache.
 * The guard checks the route's permissions in it; the route handler writes
 * it into the forwarded request.
 */
export function organizationTarget(route: LibraryRoute, db: Kysely<Database>): TargetResolver {
  return async (c, session) => {
    const input = await libraryInput(c, route);
    const source: JsonObject = route.organization === 'query' ? input.query : (input.body ?? {});
    let id = typeof source.organizationId === 'string' ? source.organizationId : null;
    if (!id && typeof source.organizationSlug === 'string') {
      id = await organizationIdBySlug(db, source.organizationSlug);
      if (!id) throw new ApiError('NOT_FOUND', 'Organization not found');
    }
    if (route.organization === 'invitation' && typeof source.invitationId === 'string') {
      id = await invitationOrganization(db, source.invitationId);
      if (!id) throw new ApiError('NOT_FOUND', 'Invitation not found');
    }
    id ??= session.session.activeOrganizationId;
    const target = await organizationFor(db, session, id);
    targets.set(c, target);
    return target;
  };
}
