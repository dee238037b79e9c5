import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Auth } from '../auth/auth.js';
import { verifyPassword } from '../auth/password.js';
import { acceptTotpCode, codesLocked, consumeBackupCode, recordCodeOutcome } from '../auth/second-factor.js';
import type { Database } from '../db/database.js';
import { twoFactorEnabled } from '../db/queries/session-marks.js';
import { markSteppedUp, passwordHashOf } from '../db/queries/step-up.js';
import { access, loadSession, sessionOf } from '../middleware/guard.js';
import { withAccountAttempt } from '../middleware/rate-limit.js';
import type { RateLimitStore } from '../platform/rate-limit-store.js';
import { createRouter, defineRoute, errorResponse, jsonContent } from '../router.js';
import type { Config } from '../shared/config.js';
import { ApiError } from '../shared/errors.js';
import { PLATFORM_ROLES } from '../shared/permissions.js';
import type { Clock, EnrichedSession } from '../shared/types.js';

export const EnrichedSessionSchema = z
  .object({
    user: z.object({
      id: z.uuid(),
      email: z.string(),
      name: z.string(),
      role: z.enum(PLATFORM_ROLES),
      emailVerified: z.boolean(),
      twoFactorEnabled: z.boolean(),
    }),
    session: z.object({
      id: z.uuid(),
      activeOrganizationId: z.uuid().nullable(),
      expiresAt: z.iso.datetime(),
      /** Created by a passkey, or completed a second factor. */
      mfa: z.boolean(),
      stepUpUntil: z.iso.datetime().openapi({
        description:
          'When this session stops counting as recently authenticated for sensitive actions: its last proof of ' +
          'every factor plus STEP_UP_MAX_AGE; in the past once stale (POST /api/session/step-up renews it)',
      }),
    }),
    permissions: z.array(z.string()),
  })
  .openapi('EnrichedSession');

const route = defineRoute({
  method: 'get',
  path: '/api/session',
  access: access.optional(),
  summary: 'The enriched session of the caller, or null when signed out',
  responses: {
    200: {
      description: 'The enriched session, or null',
      content: { 'application/json': { schema: EnrichedSessionSchema.nullable() } },
    },
  },
});

/** A factor as typed; anything longer is no factor of ours. */
const factor = (max: number) => z.string().min(1).max(max);

const StepUpSchema = z
  .object({
    password: factor(1024).optional(),
    code: factor(64).optional(),
    backupCode: factor(64).optional(),
  })
  .strict()
  .openapi('StepUp');

const StepUpResultSchema = z.object({ stepUpUntil: z.iso.datetime() }).openapi('StepUpResult');

const stepUpRoute = defineRoute({
  method: 'post',
  path: '/api/session/step-up',
  access: access.session({ allowScheduledForDeletion: true }),
  summary: 'Prove every factor of your account again, for sensitive actions',
  description:
    'The password (an account without one signs in again instead) and, when two-factor is on, a TOTP code or ' +
    'one backup code (spent). Any missing or wrong factor answers 401 INVALID_CREDENTIALS. In the auth ' +
    'rate-limit tier; a refused attempt also counts against the account, as a wrong sign-in password does.',
  request: { body: { content: { 'application/json': { schema: StepUpSchema } } } },
  responses: {
    200: jsonContent(StepUpResultSchema, 'This session is fresh until stepUpUntil'),
    401: errorResponse(401, [
      ['UNAUTHORIZED', 'no valid session'],
      ['INVALID_CREDENTIALS', 'a factor missing or wrong'],
    ]),
  },
});

interface Deps {
  auth: Auth;
  db: Kysely<Database>;
  config: Config;
  store: RateLimitStore;
  clock: Clock;
}

/**
 * Whether the body proves every factor of the session's account: the
 * password, and a TOTP code or a backup code when two-factor is on (nothing
 * more: a code for an account without two-factor proves nothing). The
 * password is checked first; a code is spent only behind the right password.
 * Null when it does not; else whether a second factor was among them.
 */
async function provedFactors(
  { auth, db, config }: Deps,
  session: EnrichedSession,
  body: z.infer<typeof StepUpSchema>,
): Promise<{ secondFactor: boolean } | null> {
  const userId = session.user.id;
  const hash = await passwordHashOf(db, userId);
  if (!hash || body.password === undefined) return null;
  if (!(await verifyPassword({ hash, password: body.password }))) return null;

  // Read now, not from the session: two-factor may have been turned on or off since it was resolved.
  const enabled = await twoFactorEnabled(db, userId);
  if (enabled === undefined) return null;
  const codes = [body.code, body.backupCode].filter((code) => code !== undefined);
  if (!enabled) return codes.length === 0 ? { secondFactor: false } : null;
  if (codes.length !== 1) return null;
  // The plugin's lockout of this account's codes holds here too, and counts what is tried here.
  if (await codesLocked(db, userId)) return null;
  const accepted =
    body.code !== undefined
      ? (await acceptTotpCode(db, { key: (await auth.$context).secretConfig, userId, code: body.code })) === 'accepted'
      : await consumeBackupCode(db, { secret: config.auth.secret, userId, code: body.backupCode! });
  await recordCodeOutcome(db, userId, accepted);
  return accepted ? { secondFactor: true } : null;
}

/**
 * docs/api.md "Sessions": GET /api/session (optional-auth; allowlisted for accounts scheduled
 * for deletion), and POST /api/session/step-up (docs/security.md "Sensitive
 * actions and step-up").
 */
export function sessionRoutes(deps: Deps) {
  const { db, config, store, clock } = deps;
  return createRouter()
    .openapi(route, async (c) => {
      const session = await loadSession(c);
      // An API key is not a session: it is answered as signed out here.
      if (!session || session.apiKey) return c.json(null, 200);
      const { user, session: current, permissions } = session;
      return c.json({ user, session: current, permissions }, 200);
    })
    .openapi(stepUpRoute, async (c) => {
      const session = sessionOf(c);
      const body = c.req.valid('json');
      // The budget wrong sign-in passwords spend for this account.
      const prove = () => provedFactors(deps, session, body);
      const proved = config.rateLimit.enabled
        ? await withAccountAttempt(
            { config: config.rateLimit, store, clock, logger: c.get('logger') },
            session.user.email,
            prove,
            (result) => result === null,
          )
        : await prove();
      // One answer for every failure: which factor was wrong is not said.
      if (!proved) throw new ApiError('INVALID_CREDENTIALS', 'Invalid credentials');
      const at = clock();
      // A second factor proved here makes the session multi-factor too.
      const marked = await markSteppedUp(db, {
        sessionId: session.session.id,
        userId: session.user.id,
        at,
        secondFactor: proved.secondFactor,
      });
      if (!marked) throw new ApiError('UNAUTHORIZED', 'Authentication required');
      return c.json({ stepUpUntil: new Date(at.getTime() + config.stepUp.maxAgeSeconds * 1000).toISOString() }, 200);
    });
}
