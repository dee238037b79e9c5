/**
 * 0007: multi-factor authentication (README "Multi-factor authentication").
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * - users.two_factor_enabled: better-auth's twoFactor plugin field.
 * - sessions.mfa: whether the session is multi-factor (created by a passkey,
 *   or completed a second factor). Written by the INSERT that creates the
 *   session (src/auth/second-factor.ts), never flipped later.
 * - organizations.require_mfa: the organization's policy.
 * - two_factors: the twoFactor plugin's table, tightened: one row per user
 *   (the plugin reads it by user), NOT NULL counters, created_at for the
 *   account export, and last_totp_step, the RFC 6238 §5.2 replay guard the
 *   plugin lacks: a code is accepted only for a time step above the last one
 *   accepted. backup_codes holds keyed hashes, never the codes.
 * - passkeys: the @better-auth/passkey plugin's table; credential_id unique
 *   (a credential belongs to one account). counter is integer, as the library
 *   emits it (postgres.js would hand a bigint back as a string).
 * - session_state (0002) gains the three flags it must answer in its one
 *   statement; its OUT columns change, so it is dropped and created again.
 * - organizations notify the session-state listeners (0005) when require_mfa
 *   changes; sessions and users already do.
 */
import { sql, type Kysely } from 'kysely';

const APP_ROLE = 'gatehouse_app';

/**
 * session_state as 0002 created it (multiFactor false, for down) or with the
 * session's mfa flag, the user's two_factor_enabled and the organization's
 * require_mfa as three more columns.
 */
function sessionState({ multiFactor }: { multiFactor: boolean }) {
  const extraColumns = multiFactor
    ? sql`, session_mfa boolean, two_factor_enabled boolean, require_mfa boolean`
    : sql``;
  const extraValues = multiFactor ? sql`, v_mfa, u.two_factor_enabled, coalesce(o.require_mfa, false)` : sql``;
  const readMfa = multiFactor ? sql`, s.mfa` : sql``;
  const intoMfa = multiFactor ? sql`, v_mfa` : sql``;
  const joinOrganization = multiFactor ? sql`LEFT JOIN organizations o ON o.id = m.organization_id` : sql``;
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
        permissions            text[]
        ${extraColumns}
      )
      LANGUAGE plpgsql VOLATILE
      AS $$
      DECLARE
        v_valid boolean := false;
        v_active uuid;
        v_mfa boolean := false;
        v_org uuid;
      BEGIN
        SELECT true, s.active_organization_id ${readMfa} INTO v_valid, v_active ${intoMfa}
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
                 ), '{}')
                 ${extraValues}
          FROM users u
          LEFT JOIN members m ON m.user_id = u.id AND m.organization_id = v_org
          ${joinOrganization}
          WHERE u.id = p_user_id;
      END
      $$
    `,
    sql`REVOKE ALL ON FUNCTION session_state(uuid, uuid, uuid) FROM PUBLIC`,
    sql`GRANT EXECUTE ON FUNCTION session_state(uuid, uuid, uuid) TO ${sql.id(APP_ROLE)}`,
  ];
}

export async function up(db: Kysely<any>): Promise<void> {
  const statements = [
    sql`ALTER TABLE users ADD COLUMN two_factor_enabled boolean NOT NULL DEFAULT false`,
    sql`ALTER TABLE sessions ADD COLUMN mfa boolean NOT NULL DEFAULT false`,
    sql`ALTER TABLE organizations ADD COLUMN require_mfa boolean NOT NULL DEFAULT false`,
    sql`
      CREATE TABLE two_factors (
        id                        uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id                   uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        secret                    text        NOT NULL,
        backup_codes              text        NOT NULL,
        verified                  boolean     NOT NULL DEFAULT true,
        failed_verification_count integer     NOT NULL DEFAULT 0,
        locked_until              timestamptz,
        last_totp_step            bigint,
        created_at                timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT two_factors_user_id_key UNIQUE (user_id)
      )
    `,
    sql`
      CREATE TABLE passkeys (
        id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id       uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        name          text,
        public_key    text        NOT NULL,
        credential_id text        NOT NULL,
        counter       integer     NOT NULL,
        device_type   text        NOT NULL,
        backed_up     boolean     NOT NULL,
        transports    text,
        aaguid        text,
        created_at    timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT passkeys_credential_id_key UNIQUE (credential_id)
      )
    `,
    sql`CREATE INDEX passkeys_user_id_idx ON passkeys (user_id)`,
    sql`GRANT SELECT, INSERT, UPDATE, DELETE ON two_factors, passkeys TO ${sql.id(APP_ROLE)}`,

    ...sessionState({ multiFactor: true }),
    sql`
      CREATE TRIGGER organizations_notify_session_state
      AFTER UPDATE OF require_mfa ON organizations
      FOR EACH STATEMENT EXECUTE FUNCTION notify_session_state()
    `,
  ];
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS organizations_notify_session_state ON organizations`.execute(db);
  for (const statement of sessionState({ multiFactor: false })) await statement.execute(db);
  await sql`DROP TABLE IF EXISTS passkeys`.execute(db);
  await sql`DROP TABLE IF EXISTS two_factors`.execute(db);
  await sql`ALTER TABLE organizations DROP COLUMN IF EXISTS require_mfa`.execute(db);
  await sql`ALTER TABLE sessions DROP COLUMN IF EXISTS mfa`.execute(db);
  await sql`ALTER TABLE users DROP COLUMN IF EXISTS two_factor_enabled`.execute(db);
}
