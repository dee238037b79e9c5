import { passkey } from '@better-auth/passkey';
import { createHMAC } from '@better-auth/utils/hmac';
import { createOTP } from '@better-auth/utils/otp';
import type { BetterAuthOptions, GenericEndpointContext } from 'better-auth';
import { APIError, createAuthMiddleware, getSessionFromCtx, isAPIError } from 'better-auth/api';
import { deleteSessionCookie } from 'better-auth/cookies';
import { generateRandomString, symmetricDecrypt } from 'better-auth/crypto';
import { twoFactor } from 'better-auth/plugins';
import type { Kysely } from 'kysely';
import type { Config } from '../config.js';
import type { DB } from '../db/database.js';

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

/** The plugin's cookie and record names (better-auth plugins/two-factor constant.mjs, index.mjs). */
const TWO_FACTOR_COOKIE = 'two_factor';
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

/** The session field the plugins' sessions are marked with (migrations/0007). */
export const sessionMfaField = {
  mfa: { type: 'boolean', required: false, input: false, fieldName: 'mfa' },
} as const;

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

/** The hooks and database hooks that complete the plugins (see the module comment). */
export function secondFactorHooks({ config, db }: { config: Config; db: Kysely<DB> }) {
  const hash = backupCodeHasher(config.auth.secret);

  const pendingUserId = async (ctx: HookContext): Promise<string | null> => {
    const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE);
    const identifier = await ctx.getSignedCookie(cookie.name, ctx.context.secret);
    if (!identifier) return null;
    return (await ctx.context.internalAdapter.findVerificationValue(identifier))?.value ?? null;
  };

  /** RFC 6238 §5.2: the step the code belongs to (window ±1, as the plugin verifies) must be above the last one used. */
  const refuseReplay = async (ctx: HookContext, userId: string, code: string) => {
    const row = await db
      .selectFrom('two_factors')
      .select(['id', 'secret'])
      .where('user_id', '=', userId)
      .executeTakeFirst();
    if (!row) return;
    const secret = await symmetricDecrypt({ key: ctx.context.secretConfig, data: row.secret });
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
      if (numUpdatedRows === 0n) throw APIError.from('UNAUTHORIZED', { code: 'INVALID_CODE', message: 'Invalid code' });
      return;
    }
    // No step matched: the plugin refuses the code and counts the failure.
  };

  const before = createAuthMiddleware(async (ctx) => {
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
          if (MULTI_FACTOR_PATHS.has(ctx.path)) return { data: { mfa: true } };
          if (REPLACING_PATHS.has(ctx.path)) {
            const current = ctx.context.session?.session as { mfa?: boolean } | undefined;
            return { data: { mfa: current?.mfa === true } };
          }
          if (HELD_BACK_PATHS.has(ctx.path) || ctx.path === PASSWORD_SIGN_IN) return;
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
        },
      },
    },
  };

  return { hooks: { before, after }, databaseHooks };
}
