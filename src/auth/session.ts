import type { Kysely } from 'kysely';
import type { DatabaseHandle } from '../db/client.js';
import type { Database } from '../db/database.js';
import { purgeAfter } from '../db/queries/accounts.js';
import {
  loadSessionState,
  loadSessionStateByToken,
  type SessionByTokenRow,
  type SessionStateRow,
} from '../db/queries/session-state.js';
import { recordSsoBypass } from '../db/queries/sso-bypasses.js';
import type { Config } from '../shared/config.js';
import type { Clock, SessionResolver } from '../shared/types.js';
import { type Auth, SESSION_SETTINGS } from './auth.js';
import { createCookieCacheVerifier, createSessionTokenReader } from './cookie-cache.js';
import { createSessionStateCache, SESSION_STATE_CHANNEL, type SessionStateCache } from './session-state-cache.js';

/**
 * docs/security.md "Sensitive actions and step-up": a session is fresh while
 * `now` is before its last proof of every factor plus STEP_UP_MAX_AGE. A
 * session that never proved them is never fresh; its `stepUpUntil` is when
 * it was created (in the past).
 */
export function stepUpOf(
  state: Pick<SessionStateRow, 'step_up_at' | 'session_created_at'>,
  maxAgeSeconds: number,
  now: Date,
): { stepUpUntil: string; stepUpFresh: boolean } {
  if (!state.step_up_at) {
    return { stepUpUntil: new Date(state.session_created_at ?? 0).toISOString(), stepUpFresh: false };
  }
  const until = new Date(state.step_up_at).getTime() + maxAgeSeconds * 1000;
  return { stepUpUntil: new Date(until).toISOString(), stepUpFresh: now.getTime() < until };
}

/** A session the cookie names, and its state (null: the statement found no user). */
interface Found {
  sessionId: string;
  userId: string;
  expiresAt: string;
  state: SessionStateRow | null;
}

/** The request being resolved. */
type RequestContext = Parameters<SessionResolver>[0];

const isByToken = (row: SessionStateRow): row is SessionByTokenRow => 'session_id' in row;

/** How many recorded break-glass pairs a resolver remembers before it starts over. */
const MAX_REMEMBERED_BYPASSES = 10_000;

/**
 * Resolves the enriched session (docs/api.md "Sessions") once per request. The cookie is
 * validated from the library's 5-minute cookie cache (checked here exactly
 * as the library checks it, see cookie-cache.ts); without one, by the
 * session cookie's signature and the session row found by its token. Then
 * one statement reads what must never be stale: whether the session row
 * still stands, its active organization as stored now, the user's platform
 * role and deletion mark, and the permissions of the member's role there
 * (for a token, the same statement finds the row). A role change, an
 * organization switch, a revoked session or a scheduled deletion therefore
 * bites on the next request, not when the cookie cache expires. The library
 * itself answers whatever is not that plain case (no live session for the
 * token: it expires the cookies; a session due for its daily extension: it
 * extends it and renews the cookies). Where a `cache` is given, the
 * statement's answer is kept until the database says something it reads has
 * changed (session-state-cache.ts).
 */
