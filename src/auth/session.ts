import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/database.js';
import { purgeAfter } from '../db/queries/accounts.js';
import type { SessionResolver } from '../middleware/session.js';
import type { EnrichedSession } from '../types.js';
import type { Auth } from './auth.js';

interface SessionStateRow {
  email: string;
  name: string;
  role: EnrichedSession['user']['role'];
  email_verified: boolean;
  deleted_at: Date | null;
  session_valid: boolean;
  active_organization_id: string | null;
  member_id: string | null;
  permissions: string[];
}

/**
 * One statement: fresh user state, session liveness, the stored active
 * organization, and the permissions in it, or in `organizationId` when given
 * (migrations/0002 session_state).
 */
export async function loadSessionState(db: Kysely<DB>, sessionId: string, userId: string, organizationId: string | null = null): Promise<SessionStateRow | null> {
  const { rows } = await sql<SessionStateRow>`select * from session_state(${sessionId}::uuid, ${userId}::uuid, ${organizationId}::uuid)`.execute(db);
  return rows[0] ?? null;
}

/**
 * Resolves the enriched session of spec §2 once per request. The library
 * validates the cookie (from its 5-minute cookie cache or the database);
 * then one statement reads what must never be stale: the user's platform
 * role and deletion mark, whether the session was revoked, and the
 * permissions of the member's role in the active organization as stored now.
 * A role change, an organization switch, a revoked session or a scheduled
 * deletion therefore bites on the next request, not when the cookie cache
 * expires.
 */
export function createSessionResolver({ auth, db, graceDays }: { auth: Auth; db: Kysely<DB>; graceDays: number }): SessionResolver {
  return async (c) => {
    if (!c.req.header('cookie')) return null;
    const result = await auth.api.getSession({ headers: c.req.raw.headers, returnHeaders: true });
    // A refreshed session (updateAge) or a renewed cookie cache comes back as
    // Set-Cookie: pass it on, or the browser keeps the stale cookies.
    for (const cookie of result.headers.getSetCookie()) c.header('Set-Cookie', cookie, { append: true });
    const found = result.response;
    if (!found) return null;
    const state = await loadSessionState(db, found.session.id, found.user.id);
    if (!state || !state.session_valid) return null;
    // A member of the organization, or no active organization at all (spec §4: empty permissions).
    const activeOrganizationId = state.member_id ? state.active_organization_id : null;
    return {
      user: { id: found.user.id, email: state.email, name: state.name, role: state.role, emailVerified: state.email_verified },
      session: { id: found.session.id, activeOrganizationId, expiresAt: new Date(found.session.expiresAt).toISOString() },
      permissions: state.permissions,
      deletedAt: state.deleted_at ? new Date(state.deleted_at).toISOString() : null,
      purgeAfter: state.deleted_at ? purgeAfter(state.deleted_at, graceDays).toISOString() : null,
      apiKey: null,
    };
  };
}
