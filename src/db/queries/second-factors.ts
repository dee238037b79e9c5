import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../database.js';

/**
 * The user's second factors as the account export lists them: metadata only,
 * never the TOTP secret, a backup code (or its hash), or a passkey's key
 * material (public key, credential id).
 */
export async function secondFactorsOf(db: Kysely<Database> | Transaction<Database>, userId: string) {
  const totp = await db
    .selectFrom('two_factors')
    .select(['verified', 'backup_codes', 'created_at'])
    .where('user_id', '=', userId)
    .executeTakeFirst();
  const passkeys = await db
    .selectFrom('passkeys')
    .select(['id', 'name', 'device_type', 'backed_up', 'transports', 'aaguid', 'created_at'])
    .where('user_id', '=', userId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return {
    totp: totp
      ? {
          enabled: totp.verified,
          createdAt: totp.created_at,
          backupCodesRemaining: (JSON.parse(totp.backup_codes) as unknown[]).length,
        }
      : null,
    passkeys: passkeys.map((p) => ({
      id: p.id,
      name: p.name,
      deviceType: p.device_type,
      backedUp: p.backed_up,
      transports: p.transports ? p.transports.split(',') : [],
      aaguid: p.aaguid,
      createdAt: p.created_at,
    })),
  };
}
