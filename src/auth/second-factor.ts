import { passkey } from '@better-auth/passkey';
import { APIError } from 'better-auth/api';
import { twoFactor } from 'better-auth/plugins';
import type { Config } from '../shared/config.js';
import { backupCodeStore } from './second-factor-codes.js';

export {
  acceptTotpCode,
  CODE_LOCKOUT,
  codesLocked,
  consumeBackupCode,
  recordCodeOutcome,
  type SecretKey,
} from './second-factor-codes.js';
export { secondFactorHooks } from './second-factor-hooks.js';
export type { SessionCreation, SessionPaths } from './session-marks.js';

/**
 * Multi-factor authentication: better-auth's twoFactor and passkey plugins,
 * plus what they leave out (the hooks in second-factor-hooks.ts and
 * session-marks.ts, the codes in second-factor-codes.ts).
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
 * - A session records when it proved every factor of its account
 *   (`sessions.step_up_at`, docs/security.md "Sensitive actions and step-up"),
 *   written by the same INSERT: a password sign-in of an account without
 *   two-factor, a passkey sign-in, the second factor completing a password
 *   sign-in, and a magic-link, OAuth or verification sign-in of an account
 *   without a password. Anything else (a magic link for an account that has
 *   a password, a path no library route's row declares) is not fresh.
 */

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

/**
 * The session fields the sign-in paths mark sessions with (migrations/0007,
 * 0009, 0011); never from a request. `ssoConnectionId`: the single sign-on
 * connection that created the session (src/auth/sso-provision.ts).
 */
export const sessionMfaField = {
  mfa: { type: 'boolean', required: false, input: false, fieldName: 'mfa' },
  stepUpAt: { type: 'date', required: false, input: false, returned: false, fieldName: 'step_up_at' },
  ssoConnectionId: { type: 'string', required: false, input: false, returned: false, fieldName: 'sso_connection_id' },
} as const;

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
