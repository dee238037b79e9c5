import type { Context } from 'hono';
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../db/database.js';
import { revokeOrganizationKeys } from '../db/queries/api-keys.js';
import { findRoleBySlug, libraryRoleFor } from '../db/queries/roles.js';
import { setTenant, withTenant } from '../db/tenant.js';
import { ApiError } from '../errors.js';
import { loadSession } from '../middleware/guard.js';
import type { AppEnv, EnrichedSession } from '../types.js';
import { missing, type Permission } from './permissions.js';
import { loadSessionState } from './session.js';

const ORG = '/api/auth/organization';

/** API.md "Organizations": plugin routes are authorized by the same permission strings. */
export const ORGANIZATION_PERMISSIONS: Readonly<Record<string, Permission>> = {
  [`${ORG}/invite-member`]: 'invitations:write',
  [`${ORG}/cancel-invitation`]: 'invitations:delete',
  [`${ORG}/remove-member`]: 'members:delete',
  [`${ORG}/update`]: 'organizations:write',
  [`${ORG}/delete`]: 'organizations:delete',
};

/** Plugin calls that run in one transaction with our follow-up writes. */
export const ORGANIZATION_TRANSACTIONAL_PATHS: ReadonlySet<string> = new Set([
  `${ORG}/create`,
  `${ORG}/delete`,
  `${ORG}/invite-member`,
  `${ORG}/accept-invitation`,
  `${ORG}/remove-member`,
  `${ORG}/leave`,
  // On a refusal (not a member) the library clears the caller's active
  // organization before answering 403: in a transaction, that write rolls
  // back with the refusal, so a refused call changes nothing.
  `${ORG}/set-active`,
  `${ORG}/get-organization`,
  `${ORG}/get-full-organization`,
]);

// `id`: get-invitation's query names the invitation so.
const ID_FIELDS = ['organizationId', 'invitationId', 'memberId', 'userId', 'id'] as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export interface OrganizationCall {
  /** The request to hand to the library (its body may be rewritten). */
  request: Request;
  organizationId: string | null;
  /** Our role slug named by an invitation (the library is told `member`). */
  invitedRoleSlug?: string;
  before?: (trx: Transaction<DB>) => Promise<void>;
}

type Body = Record<string, unknown>;

async function readBody(request: Request): Promise<Body | null> {
  if (request.method !== 'POST') return null;
  try {
    const parsed: unknown = await request.clone().json();
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Body) : null;
  } catch {
    return null;
  }
}

function withBody(request: Request, body: Body): Request {
  const headers = new Headers(request.headers);
  headers.delete('content-length');
  return new Request(request.url, { method: request.method, headers, body: JSON.stringify(body) });
}

async function permissionsIn(db: Kysely<DB>, session: EnrichedSession, organizationId: string): Promise<string[]> {
  if (organizationId === session.session.activeOrganizationId) return session.permissions;
  const state = await loadSessionState(db, session.session.id, session.user.id, organizationId);
  return state?.member_id ? state.permissions : [];
}

/** Locks the organization's Owner memberships: last-Owner checks that follow see settled rows. */
async function lockOwners(trx: Transaction<DB>, organizationId: string | null): Promise<void> {
  if (!organizationId) return;
  await trx.selectFrom('members').select('id').where('organization_id', '=', organizationId).where('role', '=', 'owner').forUpdate().execute();
}

/**
 * Checks an organization-plugin call before the library sees it; null for
 * anything that is not one. Ids must be UUIDs (the library would hand a
 * malformed one to PostgreSQL and answer 500).
 */
