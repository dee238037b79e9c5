import { passkey } from '@better-auth/passkey';
import { createHMAC } from '@better-auth/utils/hmac';
import { createOTP } from '@better-auth/utils/otp';
import type { BetterAuthOptions, GenericEndpointContext } from 'better-auth';
import { APIError, createAuthMiddleware, getSessionFromCtx, isAPIError } from 'better-auth/api';
import { deleteSessionCookie } from 'better-auth/cookies';
import { generateRandomString, symmetricDecrypt } from 'better-auth/crypto';
import { twoFactor } from 'better-auth/plugins';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import type { Clock } from '../shared/clock.js';
import type { Config } from '../shared/config.js';

/**
 * API.md "Multi-factor authentication": better-auth's twoFactor and passkey
 * plugins, plus what they leave out.
 *
 * - Every sign-in that creates a session passes the second factor. The
 *   plugin gates email and password; magic link, the OAuth callback, the
 *   verification link's auto sign-in and ID-token sign-in are held back here
 *   the same way (the new session deleted, its cookies expired, the plugin's
 *   own pending-sign-in cookie and records set), and any other path that
 *   would create a session for such a user is refused outright.
 * - A TOTP code is accepted once: a code of a time step at or below the last
 *   one accepted is a replay (RFC 6238 §5.2), checked with one conditional
 *   UPDATE so two requests with one code cannot both pass.
 * - Backup codes are stored as keyed hashes, never as the codes.
 * - A session records whether it is multi-factor (`sessions.mfa`), written by
 *   the INSERT that creates it.
 * - A session records when it proved every factor of its account
 *   (`sessions.step_up_at`, docs/security.md "Sensitive actions and step-up"),
 *   written by the same INSERT: a password sign-in of an account without
 *   two-factor, a passkey sign-in, the second factor completing a password
 *   sign-in, and a magic-link, OAuth or verification sign-in of an account
 *   without a password. Anything else (a magic link for an account that has
 *   a password, a path this file does not know) is not fresh.
 */

/** The paths that complete a second factor, or sign in with a passkey: their new session is multi-factor. */
const MULTI_FACTOR_PATHS = new Set([
  '/two-factor/verify-totp',
  '/two-factor/verify-backup-code',
  '/passkey/verify-authentication',
]);
/** Sessions created by these replace the caller's own and keep its mfa flag. */
const REPLACING_PATHS = new Set(['/change-password', '/two-factor/disable']);
/** Sign-in paths the plugin does not gate: their new session is held back for a user with two-factor. */
const HELD_BACK_PATHS = new Set(['/magic-link/verify', '/callback/:id', '/sign-in/social', '/verify-email']);
/** The plugin gates this one itself. */
const PASSWORD_SIGN_IN = '/sign-in/email';

/** A passkey proves every factor: possession and the user's verification. */
const PASSKEY_SIGN_IN = '/passkey/verify-authentication';
const COMPLETING_PATHS = new Set(['/two-factor/verify-totp', '/two-factor/verify-backup-code']);

/** The plugin's cookie and record names (better-auth plugins/two-factor constant.mjs, index.mjs). */
const TWO_FACTOR_COOKIE = 'two_factor';
const PENDING_PREFIX = '2fa-';
const ATTEMPTS_PREFIX = '2fa-attempts-';
/**
 * Beside a pending sign-in's record: that its first factor was every first
 * factor of the account (the password, or a link or provider for an account
 * without one). Consumed by the second factor that completes it.
 */
const PROOF_PREFIX = '2fa-proof-';
const PENDING_SIGN_IN_SECONDS = 600;
const TOTP_PERIOD = 30;
const HASHED = 'h1:';

const twoFactorSchema = {
  user: { fields: { twoFactorEnabled: 'two_factor_enabled' } },
  twoFactor: {
    modelName: 'two_factors',
    fields: {
      secret: 'secret',
      backupCodes: 'backup_codes',
      userId: 'user_id',
      verified: 'verified',
      failedVerificationCount: 'failed_verification_count',
      lockedUntil: 'locked_until',
    },
  },
} as const;

