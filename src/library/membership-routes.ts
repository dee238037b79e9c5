import { z } from 'zod';
import { access } from '../auth/access.js';
import { address, organizationRef, slug, uuid } from './fields.js';
import {
  checkInvitation,
  lockOrganizationOwners,
  recordMemberLeft,
  recordMemberRemoved,
  setAcceptedRole,
  storeInvitedRole,
} from './organization-calls.js';
import type { LibraryRoute } from './row.js';

const session = access.session;
/** A permission list checked in the organization the call acts on (not necessarily the active one). */
const inOrganization = access.permissions;

/** The organization plugin's routes for invitations and memberships. */
export const MEMBERSHIP_ROUTES: readonly LibraryRoute[] = [
  {
    method: 'POST',
    path: '/organization/invite-member',
    summary: 'Invite someone by email with a role of the organization (mails them)',
    access: inOrganization('invitations:write'),
    tier: 'global',
    organization: 'body',
    transaction: 'rollback-refusals',
    rewrite: checkInvitation,
    after: storeInvitedRole,
    body: z
      .object({
        email: address,
        role: slug.optional(),
        organizationId: uuid.optional(),
        resend: z.boolean().optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/organization/cancel-invitation',
    summary: 'Cancel an invitation',
    access: inOrganization('invitations:delete'),
    tier: 'global',
    organization: 'invitation',
    transaction: 'none',
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-invitations',
    summary: "An organization's invitations",
    access: inOrganization('invitations:read'),
    tier: 'global',
    organization: 'query',
    transaction: 'none',
    query: z.object(organizationRef).strict(),
  },
  {
    method: 'POST',
    path: '/organization/accept-invitation',
    summary: 'Accept an invitation addressed to the caller (joins with its role)',
    access: session(),
    tier: 'global',
    transaction: 'rollback-refusals',
    after: setAcceptedRole,
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/reject-invitation',
    summary: 'Reject an invitation addressed to the caller',
    access: session(),
    tier: 'global',
    transaction: 'none',
    body: z.object({ invitationId: uuid }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/get-invitation',
    summary: 'One invitation addressed to the caller',
    access: session(),
    tier: 'global',
    transaction: 'none',
    query: z.object({ id: uuid }).strict(),
  },
  {
    method: 'GET',
    path: '/organization/list-user-invitations',
    summary: 'The invitations addressed to the caller',
    access: session(),
    tier: 'global',
    transaction: 'none',
    query: z.object({}).strict(),
  },
  {
    method: 'POST',
    path: '/organization/remove-member',
    summary: 'Remove a member (revokes the API keys they created there)',
    access: inOrganization('members:delete'),
    tier: 'global',
    organization: 'body',
    transaction: 'rollback-refusals',
    before: lockOrganizationOwners,
    after: recordMemberRemoved,
    body: z.object({ memberIdOrEmail: z.union([uuid, address]), organizationId: uuid.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/organization/leave',
    summary: 'Leave an organization (revokes the API keys the caller created there)',
    access: session({ organization: true }),
    tier: 'global',
    organization: 'body',
    transaction: 'rollback-refusals',
    before: lockOrganizationOwners,
    after: recordMemberLeft,
    body: z.object({ organizationId: uuid.optional() }).strict(),
  },
];
