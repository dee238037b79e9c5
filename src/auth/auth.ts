import { type BetterAuthOptions, betterAuth } from 'better-auth';
import { magicLink, organization } from 'better-auth/plugins';
import { defaultAc, ownerAc } from 'better-auth/plugins/organization/access';
import type { Kysely } from 'kysely';
import { ambientAware } from '../db/ambient.js';
import type { SchemalessDb } from '../db/client.js';
import type { Database } from '../db/database.js';
import { proveEmailOwnership } from '../db/queries/email-proof.js';
import type { Clock } from '../shared/clock.js';
import type { Config } from '../shared/config.js';
import { describeError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { type SsoFetchPolicy, ssoFetchPolicy } from '../sso/fetch.js';
import { accountEvents } from './account-events.js';
import type { Mailer } from './email.js';
import { emails } from './email-templates.js';
import { seedNewOrganization } from './organizations.js';
import { hashPassword, verifyPassword } from './password.js';
import { authDatabaseAdvancedOptions, authSchemaOptions, organizationPluginSchema } from './schema.js';
import { type SessionPaths, secondFactorHooks, secondFactorPlugins, sessionMfaField } from './second-factor.js';
import { ssoPlugin } from './sso-plugin.js';

export const AUTH_BASE_PATH = '/api/auth';
export const COOKIE_PREFIX = 'gatehouse';

/** The session settings (docs/api.md "Sessions"). */
export const SESSION_SETTINGS = {
  expiresIn: 7 * 24 * 60 * 60,
  updateAge: 24 * 60 * 60,
  cookieCache: { enabled: true, maxAge: 5 * 60 },
  // The library's own freshness rule (session age, a day by default, on
  // passkey registration, unlink-account and list-sessions) decides nothing:
  // the guard's step-up rule does (docs/security.md "Sensitive actions and step-up").
  freshAge: 0,
} as const;

const pluginAccess = {
  roles: {
    owner: ownerAc,
    admin: defaultAc.newRole(ownerAc.statements),
    member: defaultAc.newRole(ownerAc.statements),
  },
};

export interface AuthDeps {
  config: Config;
  db: Kysely<Database>;
  mailer: Mailer;
  logger: Logger;
  /**
   * Keeps work alive after the response is sent (Workers: `ctx.waitUntil`);
   * by default the promise simply runs on.
   */
  background?: (task: Promise<unknown>) => void;
  /** The app's clock: a sign-in's proof of its factors is dated by it (the guard judges freshness by it). */
  clock?: Clock;
  /**
   * How each library path marks the sessions it creates, from the library
   * routes' rows. None given: every path that creates a session is refused
   * for a user with two-factor and proves nothing (fail closed).
   */
  sessionPaths?: SessionPaths;
  /** How single sign-on reaches identity providers (docs/sso.md "Addresses"); default: the global fetch under the configured rules. */
  ssoPolicy?: SsoFetchPolicy;
}

/**
 * better-auth on our database and our tables. The library's own rate limiter
 * is off (ours runs in front of it) and so is its admin plugin
 * (`/api/auth/admin/*` is not served: docs/api.md "Sign-in").
 */
export function createAuth({
  config,
  db,
  mailer,
  logger,
  background = (task) => void task,
  clock = () => new Date(),
  sessionPaths = new Map(),
  ssoPolicy = ssoFetchPolicy(config, fetch),
}: AuthDeps) {
  const send = async (message: Parameters<Mailer['send']>[0]) => mailer.send(message);
  // A send whose failure the mailer has already logged (email.send_failed).
  const sendLater = (message: Parameters<Mailer['send']>[0]) => background(send(message).catch(() => {}));
  const secondFactor = secondFactorHooks({ config, db: ambientAware(db), clock, sessionPaths });
  // docs/security.md "Account linking" and "Security notices" (src/auth/account-events.ts).
  const account = accountEvents({ config, db: ambientAware(db), mailer, background });
  // docs/security.md "Account linking": each path that proves the address takes the account from whoever held it before.
  const proveEmail = (userId: string) => proveEmailOwnership(ambientAware(db), userId);
  const options = {
    appName: 'Gatehouse',
    baseURL: config.auth.url,
    basePath: AUTH_BASE_PATH,
    secret: config.auth.secret,
    // APP_URL is the only trusted origin (docs/api.md "Sign-in"); the library's
    // CSRF and origin checks refuse the rest (docs/design.md "Decisions",
    // cross-site requests).
    trustedOrigins: [config.auth.appUrl],
    // `ambientAware`: inside runInTransaction the library's queries join our
    // transaction (organization creation and its role seeding commit as one).
    database: { db: ambientAware(db) as SchemalessDb, type: 'postgres', transaction: true },
    // The plugin's role change would bypass the last-Owner and escalation
    // rules: member roles change through /api/admin/members/:memberId only.
    disabledPaths: ['/organization/update-member-role'],
    ...authSchemaOptions,
    user: {
      ...authSchemaOptions.user,
      deleteUser: { enabled: false },
      changeEmail: { enabled: false },
      // OAuth only for an address the provider asserts as verified.
      validateUserInfo: account.validateUserInfo,
    },
    account: {
      ...authSchemaOptions.account,
      // docs/security.md "Account linking", stated here rather than left to
      // the library's defaults: a provider identity joins an existing account
      // only when the provider asserts the account's own address as verified
      // and the account's address is verified too; the profile never
      // overwrites the account's. "Trusted" tells the library to take the
      // providers' own verified flag, which `validateUserInfo` requires on
      // every OAuth sign-in, sign-up and link (so that a refusal says
      // `email_not_verified`); the one library path that skips it, linking
      // by ID token, is refused (src/auth/account-events.ts).
      accountLinking: {
        enabled: true,
        trustedProviders: ['google', 'github'],
        requireLocalEmailVerified: true,
        allowDifferentEmails: false,
        updateUserInfoOnLink: false,
      },
    },
    session: {
      ...authSchemaOptions.session,
      additionalFields: sessionMfaField,
      ...SESSION_SETTINGS,
    },
    // README "Multi-factor authentication" (src/auth/second-factor.ts).
    // The security notices' hooks are a plugin's (below): its after hook runs after these.
    hooks: secondFactor.hooks,
    databaseHooks: secondFactor.databaseHooks,
    emailAndPassword: {
      enabled: true,
      requireEmailVerification: true,
      minPasswordLength: 8,
      maxPasswordLength: 128,
      revokeSessionsOnPasswordReset: true,
      // The reset link was read at the account's address: that proves it.
      onPasswordReset: async ({ user }, request) => {
        await proveEmail(user.id);
        account.passwordReset(user, request);
      },
      // The library's own scrypt and stored format, with bounded use of
      // libuv's thread pool and a constant-time compare (src/auth/password.ts).
      // Sign-in for an unknown email still hashes once, through the same hook.
      password: { hash: hashPassword, verify: verifyPassword },
      // No account enumeration by timing (docs/security.md "Credential changes"): a reset for an
      // unknown email sends nothing, so the mail for a known one must not hold
      // the answer either; and a sign-up for a taken email mails the owner, as
      // a new one mails its verification link, both before answering.
      sendResetPassword: async ({ user, url }) =>
        sendLater({ ...emails.resetPassword(user.email, url), kind: 'password_reset' }),
      onExistingUserSignUp: ({ user }) =>
        send({ ...emails.existingAccount(user.email, config.auth.appUrl), kind: 'account_notice' }),
    },
    emailVerification: {
      sendOnSignUp: true,
      autoSignInAfterVerification: true,
      expiresIn: 60 * 60,
      // Before the library marks the address verified and signs the prover in.
      beforeEmailVerification: async (user) => {
        await proveEmail(user.id);
      },
      sendVerificationEmail: ({ user, url }) => send({ ...emails.verification(user.email, url), kind: 'verification' }),
    },
    socialProviders: {
      // Each provider only when both its id and secret are set (docs/api.md "Sign-in").
      ...(config.oauth.google
        ? { google: { ...config.oauth.google, redirectURI: `${config.auth.url}${AUTH_BASE_PATH}/callback/google` } }
        : {}),
      ...(config.oauth.github
        ? { github: { ...config.oauth.github, redirectURI: `${config.auth.url}${AUTH_BASE_PATH}/callback/github` } }
        : {}),
    },
    plugins: [
      magicLink({
        expiresIn: 5 * 60,
        storeToken: 'hashed',
        sendMagicLink: ({ email, url }) => send({ ...emails.magicLink(email, url), kind: 'magic_link' }),
      }),
      organization({
        schema: organizationPluginSchema,
        // The plugin's own role checks let every member through; ours (the
        // organization gate, by permission strings) decide. Its owner rules
        // still apply to the `owner` role string we keep in step with roles.
        roles: pluginAccess.roles,
        organizationHooks: {
          // Awaited here, before the create call returns, in its transaction.
          afterCreateOrganization: async ({ organization: created, user }) => {
            await seedNewOrganization(db, { organizationId: created.id, creatorUserId: user.id });
          },
        },
        sendInvitationEmail: async ({ id, email, organization: org, inviter }) =>
          send({
            ...emails.invitation(email, `${config.auth.appUrl}/accept-invitation/${id}`, org.name, inviter.user.name),
            kind: 'invitation',
          }),
      }),
      ...secondFactorPlugins(config),
      // docs/sso.md "Sign-in": its endpoints create sessions as the library's own sign-ins do.
      ssoPlugin({ config, db, clock, logger, policy: ssoPolicy }),
      account.plugin,
    ],
    rateLimit: { enabled: false },
    // Errors that are not the library's own answers (a database that is down,
    // a driver error) propagate to our onError: 503 SERVICE_UNAVAILABLE or 500
    // in the contract's shape, never the library's bodiless 500.
    onAPIError: { throw: true },
    telemetry: { enabled: false },
    advanced: {
      // Explicit, never the library's default: left undefined, better-auth
      // turns its origin/CSRF checks OFF whenever process.env.NODE_ENV is
      // `test` or TEST is truthy (create-context: `isTest() ? true : false`).
      disableOriginCheck: false,
      disableCSRFCheck: false,
      database: authDatabaseAdvancedOptions,
      cookiePrefix: COOKIE_PREFIX,
      // `Secure` and the `__Secure-` prefix exactly when AUTH_URL is https.
      useSecureCookies: config.auth.secureCookies,
      defaultCookieAttributes: { httpOnly: true, sameSite: 'lax', secure: config.auth.secureCookies },
      ipAddress: { ipAddressHeaders: ['x-forwarded-for'] },
    },
    logger: {
      level: 'warn',
      log: (level, message, ...args) => {
        const fields = {
          message,
          ...(args.length
            ? { detail: args.map((arg) => (arg instanceof Error ? describeError(arg) : String(arg))) }
            : {}),
        };
        if (level === 'error') logger.error('auth.library', fields);
        else if (level === 'warn') logger.warn('auth.library', fields);
        else logger.debug('auth.library', fields);
      },
    },
  } satisfies BetterAuthOptions;
  return betterAuth(options);
}

export type Auth = ReturnType<typeof createAuth>;
