import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import {
  canonicalDomain,
  isPublicMailDomain,
  newTxtRecordValue,
  txtProves,
  txtRecordName,
} from '../auth/sso-domains.js';
import type { Database } from '../db/database.js';
import { addDomain, deleteDomain, getDomain, listDomains, markVerified } from '../db/queries/sso-domains.js';
import { sessionOf, tenantOf } from '../middleware/guard.js';
import { DnsLookupError, type TxtResolver } from '../platform/dns-txt-types.js';
import { createRouter, defineRoute, errorResponse, jsonContent } from '../router.js';
import type { Clock } from '../shared/clock.js';
import { ApiError } from '../shared/errors.js';
import { IdParams, isoOrNull, SSO_ACCESS } from './schemas.js';

const SsoDomainSchema = z
  .object({
    id: z.uuid(),
    domain: z.string().describe('Lower case, an internationalized name in punycode'),
    status: z.enum(['pending', 'verified']),
    txtName: z.string().describe('Where the TXT record goes: `_gatehouse-challenge.<domain>`'),
    txtValue: z.string().describe('What the TXT record holds, exactly'),
    verifiedAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
  })
  .openapi('SsoDomain');

const AddDomainSchema = z
  .object({ domain: z.string().min(1).max(253).describe('An email domain, e.g. `example.com`') })
  .strict()
  .openapi('AddSsoDomain');

const { read, write } = SSO_ACCESS;

const addRoute = defineRoute({
  method: 'post',
  path: '/api/sso/domains',
  access: write,
  summary: 'Claim an email domain for single sign-on; publish its TXT record, then verify',
  description:
    'A domain the organization already claimed answers its existing record (201, the same TXT value). ' +
    'Domains of public mail providers are refused (400 VALIDATION_ERROR).',
  request: { body: { content: { 'application/json': { schema: AddDomainSchema } }, required: true } },
  responses: {
    201: jsonContent(SsoDomainSchema, 'The claim, with the TXT record that proves it'),
    409: errorResponse(409, ['DOMAIN_TAKEN']),
  },
});

const listRoute = defineRoute({
  method: 'get',
  path: '/api/sso/domains',
  access: read,
  summary: "The active organization's claimed domains, pending and verified",
  responses: { 200: jsonContent(z.array(SsoDomainSchema), 'Domains, oldest first') },
});

const verifyRoute = defineRoute({
  method: 'post',
  path: '/api/sso/domains/{id}/verify',
  access: write,
  summary: 'Look up the TXT record at `txtName`; the domain is verified when one record equals `txtValue`',
  request: { params: IdParams },
  responses: {
    200: jsonContent(SsoDomainSchema, 'The domain, verified (also when it already was)'),
    409: errorResponse(409, [
      ['DOMAIN_NOT_VERIFIED', 'no TXT record holds the value yet, or the lookup failed (the message says which)'],
      'DOMAIN_TAKEN',
    ]),
  },
});

const deleteRoute = defineRoute({
  method: 'delete',
  path: '/api/sso/domains/{id}',
  access: write,
  summary: 'Give up a domain claim; its people no longer sign in through the SSO connections',
  request: { params: IdParams },
  responses: { 200: jsonContent(z.object({ id: z.uuid(), deleted: z.literal(true) }), 'The claim is gone') },
});

function toDomain(row: { id: string; domain: string; txt_value: string; verified_at: Date | null; created_at: Date }) {
  return {
    id: row.id,
    domain: row.domain,
    status: row.verified_at ? ('verified' as const) : ('pending' as const),
    txtName: txtRecordName(row.domain),
    txtValue: row.txt_value,
    verifiedAt: isoOrNull(row.verified_at),
    createdAt: new Date(row.created_at).toISOString(),
  };
}

/** The canonical domain, or 400 naming `domain` (malformed, or a public mail provider's). */
function claimable(input: string): string {
  const refuse = (message: string) =>
    new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path: 'domain', message }] });
  const canonical = canonicalDomain(input);
  if ('reason' in canonical) throw refuse(canonical.reason);
  if (isPublicMailDomain(canonical.domain))
    throw refuse("is a public mail provider's domain, which no organization can claim");
  return canonical.domain;
}

/** The TXT lookup's verdict: nothing, or 409 DOMAIN_NOT_VERIFIED saying whether the record or the lookup failed. */
async function proveOwnership(resolveTxt: TxtResolver, name: string, expected: string): Promise<void> {
  let records: string[];
  try {
    records = await resolveTxt(name);
  } catch (error) {
    if (!(error instanceof DnsLookupError)) throw error;
    throw new ApiError('DOMAIN_NOT_VERIFIED', `The DNS lookup of ${name} failed (${error.code}); try again later`);
  }
  if (!txtProves(records, expected))
    throw new ApiError('DOMAIN_NOT_VERIFIED', `No TXT record at ${name} holds the txtValue yet`);
}

/** docs/sso.md "Domains": the email domains an organization claims and proves with a DNS TXT record. */
export function ssoDomainRoutes({
  db,
  resolveTxt,
  clock,
}: {
  db: Kysely<Database>;
  resolveTxt: TxtResolver;
  clock: Clock;
}) {
  const actorOf = (c: Parameters<typeof sessionOf>[0]) => ({ tenantId: tenantOf(c), actorId: sessionOf(c).user.id });

  return createRouter()
    .openapi(addRoute, async (c) => {
      const domain = claimable(c.req.valid('json').domain);
      const { record } = await addDomain(db, domain, newTxtRecordValue(), actorOf(c));
      return c.json(toDomain(record), 201);
    })
    .openapi(listRoute, async (c) => {
      const rows = await listDomains(db, tenantOf(c));
      return c.json(rows.map(toDomain), 200);
    })
    .openapi(verifyRoute, async (c) => {
      const { id } = c.req.valid('param');
      const actor = actorOf(c);
      const record = await getDomain(db, actor.tenantId, id);
      if (record.verified_at) return c.json(toDomain(record), 200);
      // Outside any transaction: a slow DNS server holds no database connection.
      await proveOwnership(resolveTxt, txtRecordName(record.domain), record.txt_value);
      return c.json(toDomain(await markVerified(db, id, clock(), actor)), 200);
    })
    .openapi(deleteRoute, async (c) => {
      const { id } = c.req.valid('param');
      await deleteDomain(db, id, actorOf(c));
      return c.json({ id, deleted: true as const }, 200);
    });
}
