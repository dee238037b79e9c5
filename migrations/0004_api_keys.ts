/**
 * 0004: API keys (docs/api.md "API keys").
 *
 * FROZEN: never edit after it has run anywhere. Imports only from 'kysely'.
 *
 * The plaintext key is never stored: key_hash is HMAC-SHA256 of the full key
 * keyed by key_salt, and lookup_digest (SHA-256 of the full key) lets
 * an authenticating request find its row by index before the salted hash is
 * checked in constant time. A 32-character base-62 secret has ~190 bits, so
 * an unsalted digest offers nothing to brute-force.
 *
 * No foreign keys on tenant_id or created_by: a revoked key outlives its
 * organization and its creator as a record, like the audit log.
 *
 * Row-level security: a row is visible to a transaction that names its
 * tenant; to one that names no tenant but names the key's creator
 * (app.key_owner_id: revoking a purged user's keys in every organization);
 * or to one that presents the key's lookup digest (app.key_digest: finding
 * the key that authenticates a request, whose organization is not yet known).
 */
import { sql, type Kysely } from 'kysely';

const CURRENT_TENANT = sql`nullif(current_setting('app.tenant_id', true), '')::uuid`;
const CURRENT_KEY_OWNER = sql`nullif(current_setting('app.key_owner_id', true), '')::uuid`;
const CURRENT_KEY_DIGEST = sql`nullif(current_setting('app.key_digest', true), '')`;

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE api_keys (
      id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
      tenant_id     uuid        NOT NULL,
      created_by    uuid        NOT NULL,
      name          text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
      scopes        text[]      NOT NULL CHECK (cardinality(scopes) BETWEEN 1 AND 17),
      expires_at    timestamptz,
      key_prefix    text        NOT NULL DEFAULT 'sk_live_' CHECK (key_prefix = 'sk_live_'),
      last_four     text        NOT NULL CHECK (last_four ~ '^[0-9A-Za-z]{4}$'),
      key_hash      text        NOT NULL CHECK (key_hash ~ '^[0-9a-f]{64}$'),
      key_salt      text        NOT NULL CHECK (key_salt ~ '^[0-9a-f]{32}$'),
      lookup_digest text        NOT NULL CHECK (lookup_digest ~ '^[0-9a-f]{64}$'),
      created_at    timestamptz NOT NULL DEFAULT now(),
      revoked_at    timestamptz,
      last_used_at  timestamptz,
      CONSTRAINT api_keys_lookup_digest_key UNIQUE (lookup_digest)
    )
  `.execute(db);
  await sql`CREATE INDEX api_keys_tenant_id_created_at_idx ON api_keys (tenant_id, created_at DESC, id DESC)`.execute(db);
  await sql`CREATE INDEX api_keys_created_by_idx ON api_keys (created_by) WHERE revoked_at IS NULL`.execute(db);

  await sql`ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY`.execute(db);
  await sql`ALTER TABLE api_keys FORCE ROW LEVEL SECURITY`.execute(db);
  await sql`
    CREATE POLICY api_keys_access ON api_keys
      USING (
        tenant_id = ${CURRENT_TENANT}
        OR (${CURRENT_TENANT} IS NULL AND created_by = ${CURRENT_KEY_OWNER})
        OR lookup_digest = ${CURRENT_KEY_DIGEST}
      )
      WITH CHECK (tenant_id = ${CURRENT_TENANT})
  `.execute(db);

  // The one statement that finds the key presenting this digest: it names the
  // digest for the policy above (transaction-local) and reads the row.
  await sql`
    CREATE FUNCTION api_key_by_digest(p_digest text)
    RETURNS SETOF api_keys
    LANGUAGE plpgsql VOLATILE
    AS $$
    BEGIN
      PERFORM set_config('app.key_digest', p_digest, true);
      RETURN QUERY SELECT * FROM api_keys WHERE lookup_digest = p_digest;
    END
    $$
  `.execute(db);
  await sql`REVOKE ALL ON FUNCTION api_key_by_digest(text) FROM PUBLIC`.execute(db);
  await sql`GRANT EXECUTE ON FUNCTION api_key_by_digest(text) TO gatehouse_app`.execute(db);

  // Keys are never deleted or rewritten by the application: it may only mark
  // them revoked and note their last use.
  await sql`GRANT SELECT, INSERT ON api_keys TO gatehouse_app`.execute(db);
  await sql`GRANT UPDATE (revoked_at, last_used_at) ON api_keys TO gatehouse_app`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS api_key_by_digest(text)`.execute(db);
  await sql`DROP TABLE IF EXISTS api_keys`.execute(db);
}