export async function authorizeOrganizationCall(c: Context<AppEnv>, { path, db }: { path: string; db: Kysely<DB> }): Promise<OrganizationCall | null> {
  if (!path.startsWith(`${ORG}/`)) return null;
  const body = await readBody(c.req.raw);
  const query = Object.fromEntries(new URL(c.req.url).searchParams);
  for (const field of ID_FIELDS) {
    for (const [source, value] of [['body', body?.[field]], ['query', query[field]]] as const) {
      if (value !== undefined && value !== null && (typeof value !== 'string' || !UUID.test(value))) {
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path: field, message: `${source} ${field} must be a UUID` }] });
      }
    }
  }
  // remove-member: an email, or else a member id.
  const target = body?.memberIdOrEmail;
  if (target !== undefined && (typeof target !== 'string' || (!target.includes('@') && !UUID.test(target)))) {
    throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path: 'memberIdOrEmail', message: 'must be an email or a member UUID' }] });
  }

  const call: OrganizationCall = { request: c.req.raw, organizationId: null };
  const required = ORGANIZATION_PERMISSIONS[path];
  if (!required && !ORGANIZATION_TRANSACTIONAL_PATHS.has(path)) return call;

  const session = await loadSession(c);
  if (!session) throw new ApiError('UNAUTHORIZED', 'Authentication required');

  let organizationId = typeof body?.organizationId === 'string' ? body.organizationId : null;
  if (!organizationId && typeof body?.invitationId === 'string') {
    const invitation = await db.selectFrom('invitations').select('organization_id').where('id', '=', body.invitationId).executeTakeFirst();
    organizationId = invitation?.organization_id ?? null;
  }
  organizationId ??= path === `${ORG}/create` || path === `${ORG}/accept-invitation` ? null : session.session.activeOrganizationId;
  call.organizationId = organizationId;

  let granted: string[] = [];
  if (required) {
    if (!organizationId) throw new ApiError('NO_ACTIVE_ORGANIZATION', 'No active organization');
    granted = await permissionsIn(db, session, organizationId);
    if (session.user.role !== 'superadmin' && missing(granted, [required]).length > 0) {
      throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions');
    }
  }

  if (path === `${ORG}/invite-member` && body && organizationId) {
    // API.md: an invitation names a role slug of the organization (default member), never Owner.
    // One slug: the library would also take a list, which we would not check.
    if (body.role !== undefined && typeof body.role !== 'string') {
      throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path: 'role', message: 'must be one role slug' }] });
    }
    const slug = typeof body.role === 'string' ? body.role : 'member';
    if (slug === 'owner') {
      throw new ApiError('VALIDATION_ERROR', 'An invitation cannot grant the Owner role', { details: [{ path: 'role', message: 'must not be owner' }] });
    }
    const role = await withTenant(db, organizationId, (trx) => findRoleBySlug(trx, organizationId!, slug));
    if (!role) throw new ApiError('VALIDATION_ERROR', 'Unknown role', { details: [{ path: 'role', message: `no role "${slug}" in this organization` }] });
    const lacking = missing(granted, role.permissions);
    if (session.user.role !== 'superadmin' && lacking.length > 0) {
      throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', { details: lacking.map((p) => ({ path: 'role', message: `inviter lacks ${p}` })) });
    }
    call.invitedRoleSlug = role.slug;
    call.request = withBody(c.req.raw, { ...body, role: 'member' });
  }
  if (path === `${ORG}/remove-member` || path === `${ORG}/leave`) {
    call.before = (trx) => lockOwners(trx, organizationId);
  }
  if (path === `${ORG}/delete` && organizationId) {
    // Spec §3 "API key": deleting an organization revokes its keys (rolled back if the library refuses).
    call.before = async (trx) => {
      await revokeOrganizationKeys(trx, { tenantId: organizationId, actorId: session.user.id, requestId: c.get('requestId'), reason: 'organization_deleted' });
    };
  }
  return call;
}

/** Our writes after a successful plugin call, in the same transaction. */
export async function afterOrganizationCall(trx: Transaction<DB>, { path, call, response }: { path: string; call: OrganizationCall; response: Response }): Promise<Response> {
  if (path === `${ORG}/invite-member` && call.invitedRoleSlug) {
    const invitation = (await response.clone().json()) as { id?: string };
    if (invitation.id) await trx.updateTable('invitations').set({ role: call.invitedRoleSlug }).where('id', '=', invitation.id).execute();
  }
  if (path === `${ORG}/accept-invitation`) {
    // The library ignores what beforeAcceptInvitation returns: set the role after.
    const { invitation, member } = (await response.clone().json()) as { invitation?: { role?: string | null; organizationId: string }; member?: { id: string } };
    if (invitation && member) {
      await setTenant(trx, invitation.organizationId);
      const named = invitation.role && invitation.role !== 'owner' ? await findRoleBySlug(trx, invitation.organizationId, invitation.role) : undefined;
      const role = named ?? (await findRoleBySlug(trx, invitation.organizationId, 'member'));
      if (!role) throw new Error('accept-invitation: the organization has no member role');
      await trx.updateTable('members').set({ role_id: role.id, role: libraryRoleFor(role.slug) }).where('id', '=', member.id).execute();
    }
  }
  return response;
}
