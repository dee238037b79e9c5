import type { Kysely, Transaction } from 'kysely';
import { runInTransaction } from '../ambient.js';
import type { Database } from '../database.js';

/** What a proof took away from the account. */
export interface EmailProof {
  userId: string;
  /** Provider identities (GitHub, Google, …) that were linked before the proof. */
  removedLinks: number;
  removedSessions: number;
  removedPasskeys: number;
  removedTwoFactor: boolean;
}

/**
 * docs/security.md "Account linking": the moment an account's address is
 * proven by whoever reads its mail (a verification link, a password reset,
 * a magic link, an SSO sign-in at a verified domain), nothing that was
 * attached to the account before the proof is trusted: while the address was
 * unverified, anyone could have created the account under it. Every provider
 * link, session, passkey and second factor of the unverified account is
 * removed (sessions as deleted rows, so every instance refuses them on their
 * next request), then the address is marked verified. The password stays
 * on the verification path (it is the one the sign-up being verified chose)
 * and on the reset path (the prover just set it); a proof that sets none
 * (`dropPassword`: an SSO sign-in) removes it too, as the magic link does,
 * or whoever created the account under the address would keep signing in.
 *
 * Returns null when the account does not exist or was already verified (a
 * verified account keeps what it has). Called on the verification and reset
 * paths (src/auth/auth.ts), and by SSO and SCIM, which verify addresses
 * themselves (both with `dropPassword`); the magic link, whose library step
 * does the first half, ends with `completeLibraryProof`.
 */
export async function proveEmailOwnership(
  db: Kysely<Database> | Transaction<Database>,
  userId: string,
  { dropPassword = false }: { dropPassword?: boolean } = {},
): Promise<EmailProof | null> {
  // Inside a caller's transaction (SCIM's request), as part of it.
  return runInTransaction(db, async (trx) => {
    const user = await trx
      .selectFrom('users')
      .select(['id', 'email_verified'])
      .where('id', '=', userId)
      .forUpdate()
      .executeTakeFirst();
    if (!user || user.email_verified) return null;
    const proof = await removeUnprovenAccess(trx, userId, { dropPassword });
    await trx
      .updateTable('users')
      .set({ email_verified: true, updated_at: new Date() })
      .where('id', '=', userId)
      .execute();
    return proof;
  });
}

/**
 * The magic link's proof: the library has already removed the account's
 * links (the password too) and sessions and marked the address verified
 * (better-auth `revokeUnprovenAccountAccess`); the rest of the rule follows
 * (passkeys, second factors).
 */
export async function completeLibraryProof(db: Kysely<Database>, userId: string): Promise<EmailProof> {
  return runInTransaction(db, (trx) => removeUnprovenAccess(trx, userId));
}

async function removeUnprovenAccess(
  trx: Transaction<Database>,
  userId: string,
  { dropPassword = false }: { dropPassword?: boolean } = {},
): Promise<EmailProof> {
  const links = await trx
    .deleteFrom('accounts')
    .where('user_id', '=', userId)
    .$if(!dropPassword, (query) => query.where('provider_id', '<>', 'credential'))
    .executeTakeFirst();
  const sessions = await trx.deleteFrom('sessions').where('user_id', '=', userId).executeTakeFirst();
  const passkeys = await trx.deleteFrom('passkeys').where('user_id', '=', userId).executeTakeFirst();
  const twoFactor = await trx.deleteFrom('two_factors').where('user_id', '=', userId).executeTakeFirst();
  // Pending second-factor sign-ins of the account (src/auth/second-factor.ts names them `2fa-…`).
  await trx.deleteFrom('verifications').where('value', '=', userId).where('identifier', 'like', '2fa-%').execute();
  await trx.updateTable('users').set({ two_factor_enabled: false }).where('id', '=', userId).execute();
  return {
    userId,
    removedLinks: Number(links.numDeletedRows),
    removedSessions: Number(sessions.numDeletedRows),
    removedPasskeys: Number(passkeys.numDeletedRows),
    removedTwoFactor: twoFactor.numDeletedRows > 0n,
  };
}
