import type { Transaction } from 'kysely';
import { recordAudit } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { endSessionsAndChallenges, resetTokenOwner } from '../db/queries/credentials.js';
import { lockUserPasskey, markIssuedSession } from '../db/queries/library-calls.js';
import { ApiError } from '../shared/errors.js';
import type { AfterHook, BeforeHook, JsonObject, LibraryCall } from './row.js';

/*
 * The audit actions of the second factors, written in the transaction of the
 * library's change (`user.two_factor_enabled`, `user.two_factor_disabled`,
 * `user.passkey_added`, `user.passkey_removed`; metadata names a passkey by
 * id, name and device type, never its key material), and docs/security.md
 * "Credential changes": enabling two-factor, adding a passkey, changing or
 * resetting the password end every other session of the user and every
 * pending second-factor sign-in, in the change's transaction. The session
 * that made the change stays (a reset has none). Revoking sessions ends the
 * pending sign-ins too: a half-finished sign-in is a session in waiting.
 */

function audit(
  trx: Transaction<Database>,
  call: LibraryCall,
  action: Parameters<typeof recordAudit>[1]['action'],
  metadata: JsonObject,
) {
  const user = call.session!.user;
  return recordAudit(trx, { action, actorId: user.id, organizationId: null, metadata });
}

/**
 * The caller's passkey about to be deleted, locked. One that is not the
 * caller's is 404 NOT_FOUND, exactly as one that does not exist (the plugin
 * would answer another user's with a bodiless 401, telling that it exists).
 */
export const findCallersPasskey: BeforeHook = async (trx, call) => {
  if (!call.session || typeof call.body?.id !== 'string') return;
  const passkey = await lockUserPasskey(trx, call.session.user.id, call.body.id);
  if (!passkey) throw new ApiError('NOT_FOUND', 'Passkey not found');
  call.notes.passkey = passkey;
};

/** Whose password a reset token resets, read before the library consumes the token (body's, else the query's). */
export const findResetOwner: BeforeHook = async (trx, call) => {
  const token = call.body?.token || call.query.token;
  const userId = typeof token === 'string' && token !== '' ? await resetTokenOwner(trx, token) : null;
  if (userId) call.notes.resetUserId = userId;
};

/** A reset ends every session and pending sign-in of the account. */
export const endAfterReset: AfterHook = async (trx, call, { body }) => {
  if (call.notes.resetUserId) await endSessionsAndChallenges(trx, { userId: call.notes.resetUserId, keep: null });
  return body;
};

/** Every session of the caller ends, its own too. */
export const endAllSessions: AfterHook = async (trx, call, { body }) => {
  if (call.session) await endSessionsAndChallenges(trx, { userId: call.session.user.id, keep: null });
  return body;
};

/** Every other session of the caller ends. */
export const endOtherSessions: AfterHook = async (trx, call, { body }) => {
  if (call.session)
    await endSessionsAndChallenges(trx, { userId: call.session.user.id, keep: { sessionId: call.session.session.id } });
  return body;
};

/**
 * With revokeOtherSessions the library replaced the session (the new one
 * created without the caller's factors): it stays, as multi-factor as the
 * caller's was. Every other session ends.
 */
export const endAfterPasswordChange: AfterHook = async (trx, call, { body, issuedToken }) => {
  const session = call.session;
  if (!session) return body;
  if (issuedToken && session.session.mfa) await markIssuedSession(trx, { token: issuedToken, userId: session.user.id });
  await endSessionsAndChallenges(trx, {
    userId: session.user.id,
    keep: issuedToken ? { token: issuedToken } : { sessionId: session.session.id },
  });
  return body;
};

/**
 * With a session, a successful verify-totp is the one that enables two-factor
 * (a second one is refused); with the pending-sign-in cookie and no session,
 * it completes a sign-in and there is nothing to add. The plugin replaced the
 * session with the one in its cookie: proving the password (enable) and the
 * first code makes it multi-factor and fresh. Without the new token every
 * session ends, the new one too: fail closed.
 */
export const enableTwoFactor: AfterHook = async (trx, call, { body, issuedToken, now }) => {
  const session = call.session;
  if (!session || session.user.twoFactorEnabled) return body;
  if (issuedToken) await markIssuedSession(trx, { token: issuedToken, userId: session.user.id, stepUpAt: now });
  await endSessionsAndChallenges(trx, { userId: session.user.id, keep: issuedToken ? { token: issuedToken } : null });
  await audit(trx, call, 'user.two_factor_enabled', { userId: session.user.id, method: 'totp' });
  return body;
};

export const auditTwoFactorDisabled: AfterHook = async (trx, call, { body }) => {
  if (call.session) await audit(trx, call, 'user.two_factor_disabled', { userId: call.session.user.id });
  return body;
};

/** A new passkey: every other session ends, and it is audited. */
export const addPasskey: AfterHook = async (trx, call, outcome) => {
  const session = call.session;
  if (!session) return outcome.body;
  await endSessionsAndChallenges(trx, { userId: session.user.id, keep: { sessionId: session.session.id } });
  const record = (outcome.body ?? {}) as JsonObject;
  await audit(trx, call, 'user.passkey_added', {
    userId: session.user.id,
    passkeyId: record.id,
    name: record.name ?? null,
    deviceType: record.deviceType,
  });
  return outcome.body;
};

export const auditPasskeyRemoved: AfterHook = async (trx, call, { body }) => {
  const passkey = call.notes.passkey;
  if (!call.session || !passkey) return body;
  await audit(trx, call, 'user.passkey_removed', {
    userId: call.session.user.id,
    passkeyId: passkey.id,
    name: passkey.name,
    deviceType: passkey.device_type,
  });
  return body;
};
