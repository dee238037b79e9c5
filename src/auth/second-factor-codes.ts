import { createHMAC } from '@better-auth/utils/hmac';
import { createOTP } from '@better-auth/utils/otp';
import { symmetricDecrypt } from 'better-auth/crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import {
  advanceTotpStep,
  backupCodesOf,
  clearCodeFailures,
  codesLockedUntil,
  countCodeFailure,
  replaceBackupCodes,
  totpSecretOf,
} from '../db/queries/two-factor-codes.js';

const TOTP_PERIOD = 30;
const HASHED = 'h1:';

/** The key the plugin encrypts TOTP secrets with (`ctx.context.secretConfig`). */
export type SecretKey = Parameters<typeof symmetricDecrypt>[0]['key'];

/**
 * A TOTP code of the user's authenticator, as the plugin verifies it (RFC
 * 6238, 6 digits, 30 s, window ±1), accepted once: a code of a time step at
 * or below the last one accepted is a replay (RFC 6238 §5.2), refused with one
 * conditional UPDATE so two requests with one code cannot both pass.
 */
export async function acceptTotpCode(
  db: Kysely<Database>,
  { key, userId, code }: { key: SecretKey; userId: string; code: string },
): Promise<'accepted' | 'replayed' | 'wrong'> {
  const row = await totpSecretOf(db, userId);
  if (!row) return 'wrong';
  const secret = await symmetricDecrypt({ key, data: row.secret });
  const otp = createOTP(secret, { digits: 6, period: TOTP_PERIOD });
  const now = Math.floor(Date.now() / 1000 / TOTP_PERIOD);
  for (const step of [now - 1, now, now + 1]) {
    if ((await otp.hotp(step)) !== code) continue;
    return (await advanceTotpStep(db, row.id, step)) ? 'accepted' : 'replayed';
  }
  return 'wrong';
}

/**
 * The plugin's account lockout (better-auth twoFactor `accountLockout`
 * defaults): ten failed codes in a row, across sign-ins and step-ups, lock
 * the account's codes for 15 minutes (NIST SP 800-63B §5.2.2).
 */
export const CODE_LOCKOUT = { maxFailedAttempts: 10, durationSeconds: 900 } as const;

/** Whether the account's codes are locked now (a lock written by the plugin or by `recordCodeOutcome`). */
export async function codesLocked(db: Kysely<Database>, userId: string): Promise<boolean> {
  const lockedUntil = await codesLockedUntil(db, userId);
  return Boolean(lockedUntil && new Date(lockedUntil).getTime() > Date.now());
}

/**
 * Counts a code tried outside the plugin (step-up) in the plugin's own
 * lockout: a failure adds one, atomically, and the tenth in a row locks the
 * codes; a success clears the count, as the plugin does. The plugin writes
 * the lock by the real time, so this does too.
 */
export async function recordCodeOutcome(db: Kysely<Database>, userId: string, accepted: boolean): Promise<void> {
  if (accepted) return clearCodeFailures(db, userId);
  const lockUntil = new Date(Date.now() + CODE_LOCKOUT.durationSeconds * 1000);
  await countCodeFailure(db, userId, { maxFailedAttempts: CODE_LOCKOUT.maxFailedAttempts, lockUntil });
}

/** Spends one of the user's backup codes: true when it was unspent (one conditional UPDATE, so once only). */
export async function consumeBackupCode(
  db: Kysely<Database>,
  { secret, userId, code }: { secret: string; userId: string; code: string },
): Promise<boolean> {
  const row = await backupCodesOf(db, userId);
  if (!row?.backup_codes) return false;
  let stored: unknown;
  try {
    stored = JSON.parse(row.backup_codes);
  } catch {
    return false;
  }
  if (!Array.isArray(stored)) return false;
  const hashed = await backupCodeHasher(secret)(code);
  if (!stored.includes(hashed)) return false;
  const remaining = JSON.stringify(stored.filter((entry) => entry !== hashed));
  return replaceBackupCodes(db, row.id, { previous: row.backup_codes, remaining });
}

/** A backup code's stored form: HMAC-SHA-256 under AUTH_SECRET (codes carry ~60 bits, so no slow hash is needed). */
export function backupCodeHasher(secret: string) {
  const hmac = createHMAC('SHA-256', 'base64urlnopad');
  return async (code: string) => `${HASHED}${await hmac.sign(secret, code)}`;
}

/** For storage: the plugin writes the remaining codes back after a use, already hashed. */
export function backupCodeStore(secret: string) {
  const hash = backupCodeHasher(secret);
  return async (code: string) => (code.startsWith(HASHED) ? code : hash(code));
}