const passkeySchema = {
  passkey: {
    modelName: 'passkeys',
    fields: {
      name: 'name',
      publicKey: 'public_key',
      userId: 'user_id',
      credentialID: 'credential_id',
      counter: 'counter',
      deviceType: 'device_type',
      backedUp: 'backed_up',
      transports: 'transports',
      createdAt: 'created_at',
      aaguid: 'aaguid',
    },
  },
} as const;

/** The session fields the sign-in paths mark sessions with (migrations/0007, 0009); never from a request. */
export const sessionMfaField = {
  mfa: { type: 'boolean', required: false, input: false, fieldName: 'mfa' },
  stepUpAt: { type: 'date', required: false, input: false, returned: false, fieldName: 'step_up_at' },
} as const;

/** Whether the account has a password (a credential account holding one). */
export async function hasPassword(db: Kysely<Database>, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('accounts')
    .select('id')
    .where('user_id', '=', userId)
    .where('provider_id', '=', 'credential')
    .where('password', 'is not', null)
    .executeTakeFirst();
  return row !== undefined;
}

/** The key the plugin encrypts TOTP secrets with (`ctx.context.secretConfig`). */
export type SecretKey = Parameters<typeof symmetricDecrypt>[0]['key'];

/**
 * A TOTP code of the user's authenticator, as the plugin verifies it (RFC
 * 6238, 6 digits, 30 s, window ±1), accepted once: a code of a time step at
 * or below the last one accepted is a replay (§5.2), refused with one
 * conditional UPDATE so two requests with one code cannot both pass.
 */
export async function acceptTotpCode(
  db: Kysely<Database>,
  { key, userId, code }: { key: SecretKey; userId: string; code: string },
): Promise<'accepted' | 'replayed' | 'wrong'> {
  const row = await db
    .selectFrom('two_factors')
    .select(['id', 'secret'])
    .where('user_id', '=', userId)
    .executeTakeFirst();
  if (!row) return 'wrong';
  const secret = await symmetricDecrypt({ key, data: row.secret });
  const otp = createOTP(secret, { digits: 6, period: TOTP_PERIOD });
  const now = Math.floor(Date.now() / 1000 / TOTP_PERIOD);
  for (const step of [now - 1, now, now + 1]) {
    if ((await otp.hotp(step)) !== code) continue;
    const { numUpdatedRows } = await db
      .updateTable('two_factors')
      .set({ last_totp_step: step })
      .where('id', '=', row.id)
      .where((eb) => eb.or([eb('last_totp_step', 'is', null), eb('last_totp_step', '<', String(step))]))
      .executeTakeFirst();
    return numUpdatedRows === 0n ? 'replayed' : 'accepted';
  }
  return 'wrong';
}

/**
 * The plugin's account lockout (better-auth twoFactor `accountLockout`
 * defaults): ten failed codes in a row, across sign-ins and step-ups, lock
 * the account's codes for 15 minutes (NIST SP 800-63B §5.2.2).
 */
export const CODE_LOCKOUT = { maxFailedAttempts: 10, durationSeconds: 900 } as const;

/** Whether the account's codes are locked now (a lock written by the plugin or by `recordCodeOutcome`). */
export async function codesLocked(db: Kysely<Database>, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('two_factors')
    .select('locked_until')
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Boolean(row?.locked_until && new Date(row.locked_until).getTime() > Date.now());
}

/**
 * Counts a code tried outside the plugin (step-up) in the plugin's own
 * lockout: a failure adds one, atomically, and the tenth in a row locks the
 * codes; a success clears the count, as the plugin does. The plugin writes
 * the lock by the real time, so this does too.
 */
export async function recordCodeOutcome(db: Kysely<Database>, userId: string, accepted: boolean): Promise<void> {
  if (accepted) {
    await db
      .updateTable('two_factors')
      .set({ failed_verification_count: 0, locked_until: null })
      .where('user_id', '=', userId)
      .execute();
    return;
  }
  const lockUntil = new Date(Date.now() + CODE_LOCKOUT.durationSeconds * 1000);
  await db
    .updateTable('two_factors')
    .set((eb) => ({
      failed_verification_count: eb('failed_verification_count', '+', 1),
      locked_until: eb
        .case()
        .when('failed_verification_count', '>=', CODE_LOCKOUT.maxFailedAttempts - 1)
        .then(lockUntil)
        .else(eb.ref('locked_until'))
        .end(),
    }))
    .where('user_id', '=', userId)
    .execute();
}

