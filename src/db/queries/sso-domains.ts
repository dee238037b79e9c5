import { type Kysely, sql, type Transaction } from 'kysely';
import { ApiError } from '../../shared/errors.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import { withTenant } from '../tenant.js';

/** What the domain routes answer from. */
const DOMAIN_COLUMNS = ['id', 'domain', 'txt_value', 'verified_at', 'created_at'] as const;

interface Actor {
  tenantId: string;
  actorId: string;
}

const notFound = () => new ApiError('NOT_FOUND', 'Domain not found');
const taken = () => new ApiError('DOMAIN_TAKEN', 'Another organization has verified this domain');

/** sso_domains_verified_key: a verified domain belongs to one organization; a second verification is 409. */
async function uniqueVerification<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if ((error as { code?: unknown })?.code === '23505') throw taken();
    throw error;
  }
}

/** The organization that verified `domain`, if any (sso_domain_owner reads every tenant's verified row). */
async function ownerOf(trx: Transaction<Database>, domain: string): Promise<string | null> {
  const { rows } = await sql<{ owner: string | null }>`select sso_domain_owner(${domain}) as owner`.execute(trx);
  return rows[0]?.owner ?? null;
}

function findDomain(trx: Transaction<Database>, tenantId: string, where: { id: string } | { domain: string }) {
  let query = trx.selectFrom('sso_domains').select(DOMAIN_COLUMNS).where('tenant_id', '=', tenantId);
  query = 'id' in where ? query.where('id', '=', where.id) : query.where('domain', '=', where.domain);
  return query.executeTakeFirst();
}

export function listDomains(db: Kysely<Database>, tenantId: string) {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('sso_domains')
      .select(DOMAIN_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at')
      .orderBy('id')
      .execute(),
  );
}

/**
 * Claims a (canonical) domain for the organization, audited as
 * `sso.domain_added`; 409 DOMAIN_TAKEN when another organization verified it.
 * A domain the organization already claimed answers its existing record (the
 * same TXT value: a retried request does not invalidate a published record).
 */
export function addDomain(db: Kysely<Database>, domain: string, txtValue: string, { tenantId, actorId }: Actor) {
  return withTenant(db, tenantId, async (trx) => {
    const owner = await ownerOf(trx, domain);
    if (owner !== null && owner !== tenantId) throw taken();
    const inserted = await trx
      .insertInto('sso_domains')
      .values({ tenant_id: tenantId, domain, txt_value: txtValue })
      .onConflict((oc) => oc.columns(['tenant_id', 'domain']).doNothing())
      .returning(DOMAIN_COLUMNS)
      .executeTakeFirst();
    if (!inserted) return { record: (await findDomain(trx, tenantId, { domain }))!, created: false };
    await recordAudit(trx, {
      action: 'sso.domain_added',
      actorId,
      organizationId: tenantId,
      metadata: { domainId: inserted.id, domain },
    });
    return { record: inserted, created: true };
  });
}

/** The organization's domain, or 404 (another organization's id included). */
export async function getDomain(db: Kysely<Database>, tenantId: string, id: string) {
  const record = await withTenant(db, tenantId, (trx) => findDomain(trx, tenantId, { id }));
  if (!record) throw notFound();
  return record;
}

/**
 * Marks a domain verified (its TXT record was found by the caller), audited
 * as `sso.domain_verified`. Verified already (a concurrent request of the
 * same organization): answered as it is. Verified by another organization
 * first: sso_domains_verified_key refuses the update, 409 DOMAIN_TAKEN.
 */
export function markVerified(db: Kysely<Database>, id: string, at: Date, { tenantId, actorId }: Actor) {
  return uniqueVerification(() =>
    withTenant(db, tenantId, async (trx) => {
      const updated = await trx
        .updateTable('sso_domains')
        .set({ verified_at: at })
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where('verified_at', 'is', null)
        .returning(DOMAIN_COLUMNS)
        .executeTakeFirst();
      if (!updated) {
        const current = await findDomain(trx, tenantId, { id });
        if (!current) throw notFound();
        return current;
      }
      await recordAudit(trx, {
        action: 'sso.domain_verified',
        actorId,
        organizationId: tenantId,
        metadata: { domainId: id, domain: updated.domain },
      });
      return updated;
    }),
  );
}

export function deleteDomain(db: Kysely<Database>, id: string, { tenantId, actorId }: Actor) {
  return withTenant(db, tenantId, async (trx) => {
    const deleted = await trx
      .deleteFrom('sso_domains')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .returning(['domain', 'verified_at'])
      .executeTakeFirst();
    if (!deleted) throw notFound();
    await recordAudit(trx, {
      action: 'sso.domain_deleted',
      actorId,
      organizationId: tenantId,
      metadata: { domainId: id, domain: deleted.domain, wasVerified: deleted.verified_at !== null },
    });
  });
}
