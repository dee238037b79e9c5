import type { Context } from 'hono';
import type { Kysely, Transaction } from 'kysely';
import type { OrganizationTarget } from '../auth/access.js';
import { loadSessionState } from '../auth/session.js';
import { recordAudit } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { revokeKeys } from '../db/queries/api-keys.js';
import { lockOwners } from '../db/queries/members.js';
import { findRoleBySlug, libraryRoleFor } from '../db/queries/roles.js';
import { setTenant, withTenant } from '../db/tenant.js';
import { ApiError } from '../shared/errors.js';
import { missing } from '../shared/permissions.js';
import type { AppEnv, EnrichedSession, TargetResolver } from '../shared/types.js';
import type { LibraryRoute } from './fields.js';
import { type JsonObject, libraryInput } from './input.js';

const targets = new WeakMap<Context<AppEnv>, OrganizationTarget>();

/** The organization the guard authorized this call in (see `organizationTarget`). */
export function authorizedOrganization(c: Context<AppEnv>): OrganizationTarget | undefined {
  return targets.get(c);
}

/**
 * The caller's permissions in `organizationId` (none unless a member), and the
 * organization's MFA policy, which binds every session acting in it, member
 * or not (a platform admin included): the session's own when it is the active one.
 */
export async function organizationFor(
  db: Kysely<Database>,
  session: EnrichedSession,
  organizationId: string | null,
): Promise<OrganizationTarget> {
  if (!organizationId) return { id: null, permissions: [], requireMfa: false };
  if (organizationId === session.session.activeOrganizationId)
    return { id: organizationId, permissions: session.permissions, requireMfa: session.requireMfa };
  const state = await loadSessionState(db, session.session.id, session.user.id, organizationId);
  return {
    id: organizationId,
    permissions: state?.member_id ? state.permissions : [],
    requireMfa: state?.require_mfa ?? false,
  };
}

/**
 * Issue 14 item 2, one session, one organization: the organization a library
 * call acts on is the one the request names (`organizationId`, or
 * `organizationSlug` resolved here), else the active organization as the
 * service resolved it from the database, never the library's cookie cache.
 * The guard checks the route's permissions in it; the route handler writes
 * it into the forwarded request.
 */
export function organizationTarget(route: LibraryRoute, db: Kysely<Database>): TargetResolver {
  return async (c, session) => {
    const input = await libraryInput(c, route);
    const source: JsonObject = route.organization === 'query' ? input.query : (input.body ?? {});
    let id = typeof source.organizationId === 'string' ? source.organizationId : null;
    if (!id && typeof source.organizationSlug === 'string') {
      const found = await db
        .selectFrom('organizations')
        .select('id')
        .where('slug', '=', source.organizationSlug)
        .executeTakeFirst();
      if (!found) throw new ApiError('NOT_FOUND', 'Organization not found');
      id = found.id;
    }
    if (route.organization === 'invitation' && typeof source.invitationId === 'string') {
      const invitation = await db
        .selectFrom('invitations')
        .select('organization_id')
        .where('id', '=', source.invitationId)
        .executeTakeFirst();
      if (!invitation) throw new ApiError('NOT_FOUND', 'Invitation not found');
      id = invitation.organization_id;
    }
    id ??= session.session.activeOrganizationId;
    const target = await organizationFor(db, session, id);
    targets.set(c, target);
    return target;
  };
}

export interface OrganizationCall {
  path: string;
  session: EnrichedSession | null;
  organizationId: string | null;
  body: JsonObject | null;
  /** The query string as sent (a reset token may travel there). */
  query?: Record<string, string>;
  requestId: string;
  /** Our role slug named by an invitation (the library is told `member`). */
  invitedRoleSlug?: string;
}

/**
 * API.md: an invitation names a role slug of the organization (default
 * member), never Owner, and none with permissions the inviter lacks. Returns
 * the body the library gets (its own role names stay `member`).
 */
export async function checkInvitation(
  db: Kysely<Database>,
  call: OrganizationCall,
  granted: readonly string[],
): Promise<JsonObject> {
  const body = call.body ?? {};
  const slug = typeof body.role === 'string' ? body.role : 'member';
  if (slug === 'owner')
    throw new ApiError('VALIDATION_ERROR', 'An invitation cannot grant the Owner role', {
      details: [{ path: 'role', message: 'must not be owner' }],
    });
  const organizationId = call.organizationId!;
  const role = await withTenant(db, organizationId, (trx) => findRoleBySlug(trx, organizationId, slug));
  if (!role)
    throw new ApiError('VALIDATION_ERROR', 'Unknown role', {
      details: [{ path: 'role', message: `no role "${slug}" in this organization` }],
    });
  const lacking = missing(granted, role.permissions);
  if (call.session?.user.role !== 'superadmin' && lacking.length > 0) {
    throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', {
      details: lacking.map((p) => ({ path: 'role', message: `inviter lacks ${p}` })),
    });
  }
  call.invitedRoleSlug = role.slug;
  return { ...body, role: 'member' };
}

