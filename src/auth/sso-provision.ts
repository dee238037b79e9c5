import type { GenericEndpointContext } from 'better-auth';
import { setSessionCookie } from 'better-auth/cookies';
import type { Kysely, Transaction } from 'kysely';
import { runInTransaction } from '../db/ambient.js';
import type { Database } from '../db/database.js';
import { proveEmailOwnership } from '../db/queries/email-proof.js';
import { connectionById, domainOwner, type SsoConnection } from '../db/queries/sso-flows.js';
import { claimAssertion, joinOrFollowRole, linkedUserId, userByEmail } from '../db/queries/sso-sign-in.js';
import { setTenant } from '../db/tenant.js';
import { oneLine } from '../shared/text.js';
import { SsoFlowError } from '../sso/errors.js';
import { canonicalEmail, keepsItsCase } from './email-address.js';
import { ssoSignInDuringCall } from './session-marks.js';
import { canonicalDomain } from './sso-domains.js';

/** Who the identity provider says signed in (OIDC ID token claims, or a SAML assertion). */
export interface SsoIdentity {
  /** The OIDC `sub` or the SAML NameID: the account id of the link. */
  subject: string;
  email: string;
  name?: string;
  /** OIDC claims or SAML attributes: what role mappings read. */
  claims: Record<string, unknown>;
  /** SAML: the assertion, accepted once (until it expires). */
  assertion?: { id: string; notOnOrAfter: Date };
}

const NAME_MAX = 100;

/** The address and its domain as the service compares them; an address it cannot use is the IdP's fault. */
function addressOf(raw: string): { email: string; domain: string } {
  const email = canonicalEmail(raw);
  const at = email.lastIndexOf('@');
  const canonical = at > 0 ? canonicalDomain(email.slice(at + 1)) : null;
  if (!keepsItsCase(email) || email.length > 254 || !canonical || 'reason' in canonical)
    throw new SsoFlowError('invalid_response', 'The identity provider sent no usable email address');
  return { email, domain: canonical.domain };
}

/** The claimed name on one line, at most 100 characters; else the address's local part. */
function displayName(name: string | undefined, email: string): string {
  const line = oneLine(name ?? '').trim();
  return (line || email.slice(0, email.lastIndexOf('@'))).slice(0, NAME_MAX);
}

function unavailable(message: string): SsoFlowError {
  return new SsoFlowError('account_unavailable', message);
}

/**
 * The account that signs in (docs/sso.md "Sign-in"): the one linked to the
 * identity, or the one with its address (linked now: the verified domain is
 * the proof, which also verifies the address), or a new one with the address
 * verified and no password. Never an account with a platform role or
 * scheduled for deletion, nor one the identity is not linked to when it is
 * linked to another. Runs with no tenant named: the link's `user.account_linked`
 * entry belongs to no organization.
 */
async function accountFor(
  ctx: GenericEndpointContext,
  trx: Transaction<Database>,
  db: Kysely<Database>,
  { identity, email, providerId, method }: { identity: SsoIdentity; email: string; providerId: string; method: string },
): Promise<string> {
  const linked = await linkedUserId(trx, providerId, identity.subject);
  const existing = await userByEmail(trx, email);
  if (linked && linked !== existing?.id) throw unavailable('The identity is linked to another account');
  const link = (userId: string) =>
    ctx.context.internalAdapter.linkAccount({ userId, providerId, accountId: identity.subject });
  if (existing) {
    if (existing.role !== 'user') throw unavailable('Accounts with a platform role do not sign in through SSO');
    if (existing.deleted_at) throw unavailable('The account is scheduled for deletion');
    // Everything attached before the proof goes (docs/security.md "Account linking").
    // Whoever signed up under the address before this proof chose the password: it goes.
    if (!existing.email_verified) await proveEmailOwnership(db, existing.id, { dropPassword: true });
    if (!linked) await link(existing.id);
    return existing.id;
  }
  const user = await ctx.context.internalAdapter.createUser(
    { email, name: displayName(identity.name, email), emailVerified: true },
    { method: method as 'sso-oidc', sso: { providerId } },
  );
  await link(user.id);
  return user.id;
}

/**
 * Signs the identity in through the connection, in one transaction: the
 * address at a verified domain of the connection's organization, a SAML
 * assertion not seen before, the account, the membership and its role, the
 * session (marked as the connection says, src/auth/session-marks.ts). A
 * refusal throws SsoFlowError and nothing is written. The cookie is set once
 * the transaction has committed.
 */
export async function signInThrough(
  ctx: GenericEndpointContext,
  db: Kysely<Database>,
  { connectionId, identity }: { connectionId: string; identity: SsoIdentity },
): Promise<void> {
  const { email, domain } = addressOf(identity.email);
  if (!identity.subject || identity.subject.length > 256)
    throw new SsoFlowError('invalid_response', 'The identity provider named no subject');
  const providerId = `sso:${connectionId}`;
  const signedIn = await runInTransaction(db, async (trx) => {
    const connection: SsoConnection | undefined = await connectionById(trx, connectionId);
    if (!connection?.enabled) throw new SsoFlowError('connection_disabled', 'The connection is disabled');
    const tenantId = connection.tenant_id;
    if ((await domainOwner(trx, domain)) !== tenantId)
      throw new SsoFlowError(
        'domain_not_allowed',
        "The address is not at a verified domain of the connection's organization",
      );
    if (identity.assertion) {
      await setTenant(trx, tenantId);
      const { id: assertionId, notOnOrAfter: expiresAt } = identity.assertion;
      if (!(await claimAssertion(trx, { tenantId, connectionId, assertionId, expiresAt })))
        throw new SsoFlowError('replayed', 'The assertion has been used before');
      await setTenant(trx, '');
    }
    const method = `sso-${connection.type}`;
    const userId = await accountFor(ctx, trx, db, { identity, email, providerId, method });
    await setTenant(trx, tenantId);
    await joinOrFollowRole(trx, { tenantId, userId, connection, claims: identity.claims });
    ssoSignInDuringCall.set(ctx.context, {
      mfaAtIdp: connection.mfa_at_idp,
      connectionId: connection.id,
      organizationId: tenantId,
    });
    const session = await ctx.context.internalAdapter.createSession(userId, false, {
      activeOrganizationId: tenantId,
      ssoConnectionId: connection.id,
    });
    const user = await ctx.context.internalAdapter.findUserById(userId);
    if (!user) throw new Error('sso: the signed-in user vanished');
    return { session, user };
  });
  await setSessionCookie(ctx, signedIn);
}
