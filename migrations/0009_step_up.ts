/**
 * 0009: step-up (docs/security.md "Sensitive actions and step-up").
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * - sessions.step_up_at: when the session last proved every factor its
 *   account has (the sign-in that created it, completing two-factor
 *   enrollment, or POST /api/session/step-up); NULL when it never did (a
 *   magic-link sign-in of an account with a password). A sensitive action
 *   needs it within STEP_UP_MAX_AGE seconds.
 * - session_state (0007) also answers step_up_at and the session's
 *   created_at in its one statement, and require_mfa is the policy of the
 *   organization read whether or not the user is a member of it (a platform
 *   admin acting in an organization is bound by it too); its OUT columns
 *   change, so it is dropped and created again (down restores 0007's,
 *   which answered require_mfa for members only).
 */
import { sql, type Kysely } from 'kysely';

const APP_ROLE = 'gatehouse_app';

function sessionState({ stepUp }: { stepUp: boolean }) {
  const extraColumns = stepUp ? sql`, step_up_at timestamptz, session_created_at timestamptz` : sql``;
  const extraValues = stepUp ? sql`, v_step_up_at, v_created_at` : sql``;
  const readStepUp = stepUp ? sql`, s.step_up_at, s.created_at` : sql``;
  const intoStepUp = stepUp ? sql`, v_step_up_at, v_created_at` : sql``;
  return [
    sql`DROP FUNCTION session_state(uuid, uuid, uuid)`,
    sql`
      CREATE FUNCTION session_state(p_session_id uuid, p_user_id uuid, p_organization_id uuid DEFAULT NULL)
      RETURNS TABLE (
        email                  text,
        name                   text,
        role                   text,
        email_verified         boolean,
        deleted_at             timestamptz,
        session_valid          boolean,
        active_organization_id uuid,
        member_id              uuid,
        permissions            text[],
        session_mfa            boolean,
        two_factor_enabled     boolean,
        require_mfa            boolean
        ${extraColumns}
      )
      LANGUAGE plpgsql VOLATILE
      AS $$
      DECLARE
        v_valid boolean := false;
        v_active uuid;
        v_mfa boolean := false;
        v_step_up_at timestamptz;
        v_created_at timestamptz;
        v_org uuid;
      BEGIN
        SELECT true, s.active_organization_id, s.mfa ${readStepUp}
        INTO v_valid, v_active, v_mfa ${intoStepUp}
        FROM sessions s
        WHERE s.id = p_session_id AND s.user_id = p_user_id AND s.expires_at > now();
        v_valid := coalesce(v_valid, false);
        v_mfa := coalesce(v_mfa, false);
        v_org := coalesce(p_organization_id, v_active);
        PERFORM set_config('app.tenant_id', coalesce(v_org::text, ''), true);
        RETURN QUERY
          SELECT u.email, u.name, u.role, u.email_verified, u.deleted_at,
                 v_valid,
                 v_active,
                 m.id,
                 coalesce((
                   SELECT array_agg(p.resource || ':' || p.action ORDER BY p.resource, p.action)
                   FROM role_permissions rp JOIN permissions p ON p.id = rp.permission_id
                   WHERE rp.role_id = m.role_id
                 ), '{}'),
                 v_mfa, u.two_factor_enabled, coalesce(o.require_mfa, false)
                 ${extraValues}
          FROM users u
          LEFT JOIN members m ON m.user_id = u.id AND m.organization_id = v_org
          LEFT JOIN organizations o ON o.id = ${stepUp ? sql`v_org` : sql`m.organization_id`}
          WHERE u.id = p_user_id;
      END
      $$
    `,
    sql`REVOKE ALL ON FUNCTION session_state(uuid, uuid, uuid) FROM PUBLIC`,
    sql`GRANT EXECUTE ON FUNCTION session_state(uuid, uuid, uuid) TO ${sql.id(APP_ROLE)}`,
  ];
}

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE sessions ADD COLUMN step_up_at timestamptz`.execute(db);
  for (const statement of sessionState({ stepUp: true })) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const statement of sessionState({ stepUp: false })) await statement.execute(db);
  await sql`ALTER TABLE sessions DROP COLUMN IF EXISTS step_up_at`.execute(db);
}
