import { sessionToken } from '../db/queries/accounts.js';
import { ApiError } from '../shared/errors.js';
import { withoutTokens } from './answers.js';
import type { InputRewrite, JsonObject, Reply } from './row.js';

/** Sessions are named by id (tokens are never shown): the library revokes by token. */
export const sessionIdToToken: InputRewrite = async (call, { db }) => {
  const token = await sessionToken(db, { sessionId: String(call.body!.id), userId: call.session!.user.id });
  if (!token) throw new ApiError('NOT_FOUND', 'Session not found');
  return { token };
};

/** The session as the service resolved it (its active organization), or null when none stands. */
export const replyWithSession: Reply = ({ session }, body) => {
  if (!session || !body || typeof body !== 'object') return null;
  const answer = withoutTokens(body) as { session: JsonObject };
  return { ...answer, session: { ...answer.session, activeOrganizationId: session.session.activeOrganizationId } };
};

/** Each session without its token, the caller's own marked `current`. */
export const replyWithSessions: Reply = ({ session }, body) => {
  if (!Array.isArray(body)) return undefined;
  return (withoutTokens(body) as JsonObject[]).map((entry) => ({
    ...entry,
    current: entry.id === session!.session.id,
  }));
};
