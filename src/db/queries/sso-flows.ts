import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * A single sign-on in progress (docs/sso.md "Sign-in"): what the callback
 * needs to finish what POST /sign-in/sso started. Kept in `verifications`
 * under the SHA-256 of its `state`, never the state itself, so a read of the
 * table gives nobody a flow to finish.
 */
export interface SsoFlow {
  connectionId: string;
  callbackURL: string;
  errorCallbackURL: string | null;
  /** OIDC: the PKCE verifier and the ID token's expected nonce. */
  codeVerifier?: string;
  nonce?: string;
  /** SAML: the AuthnRequest's ID, which the response's InResponseTo must name. */
  requestId?: string;
}

export const SSO_FLOW_SECONDS = 10 * 60;
const PREFIX = 'sso-flow:';

async function identifierOf(state: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(state)));
  return `${PREFIX}${Array.from(digest, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

export async function storeSsoFlow(db: Db, state: string, flow: SsoFlow, now: Date): Promise<void> {
  await db
    .insertInto('verifications')
    .values({
      identifier: await identifierOf(state),
      value: JSON.stringify(flow),
      expires_at: new Date(now.getTime() + SSO_FLOW_SECONDS * 1000),
      created_at: now,
      updated_at: now,
    })
    .execute();
}

/** The flow of `state`, deleted as it is read (one statement: two callbacks with one state cannot both have it). */
export async function takeSsoFlow(db: Db, state: string, now: Date): Promise<SsoFlow | null> {
  const taken = await db
    .deleteFrom('verifications')
    .where('identifier', '=', await identifierOf(state))
    .returning(['value', 'expires_at'])
    .executeTakeFirst();
  if (!taken || taken.expires_at <= now) return null;
  try {
    return JSON.parse(taken.value) as SsoFlow;
  } catch {
    return null;
  }
}

export type SsoConnection = Selectable<Database['sso_connections']>;

/** A connection by id whatever its tenant (a callback names only its connection); needs a transaction. */
export async function connectionById(trx: Transaction<Database>, id: string): Promise<SsoConnection | undefined> {
  const { rows } = await sql<SsoConnection>`select * from sso_connection_by_id(${id}::uuid)`.execute(trx);
  return rows[0];
}

/** The organization that verified the domain, if any (any tenant). */
export async function domainOwner(db: Db, domain: string): Promise<string | null> {
  const { rows } = await sql<{ owner: string | null }>`select sso_domain_owner(${domain}) as owner`.execute(db);
  return rows[0]?.owner ?? null;
}

export async function organizationIdBySlug(db: Db, slug: string): Promise<string | null> {
  const row = await db.selectFrom('organizations').select('id').where('slug', '=', slug).executeTakeFirst();
  return row?.id ?? null;
}

/** The organization's oldest enabled connection: the one a sign-in by email or slug goes through. */
export function signInConnection(db: Kysely<Database>, organizationId: string) {
  return withTenant(db, organizationId, (trx) =>
    trx
      .selectFrom('sso_connections')
      .selectAll()
      .where('tenant_id', '=', organizationId)
      .where('enabled', '=', true)
      .orderBy('created_at')
      .orderBy('id')
      .limit(1)
      .executeTakeFirst(),
  );
}
