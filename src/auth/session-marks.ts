import type { BetterAuthOptions, GenericEndpointContext } from 'better-auth';
import { APIError } from 'better-auth/api';
import type { Kysely } from 'kysely';
import { runInTransaction } from '../db/ambient.js';
import type { Database } from '../db/database.js';
import {
  hasPassword,
  insertVerification,
  takeVerification,
  takeVerificationValue,
  twoFactorEnabled,
} from '../db/queries/session-marks.js';
import { connectionById } from '../db/queries/sso-flows.js';
import type { Clock } from '../shared/clock.js';

/**
 * How a library path that creates sessions marks them (`sessions.mfa`,
 * `sessions.step_up_at`), declared by each library route's row:
 *
 * - `password`: email and password sign-in, which the twoFactor plugin gates itself;
 * - `held-back`: a sign-in the plugin does not gate (magic link, OAuth, the
 *   verification link), held back here for a user with two-factor;
 * - `second-factor`: a code completing a pending sign-in (or enabling two-factor): multi-factor;
 * - `passkey`: a passkey sign-in, multi-factor (possession and the user's verification);
 * - `replacing`: the call replaces the caller's session, which keeps its marks;
 * - `sso`: a single sign-on callback (docs/sso.md "Sign-in"): multi-factor
 *   when the connection says the IdP checks a second factor (`mfa_at_idp`),
 *   else held back for a user with two-factor as `held-back` is.
 *
 * Any other path that creates a session is refused for a user with
 * two-factor, and its session is never fresh (fail closed).
 */
export type SessionCreation = 'password' | 'held-back' | 'second-factor' | 'passkey' | 'replacing' | 'sso';

/** Library path (as the library names it, `:param` included) -> how its new sessions are marked. */
export type SessionPaths = ReadonlyMap<string, SessionCreation>;

/** The plugin's cookie and record names (better-auth plugins/two-factor constant.mjs, index.mjs). */
export const TWO_FACTOR_COOKIE = 'two_factor';
export const PENDING_PREFIX = '2fa-';
export const ATTEMPTS_PREFIX = '2fa-attempts-';
/**
 * Beside a pending sign-in's record: that its first factor was every first
 * factor of the account (the password, or a link or provider for an account
 * without one). Consumed by the second factor that completes it.
 */
const PROOF_PREFIX = '2fa-proof-';

type EndpointContext = Pick<GenericEndpointContext, 'context' | 'getSignedCookie'>;

/** The tokens of sessions created during one endpoint call (the endpoint and its hooks share `ctx.context`). */
export const createdDuringCall = new WeakMap<object, Set<string>>();
/** What the single sign-on endpoint tells the hooks about the connection that signs the user in. */
export const ssoSignInDuringCall = new WeakMap<
  object,
  { mfaAtIdp: boolean; connectionId: string; organizationId: string }
>();
/**
 * Beside a single sign-on held back for the account's own second factor:
 * the connection and organization of the session it would have been, which
 * the completing second factor's session takes (it is still the connection's
 * session: requireSso counts it, disabling the connection ends it).
 */
export const SSO_HELD_PREFIX = 'sso-held-';
/** The marks of the session a replacing call replaces, read before the call ends it (change-password deletes it first). */
export const replacedDuringCall = new WeakMap<object, { mfa: boolean; step_up_at: Date | null }>();

/** The identifier of the request's pending sign-in (the plugin's signed cookie), if any. */
export async function pendingIdentifier(ctx: EndpointContext): Promise<string | null> {
  const cookie = ctx.context.createAuthCookie(TWO_FACTOR_COOKIE);
  return (await ctx.getSignedCookie(cookie.name, ctx.context.secret)) || null;
}

