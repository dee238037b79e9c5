/**
 * How better-auth's models map onto OUR tables (migrations/0001_auth_tables.ts).
 *
 * better-auth addresses models and fields by their camelCase names; these
 * options tell it the physical names: plural snake_case tables, snake_case
 * columns. The field lists are exactly the fields better-auth 1.7.25 declares
 * (`@better-auth/core` get-tables.mjs for user/session/account/verification,
 * `better-auth/plugins/organization` organization.mjs for organization/member/
 * invitation and the `session.activeOrganizationId` field it adds). Teams and
 * dynamic access control are off, so team/teamMember/organizationRole tables,
 * `invitation.teamId` and `session.activeTeamId` do not exist.
 *
 * Typing: every `fields` object must list every field of the library's model
 * type (minus `id`), each mapped to exactly its snake_case spelling, so a
 * missing field, a misspelled key, or a column name that is not the snake_case
 * of its field fails `tsc`. A field better-auth adds in an upgrade shows up as
 * a missing key here (for the typed core models) and as a column
 * getMigrations wants to add (`npm run db:auth-schema`, scripts/print-auth-schema.ts).
 *
 * The migration is frozen and never imports from here; if you change a name
 * here, write a new migration.
 */
import type {
  BaseAccount,
  BaseSession,
  BaseUser,
  BaseVerification,
  BetterAuthOptions,
  DBFieldAttribute,
} from 'better-auth';
import type { Invitation, Member, Organization, OrganizationOptions } from 'better-auth/plugins';
import { PLATFORM_ROLES } from '../shared/permissions.js';

/** `emailVerified` -> `email_verified` at the type level. */
type SnakeCase<S extends string> = S extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${SnakeCase<Tail>}`
  : S;

/** All fields of model `T` except `id`, each mapped to its snake_case column. */
type ColumnMap<T, Omitted extends string = never> = {
  readonly [F in Exclude<keyof T & string, 'id' | Omitted>]: SnakeCase<F>;
};

type AdditionalFields = Record<string, DBFieldAttribute>;

/** Compile-time check: each additional field's `fieldName` is the snake_case of its key. */
type SnakeNamed<T extends { [K in keyof T & string]: { readonly fieldName: SnakeCase<K> } }> = T;

/** The session fields the organization plugin adds (`activeTeamId` only with teams). */
type OrganizationSessionFields = Required<
  NonNullable<NonNullable<NonNullable<OrganizationOptions['schema']>['session']>['fields']>
>;

// ---------------------------------------------------------------------------
// Core models
// ---------------------------------------------------------------------------

const userAdditionalFields = {
  /** Platform role. Never settable through sign-up or update-user (`input: false`). */
  role: {
    type: [...PLATFORM_ROLES],
    required: true,
    defaultValue: 'user',
    input: false,
    fieldName: 'role',
  },
  /** Soft delete marker. Not settable by the user. */
  deletedAt: {
    type: 'date',
    required: false,
    input: false,
    fieldName: 'deleted_at',
  },
} as const satisfies AdditionalFields;
type _UserAdditionalFieldsAreSnakeCase = SnakeNamed<typeof userAdditionalFields>;

export const userSchema = {
  modelName: 'users',
  fields: {
    name: 'name',
    email: 'email',
    emailVerified: 'email_verified',
    image: 'image',
    createdAt: 'created_at',
    updatedAt: 'updated_at',
  } satisfies ColumnMap<BaseUser>,
  additionalFields: userAdditionalFields,
} as const;

export const sessionSchema = {
  modelName: 'sessions',
  fields: {
    userId: 'user_id',
    token: 'token',
    expiresAt: 'expires_at',
    ipAddress: 'ip_address',
    userAgent: 'user_agent',
    createdAt: 'created_at',
    updatedAt: 'updated_at',
  } satisfies ColumnMap<BaseSession>,
} as const;

export const accountSchema = {
  modelName: 'accounts',
  fields: {
    userId: 'user_id',
    accountId: 'account_id',
    providerId: 'provider_id',
    accessToken: 'access_token',
    refreshToken: 'refresh_token',
    idToken: 'id_token',
    accessTokenExpiresAt: 'access_token_expires_at',
    refreshTokenExpiresAt: 'refresh_token_expires_at',
    scope: 'scope',
    password: 'password',
    createdAt: 'created_at',
    updatedAt: 'updated_at',
  } satisfies ColumnMap<BaseAccount>,
} as const;

export const verificationSchema = {
  modelName: 'verifications',
  fields: {
    identifier: 'identifier',
    value: 'value',
    expiresAt: 'expires_at',
    createdAt: 'created_at',
    updatedAt: 'updated_at',
  } satisfies ColumnMap<BaseVerification>,
} as const;

// ---------------------------------------------------------------------------
// Organization plugin (`organization({ schema: organizationPluginSchema })`)
// ---------------------------------------------------------------------------

const memberAdditionalFields = {
  /**
   * Our RBAC role (a later migration adds the FK to `roles`). `input: false`:
   * the one route that accepts member additional fields from its body
   * (server-only `auth.api.addMember`) drops it; set it from an
   * `organizationHooks.beforeAddMember` return value or with our own query.
   */
  roleId: {
    type: 'string',
    required: false,
    input: false,
    fieldName: 'role_id',
  },
} as const satisfies AdditionalFields;
type _MemberAdditionalFieldsAreSnakeCase = SnakeNamed<typeof memberAdditionalFields>;

export const organizationPluginSchema = {
  session: {
    fields: {
      activeOrganizationId: 'active_organization_id',
    } satisfies ColumnMap<OrganizationSessionFields, 'activeTeamId'>,
  },
  organization: {
    modelName: 'organizations',
    fields: {
      name: 'name',
      slug: 'slug',
      logo: 'logo',
      metadata: 'metadata',
      createdAt: 'created_at',
    } satisfies ColumnMap<Organization>,
  },
  member: {
    modelName: 'members',
    fields: {
      organizationId: 'organization_id',
      userId: 'user_id',
      role: 'role',
      createdAt: 'created_at',
    } satisfies ColumnMap<Member>,
    additionalFields: memberAdditionalFields,
  },
  invitation: {
    modelName: 'invitations',
    fields: {
      organizationId: 'organization_id',
      email: 'email',
      role: 'role',
      status: 'status',
      inviterId: 'inviter_id',
      expiresAt: 'expires_at',
      createdAt: 'created_at',
      // `teamId` exists only with `teams.enabled`, which Gatehouse does not use.
    } satisfies ColumnMap<Invitation, 'teamId'>,
  },
} as const satisfies NonNullable<OrganizationOptions['schema']>;

/** The schema-related part of the better-auth options (spread into betterAuth({...})). */
export const authSchemaOptions = {
  user: userSchema,
  session: sessionSchema,
  account: accountSchema,
  verification: verificationSchema,
} as const satisfies Pick<BetterAuthOptions, 'user' | 'session' | 'account' | 'verification'>;

/**
 * `advanced.database` part: ids are generated by PostgreSQL
 * (`uuid DEFAULT gen_random_uuid()`); better-auth omits `id` from inserts.
 */
export const authDatabaseAdvancedOptions = {
  generateId: 'uuid',
  // The library reads a session and its user in one joined statement instead
  // of two (every cookie-cache miss), and likewise its other related reads.
  joins: true,
} as const satisfies NonNullable<NonNullable<BetterAuthOptions['advanced']>['database']>;