/** Our writes before the library's, in the same transaction. */
export async function beforeOrganizationCall(trx: Transaction<Database>, call: OrganizationCall): Promise<void> {
  const { path, organizationId } = call;
  if ((path === '/organization/remove-member' || path === '/organization/leave') && organizationId) {
    // Last-Owner checks that follow (the library's) see settled Owner rows.
    await setTenant(trx, organizationId);
    await lockOwners(trx, organizationId);
  }
  if (path === '/organization/delete' && organizationId) {
    // Spec §3 "API key": deleting an organization revokes its keys (rolled back if the library refuses).
    await revokeKeys(trx, {
      tenantId: organizationId,
      actorId: call.session?.user.id ?? null,
      requestId: call.requestId,
      reason: 'organization_deleted',
    });
  }
}

/** Our writes after a successful library call, in the same transaction; returns the body to answer with. */
export async function afterOrganizationCall(
  trx: Transaction<Database>,
  call: OrganizationCall,
  body: unknown,
): Promise<unknown> {
  const { path } = call;
  const record = (body ?? {}) as JsonObject;
  if (path === '/organization/create' && typeof record.id === 'string') {
    // The creator's membership got its role id from ORGANIZATION_CREATED: answer what is stored (item 4).
    const stored = await trx
      .selectFrom('members')
      .select(['id', 'role_id', 'role'])
      .where('organization_id', '=', record.id)
      .execute();
    const members = Array.isArray(record.members) ? (record.members as JsonObject[]) : [];
    return { ...record, members: members.map((m) => ({ ...m, ...storedRole(stored.find((s) => s.id === m.id)) })) };
  }
  if (path === '/organization/invite-member' && call.invitedRoleSlug && typeof record.id === 'string') {
    await trx.updateTable('invitations').set({ role: call.invitedRoleSlug }).where('id', '=', record.id).execute();
    return { ...record, role: call.invitedRoleSlug };
  }
  if (path === '/organization/accept-invitation') {
    // The library ignores what beforeAcceptInvitation returns: set the role after.
    const invitation = record.invitation as { id?: unknown; role?: string | null; organizationId: string } | undefined;
    const member = record.member as JsonObject | undefined;
    if (!invitation || !member || typeof member.id !== 'string') return body;
    await setTenant(trx, invitation.organizationId);
    const named =
      invitation.role && invitation.role !== 'owner'
        ? await findRoleBySlug(trx, invitation.organizationId, invitation.role)
        : undefined;
    const role = named ?? (await findRoleBySlug(trx, invitation.organizationId, 'member'));
    if (!role) throw new Error('accept-invitation: the organization has no member role');
    await trx
      .updateTable('members')
      .set({ role_id: role.id, role: libraryRoleFor(role.slug) })
      .where('id', '=', member.id)
      .execute();
    await recordAudit(trx, {
      action: 'member.added',
      actorId: call.session?.user.id ?? null,
      organizationId: invitation.organizationId,
      metadata: {
        memberId: member.id,
        userId: typeof member.userId === 'string' ? member.userId : null,
        roleId: role.id,
        roleSlug: role.slug,
        invitationId: typeof invitation.id === 'string' ? invitation.id : null,
      },
      requestId: call.requestId,
    });
    return {
      ...record,
      invitation: { ...invitation, role: role.slug },
      member: { ...member, roleId: role.id, role: libraryRoleFor(role.slug) },
    };
  }
  const removed =
    path === '/organization/remove-member'
      ? (record.member as JsonObject | undefined)?.userId
      : path === '/organization/leave'
        ? call.session?.user.id
        : undefined;
  if (typeof removed === 'string' && call.organizationId) {
    const member = path === '/organization/remove-member' ? (record.member as JsonObject | undefined) : undefined;
    await recordAudit(trx, {
      action: 'member.removed',
      actorId: call.session?.user.id ?? null,
      organizationId: call.organizationId,
      metadata: {
        userId: removed,
        ...(typeof member?.id === 'string' ? { memberId: member.id } : {}),
        reason: path === '/organization/leave' ? 'left' : 'removed',
      },
      requestId: call.requestId,
    });
    // Issue 14 item 9: a member who leaves or is removed keeps no key of that organization; rejoining revives none.
    await revokeKeys(trx, {
      tenantId: call.organizationId,
      createdBy: removed,
      actorId: call.session?.user.id ?? null,
      requestId: call.requestId,
      reason: 'member_removed',
    });
  }
  return body;
}

function storedRole(row: { role_id: string | null; role: string } | undefined) {
  return row ? { roleId: row.role_id, role: row.role } : {};
}
