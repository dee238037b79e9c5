import { bypassesPermissions } from '../auth/access.js';
import { membershipOf } from '../db/queries/members.js';
import { loadSessionState } from '../db/queries/session-state.js';
import { withTenant } from '../db/tenant.js';
import { ApiError } from '../shared/errors.js';
import { hasAll } from '../shared/permissions.js';
import type { JsonObject, ServiceAnswer } from './row.js';

/*
 * `has-permission` and `get-active-member-role` answer from the service's
 * roles and permission strings (the plugin's role names would tell a Viewer
 * that it may delete the organization).
 */

/** Whether the caller holds every permission asked, in the organization the call acts on. */
export const answerHasPermission: ServiceAnswer = async ({ session, target, body }) => {
  const asked = (body?.permissions ?? body?.permission ?? {}) as Record<string, string[]>;
  const required = Object.entries(asked).flatMap(([resource, actions]) =>
    actions.map((action) => `${resource}:${action}`),
  );
  if (required.length === 0)
    throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
      details: [{ path: 'body.permissions', message: 'must name at least one permission' }],
    });
  return { error: null, success: bypassesPermissions(session!) || hasAll(target!.permissions, required) };
};

/** The caller's own role, or (with members:read) another member's. */
export const answerMemberRole: ServiceAnswer = async ({ session: caller, target, query }, { db }) => {
  const session = caller!;
  const organizationId = target!.id!;
  const userId = query.userId ?? session.user.id;
  if (userId !== session.user.id && !bypassesPermissions(session) && !target!.permissions.includes('members:read'))
    throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions');
  const member = await withTenant(db, organizationId, (trx) => membershipOf(trx, organizationId, userId));
  if (!member) throw new ApiError('NOT_FOUND', 'Member not found');
  const permissions =
    userId === session.user.id
      ? target!.permissions
      : ((await loadSessionState(db, session.session.id, userId, organizationId))?.permissions ?? []);
  return { role: member.role_slug, roleId: member.role_id, permissions: [...permissions].sort() };
};

/**
 * A session token never appears in JSON (it is the HTTP-only cookie's
 * secret): sign-in and sign-up answers, get-session and each entry of
 * list-sessions lose theirs.
 */
export function withoutTokens(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(withoutTokens);
  if (!body || typeof body !== 'object') return body;
  const { token: _token, ...rest } = body as JsonObject;
  if (rest.session && typeof rest.session === 'object') {
    const { token: _sessionToken, ...session } = rest.session as JsonObject;
    rest.session = session;
  }
  return rest;
}
