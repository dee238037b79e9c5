/**
 * 0001: better-auth's tables (core + magicLink + organization plugin, no teams).
 *
 * FROZEN: never edit after it has run anywhere; change the schema in a new
 * migration. Imports only from 'kysely' so it keeps compiling whatever
 * happens to src/.
 *
 * Derived from better-auth 1.7.25 `getMigrations()` output for the options in
 * src/auth/schema.ts (scripts/print-auth-schema.ts prints it), then reviewed:
 *   - ids: `uuid DEFAULT gen_random_uuid()` (v4). better-auth runs with
 *     `advanced.database.generateId: 'uuid'` and omits `id` from its inserts,
 *     so the default is load-bearing. FK columns to ids are `uuid` too.
 *   - timestamps are timestamptz; created_at/updated_at get DEFAULT now().
 *   - static defaults better-auth only applies in JS are also DB defaults
 *     (email_verified false, users.role 'user', members.role 'member',
 *     invitations.status 'pending'), so rows inserted by our own SQL agree.
 *   - FKs cascade like the generated SQL does (better-auth's migrator defaults
 *     to ON DELETE CASCADE when the plugin declares no onDelete).
 *   - additions the library does not generate: UNIQUE (organization_id,
 *     user_id) on members; UNIQUE (provider_id, account_id) on accounts (the
 *     library throws on duplicates there anyway); users.role CHECK;
 *     sessions.active_organization_id as uuid FK ON DELETE SET NULL (library:
 *     plain text); members.role_id as uuid (library: text; its FK to roles
 *     comes in a later migration); indexes on invitations.inviter_id and
 *     sessions.active_organization_id so the cascades/set-null from a user or
 *     organization delete do not scan those tables.
 *   - members_organization_id_idx is not created: the unique
 *     (organization_id, user_id) index serves lookups by organization_id.
 *   - the runtime role gatehouse_app (NOLOGIN) and its table privileges.
 *
 * Index names follow better-auth's convention (<table>_<column>_idx) so a
 * future getMigrations run recognises them.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';

/** Tables in creation order (down drops them in reverse). */
const TABLES = [
  'users',
  'organizations',
  'sessions',
  'accounts',
  'verifications',
  'members',
  'invitations',
] as const;

const APP_ROLE = 'gatehouse_app';

export async function up(db: Kysely<any>): Promise<void> {
  const statements: RawBuilder<unknown>[] = [
    // -- runtime role --------------------------------------------------------
    // Created once per cluster. When it already exists the migrating role
    // needs no CREATEROLE; when it does not and may not be created, fail
    // with instructions instead of a bare permission error.
    sql`
      DO $$
      BEGIN
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'gatehouse_app') THEN
          BEGIN
            CREATE ROLE gatehouse_app NOLOGIN;
          EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
              NULL; -- created concurrently by another migration run in the cluster
            WHEN insufficient_privilege THEN
              RAISE EXCEPTION 'role "gatehouse_app" does not exist and role "%" may not create it', current_user
                USING HINT = 'Have an administrator run: CREATE ROLE gatehouse_app NOLOGIN; then migrate again.';
          END;
        END IF;
      END
      $$
    `,

    // -- users ---------------------------------------------------------------
    sql`
      CREATE TABLE users (
        id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        name           text        NOT NULL,
        email          text        NOT NULL,
        email_verified boolean     NOT NULL DEFAULT false,
        image          text,
        role           text        NOT NULL DEFAULT 'user',
        deleted_at     timestamptz NULL,
        created_at     timestamptz NOT NULL DEFAULT now(),
        updated_at     timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT users_email_key UNIQUE (email),
        CONSTRAINT users_role_check CHECK (role IN ('superadmin', 'admin', 'user'))
      )
    `,

    // -- organizations (before sessions: sessions.active_organization_id) ----
    sql`
      CREATE TABLE organizations (
        id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        name       text        NOT NULL,
        slug       text        NOT NULL,
        logo       text,
        metadata   text,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT organizations_slug_key UNIQUE (slug)
      )
    `,

    // -- sessions ------------------------------------------------------------
    sql`
      CREATE TABLE sessions (
        id                     uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id                uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        token                  text        NOT NULL,
        expires_at             timestamptz NOT NULL,
        ip_address             text,
        user_agent             text,
        active_organization_id uuid        REFERENCES organizations (id) ON DELETE SET NULL,
        created_at             timestamptz NOT NULL DEFAULT now(),
        updated_at             timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT sessions_token_key UNIQUE (token)
      )
    `,
    sql`CREATE INDEX sessions_user_id_idx ON sessions (user_id)`,
    sql`
      CREATE INDEX sessions_active_organization_id_idx ON sessions (active_organization_id)
        WHERE active_organization_id IS NOT NULL
    `,

    // -- accounts ------------------------------------------------------------
    sql`
      CREATE TABLE accounts (
        id                       uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id                  uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        account_id               text        NOT NULL,
        provider_id              text        NOT NULL,
        access_token             text,
        refresh_token            text,
        id_token                 text,
        access_token_expires_at  timestamptz,
        refresh_token_expires_at timestamptz,
        scope                    text,
        password                 text,
        created_at               timestamptz NOT NULL DEFAULT now(),
        updated_at               timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT accounts_provider_id_account_id_key UNIQUE (provider_id, account_id)
      )
    `,
    sql`CREATE INDEX accounts_user_id_idx ON accounts (user_id)`,

    // -- verifications -------------------------------------------------------
    sql`
      CREATE TABLE verifications (
        id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        identifier text        NOT NULL,
        value      text        NOT NULL,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      )
    `,
    sql`CREATE INDEX verifications_identifier_idx ON verifications (identifier)`,

    // -- members -------------------------------------------------------------
    sql`
      CREATE TABLE members (
        id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        user_id         uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        role            text        NOT NULL DEFAULT 'member',
        role_id         uuid        NULL,
        created_at      timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT members_organization_id_user_id_key UNIQUE (organization_id, user_id)
      )
    `,
    sql`CREATE INDEX members_user_id_idx ON members (user_id)`,

    // -- invitations ---------------------------------------------------------
    sql`
      CREATE TABLE invitations (
        id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
        organization_id uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
        email           text        NOT NULL,
        role            text,
        status          text        NOT NULL DEFAULT 'pending',
        inviter_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        expires_at      timestamptz NOT NULL,
        created_at      timestamptz NOT NULL DEFAULT now()
      )
    `,
    sql`CREATE INDEX invitations_organization_id_idx ON invitations (organization_id)`,
    sql`CREATE INDEX invitations_email_idx ON invitations (email)`,
    sql`CREATE INDEX invitations_inviter_id_idx ON invitations (inviter_id)`,

    // -- privileges for the runtime role ----------------------------------------
    sql`GRANT USAGE ON SCHEMA public TO ${sql.id(APP_ROLE)}`,
    sql`
      GRANT SELECT, INSERT, UPDATE, DELETE
      ON ${sql.join(TABLES.map((table) => sql.table(table)))}
      TO ${sql.id(APP_ROLE)}
    `,
  ];

  for (const statement of statements) {
    await statement.execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [...TABLES].reverse()) {
    await sql`DROP TABLE IF EXISTS ${sql.table(table)}`.execute(db);
  }
  // The role stays (it is cluster-wide and may serve other databases); only
  // this migration's grant on the schema is taken back.
  await sql`
    DO $$
    BEGIN
      IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'gatehouse_app') THEN
        REVOKE USAGE ON SCHEMA public FROM gatehouse_app;
      END IF;
    END
    $$
  `.execute(db);
}