export function createSessionResolver({
  auth,
  db,
  graceDays,
  config,
  cache,
  fromCache = createCookieCacheVerifier(config),
  clock = () => new Date(),
}: {
  auth: Auth;
  db: Kysely<Database>;
  graceDays: number;
  config: Config;
  cache?: SessionStateCache<SessionStateRow>;
  /** The app's one cookie-cache verifier (the rate limiter reads identities through it too). */
  fromCache?: ReturnType<typeof createCookieCacheVerifier>;
  /** The app's clock: step-up freshness is judged by it (the proofs are written by it too). */
  clock?: Clock;
}): SessionResolver {
  const readState = (sessionId: string, userId: string, expiresAt: string) =>
    cache
      ? cache.through(
          `${sessionId}:${userId}`,
          Date.parse(expiresAt),
          () => loadSessionState(db, sessionId, userId),
          (state) => state.session_valid,
        )
      : loadSessionState(db, sessionId, userId);
  // docs/sso.md "Policy": the (session, organization) pairs whose break-glass
  // is known to be recorded. The row stays as long as the session does, so
  // an Owner's later requests write nothing; another instance's first
  // request inserts nothing (the database decides who audits). Bounded.
  const bypassed = new Set<string>();
  const bypassRecorder = (sessionId: string, userId: string) => async (organizationId: string) => {
    const pair = `${sessionId}:${organizationId}`;
    if (bypassed.has(pair)) return;
    await recordSsoBypass(db, { organizationId, sessionId, userId });
    if (bypassed.size >= MAX_REMEMBERED_BYPASSES) bypassed.clear();
    bypassed.add(pair);
  };
  const readToken = createSessionTokenReader(config);
  const byToken = async (token: string): Promise<SessionByTokenRow | null> => {
    const key = `token:${token}`;
    const hit = cache?.get(key);
    if (hit && isByToken(hit)) return hit;
    const generation = cache?.generation() ?? 0;
    const row = await loadSessionStateByToken(db, token);
    if (row) cache?.set(key, row, generation, row.expires_at.getTime());
    return row;
  };
  // The library's daily extension (get-session's own rule): due once the
  // session is `updateAge` old, counted back from its expiry.
  const extensionDue = (expiresAt: Date) =>
    expiresAt.getTime() - (SESSION_SETTINGS.expiresIn - SESSION_SETTINGS.updateAge) * 1000 <= Date.now();

  const fromLibrary = async (c: RequestContext): Promise<Found | null> => {
    const result = await auth.api.getSession({ headers: c.req.raw.headers, returnHeaders: true });
    // A refreshed session (updateAge) or a renewed cookie cache comes back
    // as Set-Cookie: pass it on, or the browser keeps the stale cookies.
    for (const setCookie of result.headers.getSetCookie()) c.header('Set-Cookie', setCookie, { append: true });
    const response = result.response;
    if (!response) return null;
    const found = {
      sessionId: response.session.id,
      userId: response.user.id,
      expiresAt: new Date(response.session.expiresAt).toISOString(),
    };
    return { ...found, state: await readState(found.sessionId, found.userId, found.expiresAt) };
  };

  const resolve = async (c: RequestContext, cookie: string): Promise<Found | null> => {
    const cached = fromCache(cookie);
    if (cached) return { ...cached, state: await readState(cached.sessionId, cached.userId, cached.expiresAt) };
    // No signed session cookie: the library's get-session answers null and
    // touches no cookie either (with its cookie cache on).
    const signed = readToken(cookie);
    if (!signed) return null;
    const row = await byToken(signed.token);
    if (row && (signed.dontRemember || !extensionDue(row.expires_at)))
      return { sessionId: row.session_id, userId: row.user_id, expiresAt: row.expires_at.toISOString(), state: row };
    cache?.delete(`token:${signed.token}`);
    return fromLibrary(c);
  };

  return async (c) => {
    const cookie = c.req.header('cookie');
    if (!cookie) return null;
    const found = await resolve(c, cookie);
    const state = found?.state;
    if (!found || !state?.session_valid) return null;
    // A member of the organization, or no active organization at all (no permissions: docs/api.md "Access").
    const activeOrganizationId = state.member_id ? state.active_organization_id : null;
    const { stepUpUntil, stepUpFresh } = stepUpOf(state, config.stepUp.maxAgeSeconds, clock());
    return {
      user: {
        id: found.userId,
        email: state.email,
        name: state.name,
        role: state.role,
        emailVerified: state.email_verified,
        twoFactorEnabled: state.two_factor_enabled,
      },
      session: {
        id: found.sessionId,
        activeOrganizationId,
        expiresAt: found.expiresAt,
        mfa: state.session_mfa,
        stepUpUntil,
      },
      // A copy: the row may be shared with later requests through the cache.
      permissions: state.permissions.slice(),
      requireMfa: state.require_mfa,
      ssoRequired: state.sso_required,
      isOwner: state.is_owner,
      recordSsoBypass: bypassRecorder(found.sessionId, found.userId),
      stepUpFresh,
      deletedAt: state.deleted_at ? new Date(state.deleted_at).toISOString() : null,
      purgeAfter: state.deleted_at ? purgeAfter(state.deleted_at, graceDays).toISOString() : null,
      apiKey: null,
    };
  };
}

/**
 * Builds a session-state cache that the database clears whenever what it
 * holds changes (migrations/0005). Node entry and tests; not Workers.
 */
export async function listenForSessionStateChanges(
  database: DatabaseHandle,
): Promise<SessionStateCache<SessionStateRow>> {
  const cache = createSessionStateCache<SessionStateRow>();
  await database.listen(SESSION_STATE_CHANNEL, () => cache.clear());
  return cache;
}

/**
 * The cache the Node entry runs with: on the embedded engine only, which
 * delivers a notification before the writing commit resolves and has one
 * process. On a PostgreSQL server another instance's commit reaches this
 * process's LISTEN connection asynchronously, so a request arriving first
 * would be answered from a stale entry (tests/integration/multi-instance):
 * there every authenticated request reads its one statement, as on Workers.
 */
export async function sessionStateCacheFor(
  database: DatabaseHandle,
): Promise<SessionStateCache<SessionStateRow> | undefined> {
  return database.kind === 'pglite' ? listenForSessionStateChanges(database) : undefined;
}
