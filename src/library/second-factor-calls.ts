import type { Transaction } from 'kysely';
import { recordAudit } from '../db/audit.js';
import type { DB } from '../db/database.js';
import type { JsonObject } from './input.js';
import type { OrganizationCall } from './organization-gate.js';

/** What a second-factor call needs from before the library runs (the passkey it is about to delete). */
export interface SecondFactorState {
  passkey?: { id: string; name: string | null; device_type: string };
}

/** Reads what the audit entry of a deletion must name, in the call's transaction. */
export async function beforeSecondFactorCall(trx: Transaction<DB>, call: OrganizationCall): Promise<SecondFactorState> {
  if (call.path !== '/passkey/delete-passkey' || !call.session || typeof call.body?.id !== 'string') return {};
  const passkey = await trx
    .selectFrom('passkeys')
    .select(['id', 'name', 'device_type'])
    .where('id', '=', call.body.id)
    .where('user_id', '=', call.session.user.id)
    .forUpdate()
    .executeTakeFirst();
  return passkey ? { passkey } : {};
}

/**
 * API.md audit actions of the second factors, written in the transaction of
 * the library's change: `user.two_factor_enabled` when a session's
 * verify-totp completes enabling, `user.two_factor_disabled`,
 * `user.passkey_added`, `user.passkey_removed`. Metadata names the passkey
 * (id, name, device type), never its key material.
 */
export async function afterSecondFactorCall(
  trx: Transaction<DB>,
  call: OrganizationCall,
  body: unknown,
  state: SecondFactorState,
): Promise<void> {
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