/** Spends one of the user's backup codes: true when it was unspent (one conditional UPDATE, so once only). */
export async function consumeBackupCode(
  db: Kysely<Database>,
  { secret, userId, code }: { secret: string; userId: string; code: string },
): Promise<boolean> {
  const row = await db
    .selectFrom('two_factors')
    .select(['id', 'backup_codes'])
    .where('user_id', '=', userId)
    .executeTakeFirst();
  if (!row?.backup_codes) return false;
  let stored: unknown;
  try {
    stored = JSON.parse(row.backup_codes);
  } catch {
    return false;
  }
  if (!Array.isArray(stored)) return false;
  const hashed = await backupCodeHasher(secret)(code);
  if (!stored.includes(hashed)) return false;
  const { numUpdatedRows } = await db
    .updateTable('two_factors')
    .set({ backup_codes: JSON.stringify(stored.filter((entry) => entry !== hashed)) })
    .where('id', '=', row.id)
    .where('backup_codes', '=', row.backup_codes)
    .executeTakeFirst();
  return numUpdatedRows > 0n;
}

/** A backup code's stored form: HMAC-SHA-256 under AUTH_SECRET (codes carry ~60 bits, so no slow hash is needed). */
function backupCodeHasher(secret: string) {
  const hmac = createHMAC('SHA-256', 'base64urlnopad');
  return async (code: string) => `${HASHED}${await hmac.sign(secret, code)}`;
}

/** For storage: the plugin writes the remaining codes back after a use, already hashed. */
function backupCodeStore(secret: string) {
  const hash = backupCodeHasher(secret);
  return async (code: string) => (code.startsWith(HASHED) ? code : hash(code));
}

export function secondFactorPlugins(config: Config) {
  const store = backupCodeStore(config.auth.secret);
  return [
    twoFactor({
      issuer: config.mfa.totpIssuer,
      // get-totp-uri reads the issuer here, enable reads the one above (the
      // option's type omits it, the code reads it: plugins/two-factor/totp).
      totpOptions: { issuer: config.mfa.totpIssuer } as { period?: number },
      schema: twoFactorSchema,
      backupCodeOptions: {
        storeBackupCodes: {
          encrypt: async (json: string) => JSON.stringify(await Promise.all((JSON.parse(json) as string[]).map(store))),
          decrypt: async (stored: string) => stored,
        },
      },
    }),
    passkey({
      rpID: config.mfa.passkey.rpId,
      rpName: config.mfa.passkey.rpName,
      // Never the request's Origin header: ceremonies come from the app.
      origin: config.mfa.passkey.origin,
      authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
      schema: passkeySchema,
      authentication: {
        // A passkey session is multi-factor: possession and the user's verification (PIN, biometrics).
        afterVerification: async ({ verification }) => {
          if (!verification.authenticationInfo.userVerified)
            throw APIError.from('UNAUTHORIZED', {
              code: 'USER_VERIFICATION_REQUIRED',
              message: 'The authenticator must verify the user',
            });
        },
      },
    }),
  ];
}

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];

/** The tokens of sessions created during one endpoint call (the endpoint and its hooks share `ctx.context`). */
const createdDuringCall = new WeakMap<object, Set<string>>();
/** The marks of the session a replacing call replaces, read before the call ends it (change-password deletes it first). */
const replacedDuringCall = new WeakMap<object, { mfa: boolean; step_up_at: Date | null }>();

