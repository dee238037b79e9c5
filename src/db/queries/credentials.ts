import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from '../database.js';

/**
 * The twoFactor plugin's records of a pending sign-in (better-auth
 * plugins/two-factor): `2fa-<random>` whose value is the user id, and its
 * attempt counter `2fa-attempts-2fa-<random>` whose value is a count.
 */
const CHALLENGE_PREFIX = '2fa-';
const ATTEMPTS_PREFIX = '2fa-attempts-';

/** The one session a credential change leaves standing: the caller's, named by id or by the token just issued. */
export type KeptSession = { sessionId: string } | { token: string } | null;

/**
 * After a credential change (docs/security.md "Credential changes"): every
 * session of the user except `keep` ends, and so does every pending
 * second-factor sign-in (a password sign-in waiting for its code), with its
 * attempt counter, so neither a session nor a half-finished sign-in opened
 * with the old credentials outlives the change. Deleting the rows is what
 * ends them everywhere: every instance reads the session row on each request,
 * and the sessions trigger clears the embedded engine's cache (migrations/0005).
 */
export async function endSessionsAndChallenges(
  db: Kysely<Database> | Transaction<Database>,
  { userId, keep }: { userId: string; keep: KeptSession },
): Promise<{ sessions: number; challenges: number }> {
  let sessions = db.deleteFrom('sessions').where('user_id', '=', userId);
  if (keep && 'sessionId' in keep) sessions = sessions.where('id', '<>', keep.sessionId);
  if (keep && 'token' in keep) sessions = sessions.where('token', '<>', keep.token);
  const ended = await sessions.executeTakeFirst();
  // One statement: the challenges and, named after each, their attempt counters.
  const { rows } = await sql<{ identifier: string }>`
    with pending as (
      delete from verifications
      where value = ${userId}
        and starts_with(identifier, ${CHALLENGE_PREFIX})
        and not starts_with(identifier, ${ATTEMPTS_PREFIX})
      returning identifier
    ), counters as (
      delete from verifications
      where identifier in (select ${ATTEMPTS_PREFIX} || identifier from pending)
    )
    select identifier from pending`.execute(db);
  return { sessions: Number(ended.numDeletedRows), challenges: rows.length };
}

/** The user a password-reset token belongs to, if it is still valid (better-auth's `reset-password:<token>` record). */
export async function resetTokenOwner(
  db: Kysely<Database> | Transaction<Database>,
  token: string,
): Promise<string | null> {
  const row = await db
    .selectFrom('verifications')
    .select('value')
    .where('identifier', '=', `reset-password:${token}`)
    .where('expires_at', '>', sql<Date>`now()`)
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
  return row?.value ?? null;
}
