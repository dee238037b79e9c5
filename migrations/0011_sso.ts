/**
 * 0011: enterprise single sign-on (docs/sso.md).
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * - sso_connections: an organization's identity provider, OIDC or SAML 2.0.
 *   `oidc_client_secret` holds the client secret sealed under AUTH_SECRET
 *   (AES-GCM, as webhook secrets are), never the secret itself;
 *   `oidc_metadata` the provider's endpoints as discovered when the issuer was
 *   set. SAML connections keep the IdP's entity id, its sign-in URL and its
 *   signing certificates (public). `default_role_id` NULL means the
 *   organization's Member role; deleting a role leaves the connection on
 *   Member. `role_mappings` is `[{ claim, value, roleId }]`.
 * - sso_domains: email domains an organization claims; a domain is proved by
 *   a DNS TXT record and, once verified, belongs to one organization
 *   (sso_domains_verified_key).
 * - sso_saml_replays: the assertion ids a connection has accepted, until they
 *   expire: a SAML response is used once.
 * - sso_bypasses: the sessions of Owners that used their break-glass in an
 *   organization that requires SSO: `sso.bypassed` is audited once per
 *   session and organization.
 * - sessions.sso_connection_id: the connection that created the session;
 *   deleting a connection deletes its sessions with it.
 * - organizations.require_sso: the organization's policy.
 * - Row-level security like every tenant table. Two lookups work before the
 *   tenant is known, each naming what it looks up for the policy
 *   (transaction-local), as api_key_by_digest does: sso_domain_owner (the
 *   organization that verified a domain) and sso_connection_by_id (a
 *   callback names only its connection).
 * - session_state (0009) also answers `require_sso`, `sso_required` (the
 *   policy binds this session in the organization read: on, the user a member
 *   whose email is at a verified domain of it, and the session not created by
 *   one of its connections) and `is_owner`; sso_domains and
 *   organizations.require_sso notify the session-state listeners (0005).
 */
import { sql, type Kysely } from 'kysely';

const APP_ROLE = 'gatehouse_app';
const CURRENT_TENANT = sql`nullif(current_setting('app.tenant_id', true), '')::uuid`;
const LOOKED_UP_DOMAIN = sql`nullif(current_setting('app.sso_domain', true), '')`;
const LOOKED_UP_CONNECTION = sql`nullif(current_setting('app.sso_connection_id', true), '')::uuid`;

