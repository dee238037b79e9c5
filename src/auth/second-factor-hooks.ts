import type { createAuthMiddleware as CreateAuthMiddleware } from 'better-auth/api';
import { APIError, createAuthMiddleware, getSessionFromCtx, isAPIError } from 'better-auth/api';
import { deleteSessionCookie } from 'better-auth/cookies';
import { generateRandomString } from 'better-auth/crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { insertVerification, sessionMarksOf } from '../db/queries/session-marks.js';
import type { Clock } from '../shared/clock.js';
import type { Config } from '../shared/config.js';
import { acceptTotpCode, backupCodeHasher } from './second-factor-codes.js';
import {
  createdDuringCall,
  PENDING_PREFIX,
  pendingIdentifier,
  replacedDuringCall,
  type SessionPaths,
  SSO_HELD_PREFIX,
  sessionMarkHooks,
  ssoSignInDuringCall,
  TWO_FACTOR_COOKIE,
} from './session-marks.js';

const PENDING_SIGN_IN_SECONDS = 600;

type HookContext = Parameters<Parameters<typeof CreateAuthMiddleware>[0]>[0];

/** The hooks and database hooks that complete the plugins (src/auth/second-factor.ts). */
export function secondFactorHooks({
  config,
  db,
  clock = () => new Date(),
  sessionPaths,
}: {
  config: Config;
  db: Kysely<Database>;
  /** Dates the proofs; the guard judges freshness by the same clock. */
  clock?: Clock;
  /** How each library path marks the sessions it creates (declared by the library routes' rows). */
  sessionPaths: SessionPaths;
}) {
  const hash = backupCodeHasher(config.auth.secret);

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

  const before = createAuthMiddleware(async (ctx) => {
    if (sessionPaths.get(ctx.path) === 'replacing') {
      const current = await getSessionFromCtx(ctx);
      const marks = current ? await sessionMarksOf(db, current.session.id) : undefined;
      if (marks) replacedDuringCall.set(ctx.context, marks);
      return;
    }
    // The twoFactor plugin's own code endpoints.
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
    const kind = sessionPaths.get(ctx.path);
    if (kind !== 'held-back' && kind !== 'sso') return;
    // A connection whose IdP checks a second factor signs the user in whole.
    if (kind === 'sso' && ssoSignInDuringCall.get(ctx.context)?.mfaAtIdp) return;
    const created = ctx.context.newSession;
    if (!created?.user.twoFactorEnabled || !createdDuringCall.get(ctx.context)?.has(created.session.token)) return;
    deleteSessionCookie(ctx, true);
    await ctx.context.internalAdapter.deleteSession(created.session.token);
    ctx.context.setNewSession(null);
    const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE, { maxAge: PENDING_SIGN_IN_SECONDS });
    const identifier = `${PENDING_PREFIX}${generateRandomString(20)}`;
    const expiresAt = new Date(Date.now() + PENDING_SIGN_IN_SECONDS * 1000);
    await ctx.context.internalAdapter.createVerificationValue({ value: created.user.id, identifier, expiresAt });
    await ctx.context.internalAdapter.createVerificationValue({
      value: '0',
      identifier: `2fa-attempts-${identifier}`,
      expiresAt,
    });
    const sso = kind === 'sso' ? ssoSignInDuringCall.get(ctx.context) : undefined;
    if (sso) {
      const { connectionId, organizationId } = sso;
      const value = JSON.stringify({ userId: created.user.id, connectionId, organizationId });
      await insertVerification(db, { identifier: `${SSO_HELD_PREFIX}${identifier}`, value, expiresAt });
    }
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

  return { hooks: { before, after }, databaseHooks: sessionMarkHooks({ db, clock, sessionPaths }) };
}
