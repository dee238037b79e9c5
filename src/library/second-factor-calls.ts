import type { Transaction } from 'kysely';
import { recordAudit } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { endSessionsAndChallenges, type KeptSession, resetTokenOwner } from '../db/queries/credentials.js';
import { ApiError } from '../shared/errors.js';
import type { JsonObject } from './input.js';
import type { OrganizationCall } from './organization-gate.js';

/** What a second-factor or credential call needs from before the library runs. */
export interface SecondFactorState {
  /** The caller's passkey it is about to delete. */
  passkey?: { id: string; name: string | null; device_type: string };
  /** Whose password a reset token resets (the library consumes the token). */
  resetUserId?: string;
}

/**
 * Reads, in the call's transaction, what the after step needs and the
 * library will have consumed by then. A passkey that is not the caller's is
 * 404 NOT_FOUND, exactly as one that does not exist (the plugin would answer
 * another user's with a bodiless 401, telling that it exists).
 */
export async function beforeSecondFactorCall(
  trx: Transaction<Database>,
  call: OrganizationCall,
): Promise<SecondFactorState> {
  if (call.path === '/passkey/delete-passkey' && call.session && typeof call.body?.id === 'string') {
    const passkey = await trx
      .selectFrom('passkeys')
      .select(['id', 'name', 'device_type'])
      .where('id', '=', call.body.id)
      .where('user_id', '=', call.session.user.id)
      .forUpdate()
      .executeTakeFirst();
    if (!passkey) throw new ApiError('NOT_FOUND', 'Passkey not found');
    return { passkey };
  }
  if (call.path === '/reset-password') {
    // The library reads the body's token, else the query's.
    const token = call.body?.token || call.query?.token;
    const userId = typeof token === 'string' && token !== '' ? await resetTokenOwner(trx, token) : null;
    return userId ? { resetUserId: userId } : {};
  }
  return {};
}

/**
 * API.md audit actions of the second factors, written in the transaction of
 * the library's change: `user.two_factor_enabled` when a session's
 * verify-totp completes enabling, `user.two_factor_disabled`,
 * `user.passkey_added`, `user.passkey_removed`. Metadata names the passkey
 * (id, name, device type), never its key material. Then the credential
 * changes end what the old credentials opened (`endAfterCredentialChange`).
 *
 * `issuedToken`: the session token the library's answer set in its cookie,
 * when it replaced the caller's session (enabling two-factor, a password
 * change that revoked the others).
 */
export async function afterSecondFactorCall(
  trx: Transaction<Database>,
  call: OrganizationCall,
  body: unknown,
  state: SecondFactorState,
  issuedToken: string | null,
  now: Date,
): Promise<void> {
  await endAfterCredentialChange(trx, call, state, issuedToken, now);
  const user = call.session?.user;
  if (!user) return;
  const audit = (action: Parameters<typeof recordAudit>[1]['action'], metadata: JsonObject) =>
    recordAudit(trx, { action, actorId: user.id, organizationId: null, metadata, requestId: call.requestId });
  const record = (body ?? {}) as JsonObject;
  switch (call.path) {
    case '/two-factor/verify-totp':
      // With a session, a successful verify-totp is the one that enables (a second one is refused).
      if (!user.twoFactorEnabled) await audit('user.two_factor_enabled', { userId: user.id, method: 'totp' });
      return;
    case '/two-factor/disable':
      return audit('user.two_factor_disabled', { userId: user.id });
    case '/passkey/verify-registration':
      return audit('user.passkey_added', {
        userId: user.id,
        passkeyId: record.id,
        name: record.name ?? null,
        deviceType: record.deviceType,
      });
    case '/passkey/delete-passkey':
      if (!state.passkey) return;
      return audit('user.passkey_removed', {
        userId: user.id,
        passkeyId: state.passkey.id,
        name: state.passkey.name,
        deviceType: state.passkey.device_type,
      });
  }
}

/**
 * docs/security.md "Credential changes": enabling two-factor, adding a
 * passkey, changing or resetting the password end every other session of the
 * user and every pending second-factor sign-in, in the change's transaction.
 * The session that made the change stays (a reset has none). Revoking
 * sessions ends the pending sign-ins too: a half-finished sign-in is a
 * session in waiting.
 */
async function endAfterCredentialChange(
  trx: Transaction<Database>,
  call: OrganizationCall,
  state: SecondFactorState,
  issuedToken: string | null,
  now: Date,
): Promise<void> {
  const session = call.session;
  const current: KeptSession = session ? { sessionId: session.session.id } : null;
  switch (call.path) {
    case '/two-factor/verify-totp': {
      // Only enabling: with the pending-sign-in cookie and no session, it completes a sign-in.
      if (!session || session.user.twoFactorEnabled) return;
      // The plugin replaced the session with the one in its cookie. Proving the
      // password (enable) and the first code makes it multi-factor and fresh.
      if (issuedToken) {
        await trx
          .updateTable('sessions')
          .set({ mfa: true, step_up_at: now })
          .where('token', '=', issuedToken)
          .where('user_id', '=', session.user.id)
          .execute();
      }
      // Without the new token every session ends, the new one too: fail closed.
      await endSessionsAndChallenges(trx, {
        userId: session.user.id,
        keep: issuedToken ? { token: issuedToken } : null,
      });
      return;
    }
    case '/passkey/verify-registration':
    case '/revoke-other-sessions':
      if (session) await endSessionsAndChallenges(trx, { userId: session.user.id, keep: current });
      return;
    case '/change-password':
      if (!session) return;
      if (issuedToken && session.session.mfa) {
        // With revokeOtherSessions the library replaced the session (the new one
        // created without the caller's factors): it stays, as multi-factor as the caller's was.
        await trx
          .updateTable('sessions')
          .set({ mfa: true })
          .where('token', '=', issuedToken)
          .where('user_id', '=', session.user.id)
          .execute();
      }
      await endSessionsAndChallenges(trx, {
        userId: session.user.id,
        keep: issuedToken ? { token: issuedToken } : current,
      });
      return;
    case '/revoke-sessions':
      if (session) await endSessionsAndChallenges(trx, { userId: session.user.id, keep: null });
      return;
    case '/reset-password':
      if (state.resetUserId) await endSessionsAndChallenges(trx, { userId: state.resetUserId, keep: null });
      return;
  }
}