function sessionState({ sso }: { sso: boolean }) {
  const extraColumns = sso ? sql`, require_sso boolean, sso_required boolean, is_owner boolean` : sql``;
  const declareSso = sso ? sql`v_sso_connection uuid;` : sql``;
  const readSso = sso ? sql`, s.sso_connection_id` : sql``;
  const intoSso = sso ? sql`, v_sso_connection` : sql``;
  const extraValues = sso
    ? sql`,
                 coalesce(o.require_sso, false),
                 coalesce(o.require_sso, false) AND m.id IS NOT NULL
                   AND EXISTS (
                     SELECT 1 FROM sso_domains d
                     WHERE d.tenant_id = v_org AND d.verified_at IS NOT NULL
                       AND d.domain = lower(split_part(u.email, '@', 2))
                   )
                   AND NOT EXISTS (
                     SELECT 1 FROM sso_connections c WHERE c.id = v_sso_connection AND c.tenant_id = v_org
                   ),
                 coalesce((SELECT r.slug = 'owner' FROM roles r WHERE r.id = m.role_id), false)`
    : sql``;
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
        require_mfa            boolean,
        step_up_at             timestamptz,
        session_created_at     timestamptz
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
        ${declareSso}
      BEGIN
        SELECT true, s.active_organization_id, s.mfa, s.step_up_at, s.created_at ${readSso}
        INTO v_valid, v_active, v_mfa, v_step_up_at, v_created_at ${intoSso}
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
                 v_mfa, u.two_factor_enabled, coalesce(o.require_mfa, false),
                 v_step_up_at, v_created_at
                 ${extraValues}
          FROM users u
          LEFT JOIN members m ON m.user_id = u.id AND m.organization_id = v_org
          LEFT JOIN organizations o ON o.id = v_org
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
    sql`ALTER TABLE organizations ADD COLUMN require_sso boolean NOT NULL DEFAULT false`,
    sql`
      CREATE TABLE sso_connections (
        id                  uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id           uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        type                text        NOT NULL CHECK (type IN ('oidc', 'saml')),
        name                text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
        enabled             boolean     NOT NULL DEFAULT true,
        default_role_id     uuid,
        role_mappings       jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(role_mappings) = 'array'),
        mfa_at_idp          boolean     NOT NULL DEFAULT false,
        allow_idp_initiated boolean     NOT NULL DEFAULT false,
        oidc_issuer         text,
        oidc_client_id      text,
        oidc_client_secret  text,
        oidc_scopes         text[],
        oidc_metadata       jsonb,
        saml_idp_entity_id  text,
        saml_entry_point    text,
        saml_certificates   text[],
        created_at          timestamptz NOT NULL DEFAULT now(),
        updated_at          timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT sso_connections_default_role_fkey FOREIGN KEY (default_role_id, tenant_id)
          REFERENCES roles (id, tenant_id) ON DELETE SET NULL (default_role_id),
        CONSTRAINT sso_connections_oidc_check CHECK (
          type <> 'oidc' OR (oidc_issuer IS NOT NULL AND oidc_client_id IS NOT NULL
            AND oidc_client_secret IS NOT NULL AND oidc_metadata IS NOT NULL)
        ),
        CONSTRAINT sso_connections_saml_check CHECK (
          type <> 'saml' OR (saml_idp_entity_id IS NOT NULL AND saml_entry_point IS NOT NULL
            AND cardinality(saml_certificates) >= 1)
        )
      )
    `,
    sql`CREATE INDEX sso_connections_tenant_id_idx ON sso_connections (tenant_id, created_at, id)`,
    sql`CREATE INDEX sso_connections_default_role_idx ON sso_connections (default_role_id)`,
    sql`
      CREATE TABLE sso_domains (
        id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        tenant_id   uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        domain      text        NOT NULL CHECK (domain = lower(domain) AND length(domain) BETWEEN 3 AND 253),
        txt_value   text        NOT NULL,
        verified_at timestamptz,
        created_at  timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT sso_domains_tenant_id_domain_key UNIQUE (tenant_id, domain)
      )
    `,
    sql`CREATE UNIQUE INDEX sso_domains_verified_key ON sso_domains (domain) WHERE verified_at IS NOT NULL`,
    sql`
      CREATE TABLE sso_saml_replays (
        tenant_id     uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        connection_id uuid        NOT NULL REFERENCES sso_connections (id) ON DELETE CASCADE,
        assertion_id  text        NOT NULL CHECK (length(assertion_id) BETWEEN 1 AND 256),
        expires_at    timestamptz NOT NULL,
        PRIMARY KEY (connection_id, assertion_id)
      )
    `,
    sql`CREATE INDEX sso_saml_replays_expires_at_idx ON sso_saml_replays (expires_at)`,
    sql`
      CREATE TABLE sso_bypasses (
        tenant_id  uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        session_id uuid        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (session_id, tenant_id)
      )
    `,
    sql`ALTER TABLE sessions ADD COLUMN sso_connection_id uuid REFERENCES sso_connections (id) ON DELETE CASCADE`,
    sql`CREATE INDEX sessions_sso_connection_id_idx ON sessions (sso_connection_id) WHERE sso_connection_id IS NOT NULL`,

    sql`ALTER TABLE sso_connections ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE sso_connections FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY sso_connections_access ON sso_connections
        USING (tenant_id = ${CURRENT_TENANT} OR id = ${LOOKED_UP_CONNECTION})
        WITH CHECK (tenant_id = ${CURRENT_TENANT})
    `,
    sql`ALTER TABLE sso_domains ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE sso_domains FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY sso_domains_access ON sso_domains
        USING (tenant_id = ${CURRENT_TENANT} OR (verified_at IS NOT NULL AND domain = ${LOOKED_UP_DOMAIN}))
        WITH CHECK (tenant_id = ${CURRENT_TENANT})
    `,
    sql`ALTER TABLE sso_saml_replays ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE sso_saml_replays FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY sso_saml_replays_access ON sso_saml_replays
        USING (tenant_id = ${CURRENT_TENANT})
        WITH CHECK (tenant_id = ${CURRENT_TENANT})
    `,
    sql`ALTER TABLE sso_bypasses ENABLE ROW LEVEL SECURITY`,
    sql`ALTER TABLE sso_bypasses FORCE ROW LEVEL SECURITY`,
    sql`
      CREATE POLICY sso_bypasses_access ON sso_bypasses
        USING (tenant_id = ${CURRENT_TENANT})
        WITH CHECK (tenant_id = ${CURRENT_TENANT})
    `,
    sql`GRANT SELECT, INSERT, UPDATE, DELETE ON sso_connections, sso_domains, sso_saml_replays, sso_bypasses TO ${sql.id(APP_ROLE)}`,

    // The organization that verified a domain, if any (sign-in by email, and
    // the DOMAIN_TAKEN check): names the domain for the policy, reads one row.
    sql`
      CREATE FUNCTION sso_domain_owner(p_domain text)
      RETURNS uuid
      LANGUAGE plpgsql VOLATILE
      AS $$
      DECLARE
        v_owner uuid;
      BEGIN
        PERFORM set_config('app.sso_domain', p_domain, true);
        SELECT d.tenant_id INTO v_owner FROM sso_domains d
        WHERE d.domain = p_domain AND d.verified_at IS NOT NULL;
        RETURN v_owner;
      END
      $$
    `,
    sql`REVOKE ALL ON FUNCTION sso_domain_owner(text) FROM PUBLIC`,
    sql`GRANT EXECUTE ON FUNCTION sso_domain_owner(text) TO ${sql.id(APP_ROLE)}`,
    // A connection by id, whatever the tenant (an IdP's callback names only
    // the connection): names it for the policy, reads one row.
    sql`
      CREATE FUNCTION sso_connection_by_id(p_id uuid)
      RETURNS SETOF sso_connections
      LANGUAGE plpgsql VOLATILE
      AS $$
      BEGIN
        PERFORM set_config('app.sso_connection_id', p_id::text, true);
        RETURN QUERY SELECT * FROM sso_connections WHERE id = p_id;
      END
      $$
    `,
    sql`REVOKE ALL ON FUNCTION sso_connection_by_id(uuid) FROM PUBLIC`,
    sql`GRANT EXECUTE ON FUNCTION sso_connection_by_id(uuid) TO ${sql.id(APP_ROLE)}`,

    ...sessionState({ sso: true }),
    sql`
      CREATE TRIGGER sso_domains_notify_session_state
      AFTER INSERT OR UPDATE OR DELETE ON sso_domains
      FOR EACH STATEMENT EXECUTE FUNCTION notify_session_state()
    `,
    sql`
      CREATE TRIGGER organizations_sso_notify_session_state
      AFTER UPDATE OF require_sso ON organizations
      FOR EACH STATEMENT EXECUTE FUNCTION notify_session_state()
    `,
  ];
  for (const statement of statements) await statement.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS organizations_sso_notify_session_state ON organizations`.execute(db);
  for (const statement of sessionState({ sso: false })) await statement.execute(db);
  await sql`DROP FUNCTION IF EXISTS sso_connection_by_id(uuid)`.execute(db);
  await sql`DROP FUNCTION IF EXISTS sso_domain_owner(text)`.execute(db);
  await sql`ALTER TABLE sessions DROP COLUMN IF EXISTS sso_connection_id`.execute(db);
  await sql`DROP TABLE IF EXISTS sso_bypasses`.execute(db);
  await sql`DROP TABLE IF EXISTS sso_saml_replays`.execute(db);
  await sql`DROP TABLE IF EXISTS sso_domains`.execute(db);
  await sql`DROP TABLE IF EXISTS sso_connections`.execute(db);
  await sql`ALTER TABLE organizations DROP COLUMN IF EXISTS require_sso`.execute(db);
}
