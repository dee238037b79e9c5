import { type Kysely, sql } from 'kysely';
import type { EnrichedSession } from '../../shared/types.js';
import type { Database } from '../database.js';

export interface SessionStateRow {
  email: string;
  name: string;
  role: EnrichedSession['user']['role'];
  email_verified: boolean;
  deleted_at: Date | null;
  session_valid: boolean;
  active_organization_id: string | null;
  member_id: string | null;
  permissions: string[];
  session_mfa: boolean;
  two_factor_enabled: boolean;
  /** The policy of the organization read (the active one, or the one asked for), member or not (migrations/0009). */
  require_mfa: boolean;
  /** When the session last proved every factor (migrations/0009); null: never. */
  step_up_at: Date | null;
  session_created_at: Date | null;
  /** The organization read requires single sign-on (migrations/0011), member or not. */
  require_sso: boolean;
  /**
   * The policy binds this session there: on, the user a member whose email
   * is at one of its verified domains, and the session not created by one of
   * its connections (docs/sso.md "Policy").
   */
  sso_required: boolean;
  /** The user is an Owner of the organization read (the policy's break-glass). */
  is_owner: boolean;
}

/**
 * One statement: fresh user state, session liveness, the stored active
 * organization, and the permissions and policies in it, or in
 * `organizationId` when given (migrations/0002 session_state, last redefined
 * in 0011).
 */
export async function loadSessionState(
  db: Kysely<Database>,
  sessionId: string,
  userId: string,
  organizationId: string | null = null,
): Promise<SessionStateRow | null> {
  const { rows } =
    await sql<SessionStateRow>`select * from session_state(${sessionId}::uuid, ${userId}::uuid, ${organizationId}::uuid)`.execute(
      db,
    );
  return rows[0] ?? null;
}

/** A session found by its token, with what `session_state` answers for it. */
export interface SessionByTokenRow extends SessionStateRow {
  session_id: string;
  user_id: string;
  expires_at: Date;
}

/**
 * The same statement reached by the session's token (the library's session
 * cookie, its signature already checked): the session row joined to
 * `session_state` for its active organization. No row: no live session
 * with that token (unknown, expired, or its user gone).
 */
export async function loadSessionStateByToken(db: Kysely<Database>, token: string): Promise<SessionByTokenRow | null> {
  const { rows } = await sql<SessionByTokenRow>`
    select s.id as session_id, s.user_id, s.expires_at, st.*
    from sessions s cross join lateral session_state(s.id, s.user_id) st
    where s.token = ${token} and s.expires_at > now()`.execute(db);
  return rows[0] ?? null;
}