/** The hooks and database hooks that complete the plugins (see the module comment). */
export function secondFactorHooks({
  config,
  db,
  clock = () => new Date(),
}: {
  config: Config;
  db: Kysely<Database>;
  /** Dates the proofs; the guard judges freshness by the same clock. */
  clock?: Clock;
}) {
  const hash = backupCodeHasher(config.auth.secret);

  /** The identifier of the request's pending sign-in (the plugin's signed cookie), if any. */
  const pendingIdentifier = async (ctx: Pick<HookContext, 'context' | 'getSignedCookie'>): Promise<string | null> => {
    const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE);
    return (await ctx.getSignedCookie(cookie.name, ctx.context.secret)) || null;
  };

  const pendingUserId = async (ctx: HookContext): Promise<string | null> => {
    const identifier = await pendingIdentifier(ctx);
    if (!identifier) return null;
    return (await ctx.context.internalAdapter.findVerificationValue(identifier))?.value ?? null;
  };

  /** RFC 6238 §5.2: the step the code belongs to must be above the last one used. */
  const refuseReplay = async (ctx: HookContext, userId: string, code: string) => {
    const verdict = await acceptTotpCode(db, { key: ctx.context.secretConfig, userId, code });
    if (verdict === 'replayed') throw APIError.from('UNAUTHORIZED', { code: 'INVALID_CODE', message: 'Invalid code' });
    // Wrong: the plugin refuses the code and counts the failure.
  };

  /** Takes the proof beside the pending sign-in this request completes: true when its first factor was all of them. */
  const takeFirstFactorProof = async (ctx: GenericEndpointContext, userId: string): Promise<boolean> => {
    const identifier = await pendingIdentifier(ctx);
    if (!identifier) return false;
    const taken = await db
      .deleteFrom('verifications')
      .where('identifier', '=', `${PROOF_PREFIX}${identifier}`)
      .where('value', '=', userId)
      .where('expires_at', '>', new Date())
      .returning('id')
      .executeTakeFirst();
    return taken !== undefined;
  };

  /** The step-up proof a new session carries, if any (see the module comment). */
  const proofOf = async (path: string, userId: string, ctx: GenericEndpointContext): Promise<Date | null> => {
    if (path === PASSKEY_SIGN_IN) return clock();
    if (path === PASSWORD_SIGN_IN) {
      // A two-factor user's session is held back here (no trusted devices): not yet.
      const user = await db
        .selectFrom('users')
        .select('two_factor_enabled')
        .where('id', '=', userId)
        .executeTakeFirst();
      return user && !user.two_factor_enabled ? clock() : null;
    }
    if (COMPLETING_PATHS.has(path)) return (await takeFirstFactorProof(ctx, userId)) ? clock() : null;
    if (HELD_BACK_PATHS.has(path)) return (await hasPassword(db, userId)) ? null : clock();
    return null;
  };

  const before = createAuthMiddleware(async (ctx) => {
    if (REPLACING_PATHS.has(ctx.path)) {
      const current = await getSessionFromCtx(ctx);
      const marks = current
        ? await db
            .selectFrom('sessions')
            .select(['mfa', 'step_up_at'])
            .where('id', '=', current.session.id)
            .executeTakeFirst()
        : undefined;
      if (marks) replacedDuringCall.set(ctx.context, marks);
      return;
    }
    if (ctx.path !== '/two-factor/verify-totp' && ctx.path !== '/two-factor/verify-backup-code') return;
    const code = typeof ctx.body?.code === 'string' ? ctx.body.code : null;
    if (code === null) return;
    const session = await getSessionFromCtx(ctx);
    if (ctx.path === '/two-factor/verify-backup-code') {
      // A backup code completes a pending sign-in; with a session it would be
      // a code oracle that no lockout counts.
      if (session)
        throw APIError.from('BAD_REQUEST', {
          code: 'NO_PENDING_SIGN_IN',
          message: 'Backup codes complete a sign-in; this request is already signed in',
        });
      return { context: { body: { ...ctx.body, code: await hash(code) } } };
    }
    // With a session, verify-totp completes enabling; once enabled, it would
    // be an oracle that no lockout counts.
    if (session?.user.twoFactorEnabled)
      throw APIError.from('BAD_REQUEST', { code: 'TOTP_ALREADY_ENABLED', message: 'TOTP is already enabled' });
    const userId = session?.user.id ?? (await pendingUserId(ctx));
    if (userId) await refuseReplay(ctx, userId, code);
  });

  /** Holds back the session a sign-in path created, exactly as the plugin does for email and password. */
  const after = createAuthMiddleware(async (ctx) => {
    if (!HELD_BACK_PATHS.has(ctx.path)) return;
    const created = ctx.context.newSession;
    if (!created?.user.twoFactorEnabled || !createdDuringCall.get(ctx.context)?.has(created.session.token)) return;
    deleteSessionCookie(ctx, true);
    await ctx.context.internalAdapter.deleteSession(created.session.token);
    ctx.context.setNewSession(null);
    const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE, { maxAge: PENDING_SIGN_IN_SECONDS });
    const identifier = `2fa-${generateRandomString(20)}`;
    const expiresAt = new Date(Date.now() + PENDING_SIGN_IN_SECONDS * 1000);
    await ctx.context.internalAdapter.createVerificationValue({ value: created.user.id, identifier, expiresAt });
    await ctx.context.internalAdapter.createVerificationValue({
      value: '0',
      identifier: `2fa-attempts-${identifier}`,
      expiresAt,
    });
    await ctx.setSignedCookie(cookie.name, identifier, ctx.context.secret, cookie.attributes);
    const returned = ctx.context.returned;
    const location =
      isAPIError(returned) && returned.statusCode === 302 ? ctx.context.responseHeaders?.get('location') : null;
    if (location) {
      // A redirect stays a redirect (the browser is navigating): to the same
      // place, told that a second factor is due.
      const url = new URL(location, ctx.context.baseURL);
      url.searchParams.set('twoFactorRedirect', 'true');
      ctx.setHeader('location', url.toString());
      return;
    }
    return ctx.json({ twoFactorRedirect: true, twoFactorMethods: ['totp'] });
  });

  const databaseHooks: BetterAuthOptions['databaseHooks'] = {
    session: {
      create: {
        before: async (session, ctx: GenericEndpointContext | null) => {
          // Server-side calls with no request (none in the service today) are trusted.
          if (!ctx?.path) return;
          const tokens = createdDuringCall.get(ctx.context) ?? new Set<string>();
          createdDuringCall.set(ctx.context, tokens.add(session.token));
          if (REPLACING_PATHS.has(ctx.path)) {
            // The replaced session's marks, as stored when the call began.
            const replaced = replacedDuringCall.get(ctx.context);
            return { data: { mfa: replaced?.mfa === true, stepUpAt: replaced?.step_up_at ?? null } };
          }
          // Completing two-factor enrollment replaces the caller's session and keeps its proof.
          if (COMPLETING_PATHS.has(ctx.path) && ctx.context.session) return { data: { mfa: true } };
          const stepUpAt = await proofOf(ctx.path, session.userId, ctx);
          if (MULTI_FACTOR_PATHS.has(ctx.path)) return { data: { mfa: true, stepUpAt } };
          if (HELD_BACK_PATHS.has(ctx.path) || ctx.path === PASSWORD_SIGN_IN) return { data: { stepUpAt } };
          // Fail closed: a path that starts creating sessions after an upgrade
          // must not hand a two-factor user a session without the factor.
          const user = await db
            .selectFrom('users')
            .select('two_factor_enabled')
            .where('id', '=', session.userId)
            .executeTakeFirst();
          if (user?.two_factor_enabled)
            throw APIError.from('FORBIDDEN', {
              code: 'TWO_FACTOR_REQUIRED',
              message: 'This sign-in path cannot complete a second factor',
            });
          // Nor is its session fresh: a path not listed here proves nothing.
          return { data: { stepUpAt: null } };
        },
      },
    },
    verification: {
      create: {
        /**
         * A pending sign-in's record (the plugin's for a password, ours for
         * the held-back paths): when its first factor was every first factor
         * of the account, a proof record beside it, which the completing
         * second factor takes (the plugin creates that session itself).
         */
        before: async (verification, ctx: GenericEndpointContext | null) => {
          const { identifier, value, expiresAt } = verification as {
            identifier: string;
            value: string;
            expiresAt: Date;
          };
          if (!ctx?.path || !identifier.startsWith(PENDING_PREFIX)) return;
          if (identifier.startsWith(ATTEMPTS_PREFIX) || identifier.startsWith(PROOF_PREFIX)) return;
          const proved =
            ctx.path === PASSWORD_SIGN_IN || (HELD_BACK_PATHS.has(ctx.path) && !(await hasPassword(db, value)));
          if (!proved) return;
          const now = new Date();
          await db
            .insertInto('verifications')
            .values({
              identifier: `${PROOF_PREFIX}${identifier}`,
              value,
              expires_at: expiresAt,
              created_at: now,
              updated_at: now,
            })
            .execute();
        },
      },
    },
  };

  return { hooks: { before, after }, databaseHooks };
}