/** The database hooks that mark each new session as its path declares (see `SessionCreation`). */
export function sessionMarkHooks({
  db,
  clock,
  sessionPaths,
}: {
  db: Kysely<Database>;
  clock: Clock;
  sessionPaths: SessionPaths;
}): NonNullable<BetterAuthOptions['databaseHooks']> {
  /** Takes the proof beside the pending sign-in this request completes: true when its first factor was all of them. */
  const takeFirstFactorProof = async (ctx: GenericEndpointContext, userId: string): Promise<boolean> => {
    const identifier = await pendingIdentifier(ctx);
    return identifier ? takeVerification(db, `${PROOF_PREFIX}${identifier}`, userId) : false;
  };

  /** What a held-back single sign-on left for the session that completes it (SSO_HELD_PREFIX), taken once. */
  const takeHeldSso = async (
    ctx: GenericEndpointContext,
    userId: string,
  ): Promise<{ activeOrganizationId?: string; ssoConnectionId?: string }> => {
    const identifier = await pendingIdentifier(ctx);
    const held = identifier ? await takeVerificationValue(db, `${SSO_HELD_PREFIX}${identifier}`) : null;
    if (!held) return {};
    const { userId: heldFor, connectionId, organizationId } = JSON.parse(held) as Record<string, string>;
    if (heldFor !== userId) return {};
    // Disabled or deleted meanwhile: its sessions have ended, and this one is never made.
    const connection = await runInTransaction(db, (trx) => connectionById(trx, connectionId!));
    if (!connection?.enabled)
      throw APIError.from('FORBIDDEN', {
        code: 'SSO_CONNECTION_DISABLED',
        message: 'The single sign-on connection of this sign-in is disabled',
      });
    return { activeOrganizationId: organizationId, ssoConnectionId: connectionId };
  };

  /** The step-up proof a new session carries, if any (src/auth/second-factor.ts). */
  const proofOf = async (kind: SessionCreation, userId: string, ctx: GenericEndpointContext): Promise<Date | null> => {
    if (kind === 'passkey') return clock();
    // A two-factor user's session is held back here (no trusted devices): not yet.
    if (kind === 'password') {
      const enabled = await twoFactorEnabled(db, userId);
      return enabled !== undefined && !enabled ? clock() : null;
    }
    if (kind === 'second-factor') return (await takeFirstFactorProof(ctx, userId)) ? clock() : null;
    if (kind === 'held-back') return (await hasPassword(db, userId)) ? null : clock();
    if (kind === 'sso') {
      // The IdP's second factor proves every factor; else the sign-in is every factor of an account with no other.
      if (ssoSignInDuringCall.get(ctx.context)?.mfaAtIdp) return clock();
      return (await hasPassword(db, userId)) || (await twoFactorEnabled(db, userId)) ? null : clock();
    }
    return null;
  };

  return {
    session: {
      create: {
        before: async (session, ctx: GenericEndpointContext | null) => {
          // Server-side calls with no request (none in the service today) are trusted.
          if (!ctx?.path) return;
          const tokens = createdDuringCall.get(ctx.context) ?? new Set<string>();
          createdDuringCall.set(ctx.context, tokens.add(session.token));
          const kind = sessionPaths.get(ctx.path);
          if (kind === 'replacing') {
            // The replaced session's marks, as stored when the call began.
            const replaced = replacedDuringCall.get(ctx.context);
            return { data: { mfa: replaced?.mfa === true, stepUpAt: replaced?.step_up_at ?? null } };
          }
          // Completing two-factor enrollment replaces the caller's session and keeps its proof.
          if (kind === 'second-factor' && ctx.context.session) return { data: { mfa: true } };
          if (kind) {
            const carried = kind === 'second-factor' ? await takeHeldSso(ctx, session.userId) : {};
            const stepUpAt = await proofOf(kind, session.userId, ctx);
            const multiFactor =
              kind === 'second-factor' ||
              kind === 'passkey' ||
              (kind === 'sso' && ssoSignInDuringCall.get(ctx.context)?.mfaAtIdp === true);
            return { data: multiFactor ? { ...carried, mfa: true, stepUpAt } : { ...carried, stepUpAt } };
          }
          // Fail closed: a path that starts creating sessions after an upgrade
          // must not hand a two-factor user a session without the factor.
          if (await twoFactorEnabled(db, session.userId))
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
          const kind = sessionPaths.get(ctx.path);
          const heldBack = kind === 'held-back' || kind === 'sso';
          const proved = kind === 'password' || (heldBack && !(await hasPassword(db, value)));
          if (!proved) return;
          await insertVerification(db, { identifier: `${PROOF_PREFIX}${identifier}`, value, expiresAt });
        },
      },
    },
  };
}
